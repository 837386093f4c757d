"""Color space and dtype conversions."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import PhotometricAugmentor
from .._opencv import cv2

__all__ = ["ColorSpace", "Grayscale", "ToUint8", "ToFloat32"]


class ColorSpace(PhotometricAugmentor):
    """Convert to another color space with ``cv2.cvtColor``."""

    def __init__(self, mode: int, keepdims: bool = True) -> None:
        """
        Args:
            mode: an OpenCV conversion code, e.g. ``cv2.COLOR_BGR2HSV``.
            keepdims (bool): keep a channel axis when the conversion drops it.
        """
        super().__init__()
        self.mode, self.keepdims = mode, keepdims

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        out = cv2.cvtColor(img, self.mode)
        if self.keepdims and out.ndim != img.ndim:
            out = out[..., None]
        return out


class Grayscale(ColorSpace):
    """Convert an RGB or BGR image to grayscale."""

    def __init__(self, keepdims: bool = True, rgb: bool = False, keepshape: bool = False) -> None:
        """
        Args:
            keepdims (bool): return shape (h, w, 1) instead of (h, w).
            rgb (bool): the input is RGB (default: BGR).
            keepshape (bool): repeat the gray channel 3 times, so the output has the input's shape
                (needs ``keepdims``).
        """
        if keepshape and not keepdims:
            raise ValueError("Grayscale(keepshape=True) needs keepdims=True")
        super().__init__(cv2.COLOR_RGB2GRAY if rgb else cv2.COLOR_BGR2GRAY, keepdims)
        self.keepshape, self.rgb = keepshape, rgb

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        out = super()._augment(img, _)
        if self.keepshape:
            return np.concatenate([out] * 3, axis=2)
        return out


class ToUint8(PhotometricAugmentor):
    """Clip to [0, 255] and convert to uint8 (e.g. to send fewer bytes between processes)."""

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        return np.clip(img, 0, 255).astype(np.uint8)


class ToFloat32(PhotometricAugmentor):
    """Convert to float32 (later augmentors then keep more precision)."""

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        return img.astype(np.float32)
