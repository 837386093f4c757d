"""Noise augmentors: JPEG re-encoding, Gaussian noise, salt-and-pepper."""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import PhotometricAugmentor
from .._opencv import cv2

__all__ = ["JpegNoise", "GaussianNoise", "SaltPepperNoise"]


class JpegNoise(PhotometricAugmentor):
    """Encode as JPEG with a random quality and decode again (the output has 3 channels)."""

    def __init__(self, quality_range: tuple = (40, 100)) -> None:
        """
        Args:
            quality_range (tuple): the [low, high) range of the JPEG quality.
        """
        super().__init__()
        self.quality_range = quality_range

    def _get_augment_params(self, img: np.ndarray) -> Any:
        return int(self.rng.randint(*self.quality_range))

    def _augment(self, img: np.ndarray, q: int) -> np.ndarray:
        ok, enc = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, int(q)])
        if not ok:
            raise ValueError(f"JpegNoise: OpenCV could not encode an image of shape {img.shape} and dtype "
                             f"{img.dtype} as JPEG")
        return cv2.imdecode(enc, cv2.IMREAD_COLOR).astype(img.dtype, copy=False)


class GaussianNoise(PhotometricAugmentor):
    """Add noise drawn from N(0, sigma^2) to every value."""

    def __init__(self, sigma: float = 1, clip: bool = True) -> None:
        """
        Args:
            sigma (float): the standard deviation.
            clip (bool): clip to [0, 255] (always done for uint8 images).
        """
        super().__init__()
        self.sigma, self.clip = sigma, clip

    def _get_augment_params(self, img: np.ndarray) -> Any:
        return self.rng.randn(*img.shape)

    def _augment(self, img: np.ndarray, noise: np.ndarray) -> np.ndarray:
        old_dtype = img.dtype
        out = img + noise * self.sigma
        if self.clip or old_dtype == np.uint8:
            out = np.clip(out, 0, 255)
        return out.astype(old_dtype, copy=False)


class SaltPepperNoise(PhotometricAugmentor):
    """Set random values (each channel on its own) to 255 or 0. Changes the image in place."""

    def __init__(self, white_prob: float = 0.05, black_prob: float = 0.05) -> None:
        """
        Args:
            white_prob (float): the probability of a value becoming 255.
            black_prob (float): the probability of a value becoming 0.
        """
        if white_prob + black_prob > 1:
            raise ValueError(f"SaltPepperNoise(white_prob={white_prob}, black_prob={black_prob}): "
                             "the probabilities must not sum to more than 1")
        super().__init__()
        self.white_prob, self.black_prob = white_prob, black_prob

    def _get_augment_params(self, img: np.ndarray) -> Any:
        return self.rng.uniform(low=0, high=1, size=img.shape)

    def _augment(self, img: np.ndarray, param: np.ndarray) -> np.ndarray:
        img[param > (1 - self.white_prob)] = 255
        img[param < self.black_prob] = 0
        return img
