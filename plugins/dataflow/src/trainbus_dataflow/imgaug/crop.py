"""Crop augmentors."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .base import ImageAugmentor, ImagePlaceholder, _declare_non_mutating, hw_pair
from .misc import ResizeShortestEdge
from .transform import CropTransform, PhotometricTransform, ResizeTransform, TransformList
from .._opencv import INTER_LINEAR, cv2

__all__ = ["RandomCrop", "CenterCrop", "RandomCropRandomShape", "GoogleNetRandomCropAndResize", "RandomCutout"]


def _check_fits(who: Any, img_shape: tuple, crop_shape: tuple) -> None:
    if img_shape[0] < crop_shape[0] or img_shape[1] < crop_shape[1]:
        raise ValueError(f"{who}: cannot crop {crop_shape[0]}x{crop_shape[1]} (h x w) out of an image of shape "
                         f"{tuple(img_shape)}; the crop must not be larger than the image (resize first, or "
                         "choose a smaller crop_shape)")


class RandomCrop(ImageAugmentor):
    """Crop a window of fixed size at a random position."""

    def __init__(self, crop_shape: Any) -> None:
        """
        Args:
            crop_shape: an (h, w) pair or an int (a square).
        """
        self.crop_shape = hw_pair(crop_shape, "RandomCrop", "crop_shape")
        super().__init__()

    def get_transform(self, img: np.ndarray) -> Any:
        shape = img.shape
        _check_fits(self, shape, self.crop_shape)
        y0 = self.rng.randint(shape[0] - self.crop_shape[0] + 1)
        x0 = self.rng.randint(shape[1] - self.crop_shape[1] + 1)
        return CropTransform(y0, x0, self.crop_shape[0], self.crop_shape[1])


class CenterCrop(ImageAugmentor):
    """Crop a window of fixed size at the center."""

    def __init__(self, crop_shape: Any) -> None:
        """
        Args:
            crop_shape: an (h, w) pair or an int (a square).
        """
        self.crop_shape = hw_pair(crop_shape, "CenterCrop", "crop_shape")
        super().__init__()

    def get_transform(self, img: Any) -> Any:
        shape = img.shape
        _check_fits(self, shape, self.crop_shape)
        y0 = int((shape[0] - self.crop_shape[0]) * 0.5)
        x0 = int((shape[1] - self.crop_shape[1]) * 0.5)
        return CropTransform(y0, x0, self.crop_shape[0], self.crop_shape[1])


class RandomCropRandomShape(ImageAugmentor):
    """Crop a window of random size (h in [hmin, hmax], w in [wmin, wmax], both ends included) at a random
    position."""

    def __init__(self, wmin: int, hmin: int, wmax: int | None = None, hmax: int | None = None,
                 max_aspect_ratio: float | None = None) -> None:
        """
        Args:
            wmin, hmin: the smallest width and height.
            wmax, hmax: the largest width and height; None means the image's.
            max_aspect_ratio: ignored (kept for compatibility; it never had an effect).
        """
        super().__init__()
        if max_aspect_ratio is not None:
            warnings.warn("RandomCropRandomShape(max_aspect_ratio=...) has no effect", DeprecationWarning,
                          stacklevel=2)
        self.wmin, self.hmin, self.wmax, self.hmax = wmin, hmin, wmax, hmax
        self.max_aspect_ratio = max_aspect_ratio

    def get_transform(self, img: np.ndarray) -> Any:
        hmax = self.hmax or img.shape[0]
        wmax = self.wmax or img.shape[1]
        h = self.rng.randint(self.hmin, hmax + 1)
        w = self.rng.randint(self.wmin, wmax + 1)
        _check_fits(self, img.shape, (h, w))
        diffh, diffw = img.shape[0] - h, img.shape[1] - w
        y0 = 0 if diffh == 0 else self.rng.randint(diffh)
        x0 = 0 if diffw == 0 else self.rng.randint(diffw)
        return CropTransform(y0, x0, h, w)


class GoogleNetRandomCropAndResize(ImageAugmentor):
    """The random-area, random-aspect-ratio crop of "Going Deeper with Convolutions" (Sec. 6), then a resize.

    Up to 10 tries for a crop covering ``crop_area_fraction`` of the area with an aspect ratio in
    ``aspect_ratio_range`` (as in fb.resnet.torch); when none fits, ``ResizeShortestEdge`` + ``CenterCrop``.
    The output is ``target_shape`` x ``target_shape``.
    """

    def __init__(self, crop_area_fraction: tuple = (0.08, 1.), aspect_ratio_range: tuple = (0.75, 1.333),
                 target_shape: int = 224, interp: int = INTER_LINEAR) -> None:
        """
        Args:
            crop_area_fraction (tuple(float)): range of the crop's area as a fraction of the image's.
            aspect_ratio_range (tuple(float)): range of the crop's width / height.
            target_shape (int): the output side length.
            interp: a cv2 interpolation flag.
        """
        super().__init__()
        self.crop_area_fraction, self.aspect_ratio_range = crop_area_fraction, aspect_ratio_range
        self.target_shape, self.interp = target_shape, interp

    def get_transform(self, img: np.ndarray) -> Any:
        h, w = img.shape[:2]
        area = h * w
        for _ in range(10):
            target_area = self.rng.uniform(*self.crop_area_fraction) * area
            aspect = self.rng.uniform(*self.aspect_ratio_range)
            ww = int(np.sqrt(target_area * aspect) + 0.5)
            hh = int(np.sqrt(target_area / aspect) + 0.5)
            if self.rng.uniform() < 0.5:
                ww, hh = hh, ww
            if hh <= h and ww <= w:
                x1 = self.rng.randint(0, w - ww + 1)
                y1 = self.rng.randint(0, h - hh + 1)
                return TransformList([CropTransform(y1, x1, hh, ww),
                                      ResizeTransform(hh, ww, self.target_shape, self.target_shape, self.interp)])
        resize = ResizeShortestEdge(self.target_shape, interp=self.interp).get_transform(img)
        crop = CenterCrop(self.target_shape).get_transform(ImagePlaceholder(shape=(resize.new_h, resize.new_w)))
        return TransformList([resize, crop])


class RandomCutout(ImageAugmentor):
    """Cutout (https://arxiv.org/abs/1708.04552): fill a random rectangle with ``fill``. Changes the image in
    place."""

    def __init__(self, h_range: Any, w_range: Any, fill: float = 0.) -> None:
        """
        Args:
            h_range (int or tuple): the rectangle's height, or a [low, high) range to draw it from.
            w_range (int or tuple): the same for the width.
            fill (float): the value written into the rectangle.
        """
        super().__init__()
        self.h_range, self.w_range, self.fill = h_range, w_range, fill

    def _draw(self, rng_or_int: Any) -> int:
        if isinstance(rng_or_int, (int, np.integer)):
            return int(rng_or_int)
        return int(self.rng.randint(*rng_or_int))

    def get_transform(self, img: np.ndarray) -> Any:
        h = self._draw(self.h_range)
        w = self._draw(self.w_range)
        if h > img.shape[0] or w > img.shape[1]:
            raise ValueError(f"{self}: a {h}x{w} cutout does not fit in an image of shape {img.shape}")
        x0 = self.rng.randint(0, img.shape[1] + 1 - w)
        y0 = self.rng.randint(0, img.shape[0] + 1 - h)
        fill = self.fill

        def cutout(im: np.ndarray) -> np.ndarray:
            im[y0:y0 + h, x0:x0 + w] = fill
            return im

        return PhotometricTransform(cutout, "cutout")


# They only read the image's shape.
_declare_non_mutating(RandomCrop.get_transform, CenterCrop.get_transform, RandomCropRandomShape.get_transform)
