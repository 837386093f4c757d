"""Photometric augmentors: hue, brightness, contrast, saturation, lighting, blur, gamma, clip, normalization.

Unless an augmentor says otherwise, the output has the input's dtype; uint8 results are clipped to [0, 255]
(``clip=True`` also clips floating point results).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np

from .base import PhotometricAugmentor
from .._opencv import cv2

__all__ = ["Hue", "Brightness", "BrightnessScale", "Contrast", "MeanVarianceNormalize", "GaussianBlur", "Gamma",
           "Clip", "Saturation", "Lighting", "MinMaxNormalize"]


def _finish(img: np.ndarray, old_dtype: np.dtype, clip: bool) -> np.ndarray:
    if clip or old_dtype == np.uint8:
        img = np.clip(img, 0, 255)
    return img.astype(old_dtype, copy=False)


def _pixel_stats(img: np.ndarray, all_channel: bool, *stats: Callable[..., Any]) -> tuple:
    """Each of ``stats`` (``np.mean``, ``np.max``, ...) over all of ``img``, or per channel over the
    (h, w) axes, kept broadcastable against ``img``."""
    if all_channel:
        return tuple(f(img) for f in stats)
    return tuple(f(img, axis=(0, 1), keepdims=True) for f in stats)


class Hue(PhotometricAugmentor):
    """Shift the hue by a random offset (in OpenCV's 0..180 hue units)."""

    def __init__(self, range: tuple = (0, 180), rgb: bool = True) -> None:  # noqa: A002 - tensorpack's name
        """
        Args:
            range (tuple): the range the hue offset is drawn from (at most [-90, 90] is meaningful).
            rgb (bool): whether the input is RGB (else BGR).
        """
        super().__init__()
        self.range, self.rgb = range, bool(rgb)

    def _get_augment_params(self, img: np.ndarray) -> Any:
        return self._rand_range(*self.range)

    def _augment(self, img: np.ndarray, hue: Any) -> np.ndarray:
        hsv = cv2.cvtColor(img, cv2.COLOR_RGB2HSV if self.rgb else cv2.COLOR_BGR2HSV)
        if hsv.dtype.itemsize == 1:
            hsv[..., 0] = (hsv[..., 0] + hue) % 180  # 8-bit hue is 0..179
        else:
            hsv[..., 0] = (hsv[..., 0] + 2 * hue) % 360  # floating point hue is 0..360
        return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB if self.rgb else cv2.COLOR_HSV2BGR)


class Brightness(PhotometricAugmentor):
    """Add a random value in [-delta, delta] to every pixel."""

    def __init__(self, delta: float, clip: bool = True) -> None:
        """
        Args:
            delta (float): the largest absolute change (> 0).
            clip (bool): clip to [0, 255] also for floating point images.
        """
        super().__init__()
        if not delta > 0:
            raise ValueError(f"Brightness(delta={delta}): delta must be > 0")
        self.delta, self.clip = delta, clip

    def _get_augment_params(self, img: np.ndarray) -> Any:
        return self._rand_range(-self.delta, self.delta)

    def _augment(self, img: np.ndarray, v: Any) -> np.ndarray:
        old_dtype = img.dtype
        out = img.astype("float32")
        out += v
        return _finish(out, old_dtype, self.clip)


class BrightnessScale(PhotometricAugmentor):
    """Multiply every pixel by a random factor in [range[0], range[1])."""

    def __init__(self, range: tuple, clip: bool = True) -> None:  # noqa: A002 - tensorpack's name
        """
        Args:
            range (tuple): the range of the factor.
            clip (bool): clip to [0, 255] also for floating point images.
        """
        super().__init__()
        self.range, self.clip = range, clip

    def _get_augment_params(self, img: np.ndarray) -> Any:
        return self._rand_range(*self.range)

    def _augment(self, img: np.ndarray, v: Any) -> np.ndarray:
        old_dtype = img.dtype
        out = img.astype("float32")
        out *= v
        return _finish(out, old_dtype, self.clip)


class Contrast(PhotometricAugmentor):
    """``x = (x - mean) * factor + mean`` with a random ``factor``."""

    def __init__(self, factor_range: tuple, rgb: bool | None = None, clip: bool = True) -> None:
        """
        Args:
            factor_range (tuple): the range of the contrast factor.
            rgb (bool or None): None: the mean of each channel; True / False: the mean of the grayscale image,
                reading the input as RGB / BGR.
            clip (bool): clip to [0, 255] also for floating point images.
        """
        super().__init__()
        self.factor_range, self.rgb, self.clip = factor_range, rgb, clip

    def _get_augment_params(self, img: np.ndarray) -> Any:
        return self._rand_range(*self.factor_range)

    def _augment(self, img: np.ndarray, r: Any) -> np.ndarray:
        old_dtype = img.dtype
        if img.ndim == 3:
            if self.rgb is not None:
                gray = cv2.cvtColor(img.astype("float32"), cv2.COLOR_RGB2GRAY if self.rgb else cv2.COLOR_BGR2GRAY)
                mean = np.mean(gray)
            else:
                mean = np.mean(img, axis=(0, 1), keepdims=True)
        else:
            mean = np.mean(img)
        out = img * r + mean * (1 - r)
        return _finish(out, old_dtype, self.clip)


class MeanVarianceNormalize(PhotometricAugmentor):
    """``x = (x - mean) / max(std, 1 / sqrt(number of values))``. Returns float32."""

    def __init__(self, all_channel: bool = True) -> None:
        """
        Args:
            all_channel (bool): one mean and std for all channels (else per channel).
        """
        super().__init__()
        self.all_channel = all_channel

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        img = img.astype("float32")
        mean, std = _pixel_stats(img, self.all_channel, np.mean, np.std)
        std = np.maximum(std, np.float32(1.0 / np.sqrt(np.prod(img.shape))))
        return ((img - mean) / std).astype("float32", copy=False)


class GaussianBlur(PhotometricAugmentor):
    """Gaussian blur with a random kernel size ``2 * size + 1`` and random sigma."""

    def __init__(self, size_range: Any = (0, 3), sigma_range: tuple = (0, 0), symmetric: bool = True,
                 max_size: int | None = None) -> None:
        """
        Args:
            size_range (tuple[int] or int): ``size`` is drawn from this [low, high) range (an int n means (0, n)).
            sigma_range (tuple[float]): (min, max) of sigma; 0 lets OpenCV derive it from the kernel size.
            symmetric (bool): the same size and sigma for x and y.
            max_size (int): deprecated; the same as ``size_range=(0, max_size)``.
        """
        super().__init__()
        if not isinstance(size_range, (list, tuple)):
            size_range = (0, size_range)
        if not isinstance(sigma_range, (list, tuple)):
            raise ValueError(f"GaussianBlur(sigma_range={sigma_range!r}): expected a (min, max) pair")
        if max_size is not None:
            warnings.warn("GaussianBlur(max_size=n) is deprecated; use size_range=(0, n)", DeprecationWarning,
                          stacklevel=2)
            size_range = (0, max_size)
        self.size_range, self.sigma_range, self.symmetric, self.max_size = size_range, sigma_range, symmetric, max_size

    def _get_augment_params(self, img: np.ndarray) -> Any:
        size_xy = self.rng.randint(self.size_range[0], self.size_range[1], size=(2,)) * 2 + 1
        sigma_xy = self._rand_range(*self.sigma_range, size=(2,))
        if self.symmetric:
            size_xy[1] = size_xy[0]
            sigma_xy[1] = sigma_xy[0]
        return (int(size_xy[0]), int(size_xy[1])), (float(sigma_xy[0]), float(sigma_xy[1]))

    def _augment(self, img: np.ndarray, prm: Any) -> np.ndarray:
        size, sigma = prm
        out = cv2.GaussianBlur(img, size, sigmaX=sigma[0], sigmaY=sigma[1], borderType=cv2.BORDER_REPLICATE)
        return np.reshape(out, img.shape)


class Gamma(PhotometricAugmentor):
    """Gamma correction ``255 * (x / 255) ** (1 / (1 + gamma))`` with a random ``gamma``, through a uint8 lookup
    table (values are clipped to [0, 255] and rounded down; the output keeps the input's dtype)."""

    def __init__(self, range: tuple = (-0.5, 0.5)) -> None:  # noqa: A002 - tensorpack's name
        """
        Args:
            range (tuple): the range of ``gamma``.
        """
        super().__init__()
        self.range = range

    def _get_augment_params(self, img: np.ndarray) -> Any:
        return self._rand_range(*self.range)

    def _augment(self, img: np.ndarray, gamma: Any) -> np.ndarray:
        old_dtype = img.dtype
        lut = ((np.arange(256, dtype="float32") / 255) ** (1. / (1. + gamma)) * 255).astype("uint8")
        as_u8 = img if img.dtype == np.uint8 else np.clip(img, 0, 255).astype("uint8")
        out = cv2.LUT(as_u8, lut).astype(old_dtype, copy=False)
        if img.ndim == 3 and out.ndim == 2:
            out = out[:, :, np.newaxis]
        return out


class Clip(PhotometricAugmentor):
    """Clip values to [min, max]."""

    def __init__(self, min: float = 0, max: float = 255) -> None:  # noqa: A002 - tensorpack's names
        """
        Args:
            min, max: the range.
        """
        super().__init__()
        self.min, self.max = min, max

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        return np.clip(img, self.min, self.max)


class Saturation(PhotometricAugmentor):
    """Blend with the grayscale image: ``x * v + gray * (1 - v)``, ``v`` in [1 - alpha, 1 + alpha]
    (as fb.resnet.torch). Needs a 3-channel image."""

    def __init__(self, alpha: float = 0.4, rgb: bool = True, clip: bool = True) -> None:
        """
        Args:
            alpha (float): the largest change of saturation (< 1).
            rgb (bool): whether the input is RGB (else BGR).
            clip (bool): clip to [0, 255] also for floating point images.
        """
        super().__init__()
        if not alpha < 1:
            raise ValueError(f"Saturation(alpha={alpha}): alpha must be below 1")
        self.alpha, self.rgb, self.clip = alpha, bool(rgb), clip

    def _get_augment_params(self, img: np.ndarray) -> Any:
        return 1 + self._rand_range(-self.alpha, self.alpha)

    def _augment(self, img: np.ndarray, v: Any) -> np.ndarray:
        old_dtype = img.dtype
        gray = cv2.cvtColor(img, cv2.COLOR_RGB2GRAY if self.rgb else cv2.COLOR_BGR2GRAY)
        out = img * v + (gray * (1 - v))[:, :, np.newaxis]
        return _finish(out, old_dtype, self.clip)


class Lighting(PhotometricAugmentor):
    """AlexNet's PCA lighting noise (as fb.resnet.torch): add ``eigvec @ (randn(3) * std * eigval)`` to every
    pixel. Needs a 3-channel image."""

    def __init__(self, std: float, eigval: Any, eigvec: Any, clip: bool = True) -> None:
        """
        Args:
            std (float): the standard deviation of the random weights.
            eigval: the 3 eigenvalues.
            eigvec: a 3x3 matrix whose columns are the eigenvectors.
            clip (bool): clip to [0, 255] also for floating point images.
        """
        super().__init__()
        eigval = np.asarray(eigval, dtype="float32")
        eigvec = np.asarray(eigvec, dtype="float32")
        if eigval.shape != (3,) or eigvec.shape != (3, 3):
            raise ValueError(f"Lighting: eigval must have shape (3,) and eigvec (3, 3), got {eigval.shape} and "
                             f"{eigvec.shape}")
        self.std, self.eigval, self.eigvec, self.clip = std, eigval, eigvec, clip

    def _get_augment_params(self, img: np.ndarray) -> Any:
        if img.ndim != 3 or img.shape[2] != 3:
            raise ValueError(f"Lighting needs an image with 3 channels, got shape {img.shape}")
        return (self.rng.randn(3) * self.std).astype("float32")

    def _augment(self, img: np.ndarray, v: Any) -> np.ndarray:
        old_dtype = img.dtype
        inc = self.eigvec @ (v * self.eigval)
        return _finish(np.add(img, inc), old_dtype, self.clip)


class MinMaxNormalize(PhotometricAugmentor):
    """Scale values linearly to [min, max]. Returns float32."""

    def __init__(self, min: float = 0, max: float = 255, all_channel: bool = True) -> None:  # noqa: A002
        """
        Args:
            min, max (float): the new range.
            all_channel (bool): one range for all channels (else per channel).
        """
        super().__init__()
        self.min, self.max, self.all_channel = min, max, all_channel

    def _augment(self, img: np.ndarray, _: Any) -> np.ndarray:
        img = img.astype("float32")
        lo, hi = _pixel_stats(img, self.all_channel, np.min, np.max)
        return (self.max - self.min) * (img - lo) / (hi - lo) + self.min
