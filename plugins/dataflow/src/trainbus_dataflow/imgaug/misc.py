"""Flip, resize and transpose augmentors."""

from __future__ import annotations

from typing import Any

import numpy as np

from trainbus.utils import logger

from .base import ImageAugmentor, _declare_non_mutating, hw_pair
from .transform import FlipTransform, NoOpTransform, ResizeTransform, TransposeTransform
from .._opencv import INTER_LINEAR, cv2

__all__ = ["Flip", "Resize", "RandomResize", "ResizeShortestEdge", "Transpose"]


class Flip(ImageAugmentor):
    """Flip the image horizontally or vertically with probability ``prob``."""

    def __init__(self, horiz: bool = False, vert: bool = False, prob: float = 0.5) -> None:
        """
        Args:
            horiz (bool): flip left-right.
            vert (bool): flip top-bottom.
            prob (float): the probability of flipping.
        """
        super().__init__()
        if horiz and vert:
            raise ValueError("Flip(horiz=True, vert=True): one Flip does one direction; use two Flip augmentors")
        if not horiz and not vert:
            raise ValueError("Flip(): set horiz=True or vert=True")
        self.horiz, self.vert, self.prob = horiz, vert, prob

    def get_transform(self, img: np.ndarray) -> Any:
        h, w = img.shape[:2]
        if self._rand_range() < self.prob:
            return FlipTransform(h, w, self.horiz)
        return NoOpTransform()


class Resize(ImageAugmentor):
    """Resize to a fixed size."""

    def __init__(self, shape: Any, interp: int = INTER_LINEAR) -> None:
        """
        Args:
            shape: an (h, w) pair or an int (a square).
            interp: a cv2 interpolation flag.
        """
        self.shape = hw_pair(shape, "Resize", "shape")
        self.interp = interp
        super().__init__()

    def get_transform(self, img: np.ndarray) -> Any:
        return ResizeTransform(img.shape[0], img.shape[1], self.shape[0], self.shape[1], self.interp)


class ResizeShortestEdge(ImageAugmentor):
    """Resize so the shorter side becomes ``size``, keeping the aspect ratio."""

    def __init__(self, size: int, interp: int = INTER_LINEAR) -> None:
        """
        Args:
            size (int): the length of the shorter side after resizing.
            interp: a cv2 interpolation flag.
        """
        self.size = int(size)
        self.interp = interp
        super().__init__()

    def get_transform(self, img: np.ndarray) -> Any:
        h, w = img.shape[:2]
        scale = self.size * 1.0 / min(h, w)
        if h < w:
            newh, neww = self.size, int(scale * w + 0.5)
        else:
            newh, neww = int(scale * h + 0.5), self.size
        return ResizeTransform(h, w, newh, neww, self.interp)


class RandomResize(ImageAugmentor):
    """Resize width and height by random amounts (scale factors if the ranges are floats, pixels if ints)."""

    def __init__(self, xrange: tuple, yrange: tuple | None = None, minimum: tuple = (0, 0),
                 aspect_ratio_thres: float = 0.15, interp: int = INTER_LINEAR) -> None:
        """
        Args:
            xrange (tuple): (min, max) of the new width: scale factors when either is a float (e.g. (0.9, 1.2)),
                pixels when both are ints (e.g. (200, 350)).
            yrange (tuple): the same for the height; leave None when ``aspect_ratio_thres == 0``.
            minimum (tuple): (min_width, min_height) in pixels.
            aspect_ratio_thres (float): draw again when the aspect ratio changes by more than this fraction;
                0 keeps the aspect ratio (the height follows the width).
            interp: a cv2 interpolation flag.
        """
        super().__init__()
        if aspect_ratio_thres < 0:
            raise ValueError(f"RandomResize(aspect_ratio_thres={aspect_ratio_thres}) must be >= 0")
        if aspect_ratio_thres > 0 and yrange is None:
            raise ValueError("RandomResize: yrange is required unless aspect_ratio_thres == 0")

        def is_float(rng: tuple) -> bool:
            return isinstance(rng[0], float) or isinstance(rng[1], float)

        if yrange is not None and is_float(xrange) != is_float(yrange):
            raise ValueError(f"RandomResize: xrange={xrange!r} and yrange={yrange!r} must both be scale factors "
                             "(floats) or both be pixel sizes (ints)")
        self._is_scale = is_float(xrange)
        if aspect_ratio_thres == 0:
            if self._is_scale and not (yrange is None or tuple(xrange) == tuple(yrange)):
                raise ValueError("RandomResize(aspect_ratio_thres=0) keeps the aspect ratio: yrange must be None "
                                 f"or equal to xrange, got xrange={xrange!r}, yrange={yrange!r}")
            if not self._is_scale and yrange is not None:
                logger.warn("RandomResize(aspect_ratio_thres=0): yrange is not used")
        self.xrange, self.yrange, self.minimum = xrange, yrange, minimum
        self.aspect_ratio_thres, self.interp = aspect_ratio_thres, interp

    def _dest_size(self, h: int, w: int) -> tuple[int, int]:
        sx = self._rand_range(*self.xrange)
        if self._is_scale:
            sy = sx if self.aspect_ratio_thres == 0 else self._rand_range(*self.yrange)
            dest_x, dest_y = max(sx * w, self.minimum[0]), max(sy * h, self.minimum[1])
        else:
            sy = sx * 1.0 / w * h if self.aspect_ratio_thres == 0 else self._rand_range(*self.yrange)
            dest_x, dest_y = max(sx, self.minimum[0]), max(sy, self.minimum[1])
        return int(dest_x + 0.5), int(dest_y + 0.5)

    def get_transform(self, img: np.ndarray) -> Any:
        h, w = img.shape[:2]
        for _ in range(51):
            dest_x, dest_y = self._dest_size(h, w)
            if self.aspect_ratio_thres > 0:
                old_ratio = w * 1.0 / h
                change = abs(dest_x * 1.0 / dest_y - old_ratio) / old_ratio
                if change >= self.aspect_ratio_thres + 1e-5:
                    continue
            return ResizeTransform(h, w, dest_y, dest_x, self.interp)
        logger.warn("RandomResize found no size within aspect_ratio_thres in 51 draws; the image keeps its size")
        return ResizeTransform(h, w, h, w, self.interp)


class Transpose(ImageAugmentor):
    """Transpose the image (swap rows and columns) with probability ``prob``."""

    def __init__(self, prob: float = 0.5) -> None:
        """
        Args:
            prob (float): the probability of transposing.
        """
        super().__init__()
        self.prob = prob

    def get_transform(self, img: np.ndarray) -> Any:
        if self.rng.rand() < self.prob:
            return TransposeTransform()
        return NoOpTransform()


# They only read the image's shape.
_declare_non_mutating(Flip.get_transform, Resize.get_transform, ResizeShortestEdge.get_transform,
                     RandomResize.get_transform, Transpose.get_transform)
