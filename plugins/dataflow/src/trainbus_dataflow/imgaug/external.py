"""Wrappers of augmentors from other libraries: aleju's ``imgaug`` and ``albumentations``."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from .base import ImageAugmentor
from .transform import Transform

__all__ = ["IAAugmentor", "Albumentations"]


def _require(module: str, wrapper: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"imgaug.{wrapper} wraps the '{module}' library, which is not installed "
                          f"({e}); install it with: pip install {module}") from None


class IAATransform(Transform):
    """A deterministic aleju/imgaug augmenter applied to images and keypoints."""

    def __init__(self, aug: Any, img_shape: tuple) -> None:
        self.aug, self.img_shape = aug, img_shape

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return self.aug.augment_image(img)

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        ia = _require("imgaug", "IAAugmentor")
        points = ia.KeypointsOnImage([ia.Keypoint(x=x, y=y) for x, y in coords], shape=self.img_shape)
        moved = self.aug.augment_keypoints([points])[0].keypoints
        return np.asarray([[p.x, p.y] for p in moved])


class IAAugmentor(ImageAugmentor):
    """Use an augmenter of the aleju/imgaug library (https://github.com/aleju/imgaug) (not this package).

    Images and coordinates are supported; that library handles only uint8 images, keeps the image size, and
    moves coordinates only approximately.
    """

    def __init__(self, augmentor: Any) -> None:
        """
        Args:
            augmentor: an ``imgaug.augmenters.Augmenter``.
        """
        _require("imgaug", "IAAugmentor")
        super().__init__()
        self._aug = augmentor

    def get_transform(self, img: np.ndarray) -> Any:
        return IAATransform(self._aug.to_deterministic(), img.shape)


class AlbumentationsTransform(Transform):
    """An albumentations transform with fixed parameters (images only)."""

    def __init__(self, aug: Any, param: dict) -> None:
        self.aug, self.param = aug, param

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return self.aug.apply(img, **self.param)


class Albumentations(ImageAugmentor):
    """Use a transform of the albumentations library (https://github.com/albumentations-team/albumentations).
    Coordinates are not supported."""

    def __init__(self, augmentor: Any) -> None:
        """
        Args:
            augmentor: an ``albumentations.BasicTransform``.
        """
        _require("albumentations", "Albumentations")
        super().__init__()
        self._aug = augmentor

    def get_transform(self, img: np.ndarray) -> Any:
        return AlbumentationsTransform(self._aug, self._aug.get_params())
