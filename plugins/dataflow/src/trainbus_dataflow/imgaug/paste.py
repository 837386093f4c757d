"""Paste the image onto a larger canvas."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import ImageAugmentor
from .transform import TransformFactory

__all__ = ["CenterPaste", "BackgroundFiller", "ConstantBackgroundFiller", "RandomPaste"]


class BackgroundFiller:
    """Makes the canvas an image is pasted on. Subclasses implement ``_fill(background_shape, img)``."""

    def fill(self, background_shape: Any, img: np.ndarray) -> np.ndarray:
        """A canvas of size ``background_shape`` = (h, w) for ``img`` (with its channels and dtype)."""
        return self._fill(tuple(background_shape), img)

    def _fill(self, background_shape: tuple, img: np.ndarray) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} must implement _fill(background_shape, img)")


class ConstantBackgroundFiller(BackgroundFiller):
    """A canvas filled with one value."""

    def __init__(self, value: float) -> None:
        """
        Args:
            value (float): the fill value.
        """
        self.value = value

    def _fill(self, background_shape: tuple, img: np.ndarray) -> np.ndarray:
        if img.ndim not in (2, 3):
            raise ValueError(f"ConstantBackgroundFiller: images must have shape (h, w) or (h, w, c), got {img.shape}")
        shape = background_shape + img.shape[2:]
        return np.full(shape, self.value, dtype=img.dtype)


class CenterPaste(ImageAugmentor):
    """Paste the image at the center of a canvas of size ``background_shape``. Coordinates move with it."""

    def __init__(self, background_shape: tuple, background_filler: BackgroundFiller | None = None) -> None:
        """
        Args:
            background_shape (tuple): (h, w) of the canvas.
            background_filler (BackgroundFiller): makes the canvas; default: zeros.
        """
        if background_filler is None:
            background_filler = ConstantBackgroundFiller(0)
        self.background_shape, self.background_filler = tuple(background_shape), background_filler
        super().__init__()

    def _paste(self, img: np.ndarray, y0: int, x0: int) -> np.ndarray:
        canvas = self.background_filler.fill(self.background_shape, img)
        canvas[y0:y0 + img.shape[0], x0:x0 + img.shape[1]] = img
        return canvas

    def _offset_transform(self, y0: int, x0: int) -> Any:
        def apply_coords(coords: np.ndarray) -> np.ndarray:
            coords[:, 0] += x0
            coords[:, 1] += y0
            return coords

        return TransformFactory(name=str(self), apply_image=lambda im: self._paste(im, y0, x0),
                                apply_coords=apply_coords)

    def get_transform(self, img: np.ndarray) -> Any:
        h, w = img.shape[:2]
        if self.background_shape[0] < h or self.background_shape[1] < w:
            raise ValueError(f"{self}: an image of shape {img.shape} does not fit on a canvas of size "
                             f"{self.background_shape}")
        return self._offset_transform(int((self.background_shape[0] - h) * 0.5),
                                      int((self.background_shape[1] - w) * 0.5))


class RandomPaste(CenterPaste):
    """Paste the image at a random position of a canvas of size ``background_shape`` (larger than the image in
    both directions). Coordinates move with it."""

    def get_transform(self, img: np.ndarray) -> Any:
        h, w = img.shape[:2]
        if self.background_shape[0] <= h or self.background_shape[1] <= w:
            raise ValueError(f"{self}: the canvas {self.background_shape} must be larger than the image "
                             f"(shape {img.shape}) in both height and width")
        y0 = self._rand_range(self.background_shape[0] - h)
        x0 = self._rand_range(self.background_shape[1] - w)
        return self._offset_transform(int(y0), int(x0))
