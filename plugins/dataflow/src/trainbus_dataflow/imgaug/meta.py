"""Augmentors that combine other augmentors, and wrappers of plain functions."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .base import ImageAugmentor
from .transform import NoOpTransform, TransformFactory, TransformList

__all__ = ["RandomChooseAug", "MapImage", "Identity", "RandomApplyAug", "RandomOrderAug"]


def _check_aug(who: str, aug: Any) -> None:
    if not hasattr(aug, "get_transform") or not hasattr(aug, "reset_state"):
        raise TypeError(f"{who}: {aug!r} is not an augmentor (it needs get_transform and reset_state)")


class Identity(ImageAugmentor):
    """Changes nothing."""

    def get_transform(self, img: np.ndarray) -> Any:
        return NoOpTransform()


class RandomApplyAug(ImageAugmentor):
    """Apply ``aug`` with probability ``prob``, else change nothing."""

    def __init__(self, aug: ImageAugmentor, prob: float) -> None:
        """
        Args:
            aug (ImageAugmentor): the augmentor.
            prob (float): the probability of applying it.
        """
        _check_aug("RandomApplyAug", aug)
        self.aug, self.prob = aug, prob
        super().__init__()

    def reset_state(self) -> None:
        super().reset_state()
        self.aug.reset_state()

    def get_transform(self, img: np.ndarray) -> Any:
        if self.rng.rand() < self.prob:
            return self.aug.get_transform(img)
        return NoOpTransform()


class _AugmentorGroup(ImageAugmentor):
    """An augmentor made of the augmentors in ``self.aug_lists``; reseeding it reseeds them too."""

    aug_lists: list

    def reset_state(self) -> None:
        super().reset_state()
        for a in self.aug_lists:
            a.reset_state()


class RandomChooseAug(_AugmentorGroup):
    """Apply one augmentor chosen at random from a list (uniformly, or with given probabilities)."""

    def __init__(self, aug_lists: list) -> None:
        """
        Args:
            aug_lists (list): augmentors, or (augmentor, probability) pairs.
        """
        if not aug_lists:
            raise ValueError("RandomChooseAug(aug_lists=[]): give at least one augmentor")
        if isinstance(aug_lists[0], (tuple, list)):
            prob = [float(k[1]) for k in aug_lists]
            aug_lists = [k[0] for k in aug_lists]
            if abs(sum(prob) - 1.0) > 1e-6:
                raise ValueError(f"RandomChooseAug: the probabilities {prob} must sum to 1")
        else:
            prob = [1.0 / len(aug_lists)] * len(aug_lists)
        for a in aug_lists:
            _check_aug("RandomChooseAug", a)
        self.aug_lists, self.prob = aug_lists, prob
        super().__init__()

    def get_transform(self, img: np.ndarray) -> Any:
        idx = self.rng.choice(len(self.aug_lists), p=self.prob)
        return self.aug_lists[idx].get_transform(img)


class RandomOrderAug(_AugmentorGroup):
    """Apply all augmentors, in a random order. Every augmentor draws its transform from the input image, so they
    should not change the image's shape."""

    def __init__(self, aug_lists: list) -> None:
        """
        Args:
            aug_lists (list): augmentors that keep the image shape.
        """
        for a in aug_lists:
            _check_aug("RandomOrderAug", a)
        self.aug_lists = aug_lists
        super().__init__()

    def get_transform(self, img: np.ndarray) -> Any:
        order = self.rng.permutation(len(self.aug_lists))
        tfms = [a.get_transform(img) for a in self.aug_lists]
        return TransformList([tfms[k] for k in order])


class MapImage(ImageAugmentor):
    """Apply a function to the image (and optionally another to the coordinates)."""

    def __init__(self, func: Callable[[np.ndarray], np.ndarray],
                 coord_func: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        """
        Args:
            func: image -> image.
            coord_func: Nx2 (x, y) coordinates -> coordinates. Without it, ``apply_coords`` raises
                ``NotImplementedError``.
        """
        super().__init__()
        if not callable(func):
            raise TypeError(f"MapImage(func={func!r}): func must be callable")
        self.func, self.coord_func = func, coord_func

    def get_transform(self, img: np.ndarray) -> Any:
        if self.coord_func:
            return TransformFactory(name="MapImage", apply_image=self.func, apply_coords=self.coord_func)
        return TransformFactory(name="MapImage", apply_image=self.func)
