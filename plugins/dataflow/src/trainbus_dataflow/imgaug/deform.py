"""Gaussian-weighted random deformation (slow; kept for compatibility)."""

from __future__ import annotations

from typing import Any

import numpy as np

from trainbus.utils import logger

from .base import ImageAugmentor
from .transform import TransformFactory

__all__ = ["GaussianDeform"]


class GaussianMap:
    """Gaussian weights over an (h, w) grid of normalized coordinates."""

    def __init__(self, image_shape: tuple, sigma: float = 0.5) -> None:
        if len(image_shape) != 2:
            raise ValueError(f"GaussianMap(image_shape={image_shape!r}): expected (h, w)")
        self.shape, self.sigma = tuple(image_shape), sigma

    def get_gaussian_weight(self, anchor: Any) -> np.ndarray:
        """Weights ``exp(-d^2 / sigma)``, ``d`` the distance from ``anchor`` = (y, x) in [0, 1] units."""
        ys = np.arange(self.shape[0], dtype="float32")[:, None] / self.shape[0] - anchor[0]
        xs = np.arange(self.shape[1], dtype="float32")[None, :] / self.shape[1] - anchor[1]
        return np.exp(-(xs ** 2 + ys ** 2) / self.sigma)


def bilinear_sample(img: np.ndarray, coords: np.ndarray) -> np.ndarray:
    """Sample ``img`` (h, w[, c]) at float ``coords`` (..., 2) given as (y, x), clamped to the image; float32."""
    h, w = img.shape[:2]
    y = np.clip(coords[..., 0], 0, h - 1)
    x = np.clip(coords[..., 1], 0, w - 1)
    y0 = np.floor(y).astype(np.int32)
    x0 = np.floor(x).astype(np.int32)
    y1 = np.minimum(y0 + 1, h - 1)
    x1 = np.minimum(x0 + 1, w - 1)
    dy, dx = (y - y0).astype("float32"), (x - x0).astype("float32")
    if img.ndim == 3:
        dy, dx = dy[..., None], dx[..., None]
    src = img.astype("float32", copy=False)
    top = src[y0, x0] * (1 - dx) + src[y0, x1] * dx
    bottom = src[y1, x0] * (1 - dx) + src[y1, x1] * dx
    return top * (1 - dy) + bottom * dy


class GaussianDeform(ImageAugmentor):
    """Move every pixel by a sum of random offsets at ``anchors``, weighted by Gaussians around them.
    The input must have size ``shape``; the output is float32."""

    def __init__(self, anchors: list, shape: tuple, sigma: float = 0.5, randrange: float | None = None) -> None:
        """
        Args:
            anchors (list): (y, x) centers in [0, 1].
            shape (tuple): the image size (h, w).
            sigma (float): the width of the Gaussian weights.
            randrange (float): the largest offset in pixels; default ``shape[0] / 8``.
        """
        logger.warn("GaussianDeform is slow; run it in several worker processes")
        super().__init__()
        self.anchors, self.shape, self.sigma = anchors, tuple(shape), sigma
        self.K = len(anchors)
        self.randrange = self.shape[0] / 8 if randrange is None else randrange
        grid = np.mgrid[0:self.shape[0], 0:self.shape[1]].transpose(1, 2, 0)
        self.grid = grid.astype("float32")  # (h, w, 2) of (y, x)
        gm = GaussianMap(self.shape, sigma=sigma)
        self.gws = np.stack([gm.get_gaussian_weight(a) for a in anchors], axis=-1).astype("float32")  # (h, w, K)

    def get_transform(self, img: np.ndarray) -> Any:
        if img.shape[:2] != self.shape:
            raise ValueError(f"GaussianDeform(shape={self.shape}) got an image of shape {img.shape}")
        v = (self.rng.rand(self.K, 2).astype("float32") - 0.5) * 2 * self.randrange
        return TransformFactory(name=str(self), apply_image=lambda im: bilinear_sample(im, self.grid + self.gws @ v))
