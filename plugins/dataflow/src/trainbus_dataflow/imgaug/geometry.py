"""Geometric augmentors built on affine warps: shift, rotation, rotate-and-crop, general affine."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .base import ImageAugmentor, _declare_non_mutating
from .transform import CropTransform, TransformList, WarpAffineTransform
from .._opencv import BORDER_REPLICATE, INTER_LINEAR, cv2

__all__ = ["Shift", "Rotation", "RotationAndCropValid", "Affine"]


def _check_step_deg(who: str, max_deg: float, step_deg: float | None) -> None:
    if step_deg is not None and not (max_deg == 180 and max_deg % step_deg == 0):
        raise ValueError(f"{who}(max_deg={max_deg}, step_deg={step_deg}): step_deg needs max_deg == 180 and must "
                         "divide 180")


class Shift(ImageAugmentor):
    """Shift by a random whole number of pixels horizontally and vertically."""

    def __init__(self, horiz_frac: float = 0, vert_frac: float = 0, border: int = BORDER_REPLICATE,
                 border_value: Any = 0) -> None:
        """
        Args:
            horiz_frac (float): the largest horizontal shift as a fraction of the width (< 1).
            vert_frac (float): the largest vertical shift as a fraction of the height (< 1).
            border: a cv2 border mode.
            border_value: the fill value when ``border == cv2.BORDER_CONSTANT``.
        """
        if not (horiz_frac < 1.0 and vert_frac < 1.0):
            raise ValueError(f"Shift(horiz_frac={horiz_frac}, vert_frac={vert_frac}): both must be below 1.0")
        super().__init__()
        self.horiz_frac, self.vert_frac, self.border, self.border_value = horiz_frac, vert_frac, border, border_value

    def get_transform(self, img: np.ndarray) -> Any:
        max_dx = self.horiz_frac * img.shape[1]
        max_dy = self.vert_frac * img.shape[0]
        dx = np.round(self._rand_range(-max_dx, max_dx))
        dy = np.round(self._rand_range(-max_dy, max_dy))
        mat = np.array([[1, 0, dx], [0, 1, dy]], dtype="float32")
        return WarpAffineTransform(mat, img.shape[1::-1], borderMode=self.border, borderValue=self.border_value)


class Rotation(ImageAugmentor):
    """Rotate by a random angle around a random center."""

    def __init__(self, max_deg: float, center_range: tuple = (0, 1), interp: int = INTER_LINEAR,
                 border: int = BORDER_REPLICATE, step_deg: float | None = None, border_value: Any = 0) -> None:
        """
        Args:
            max_deg (float): the largest absolute angle, in degrees.
            center_range (tuple): (min, max) of the center, as fractions of width and height.
            interp: a cv2 interpolation flag.
            border: a cv2 border mode.
            step_deg (float): if given, the angle is a multiple of it (needs ``max_deg == 180``, must divide 180).
            border_value: the fill value when ``border == cv2.BORDER_CONSTANT``.
        """
        _check_step_deg("Rotation", max_deg, step_deg)
        super().__init__()
        self.max_deg, self.center_range, self.interp = max_deg, center_range, interp
        self.border, self.step_deg, self.border_value = border, step_deg, border_value

    def get_transform(self, img: np.ndarray) -> Any:
        center = img.shape[1::-1] * self._rand_range(self.center_range[0], self.center_range[1], (2,))
        deg = self._rand_range(-self.max_deg, self.max_deg)
        if self.step_deg:
            deg = deg // self.step_deg * self.step_deg
        # Pixel centers sit at integer coordinates, so the middle of a W-wide image is at (W - 1) / 2.
        mat = cv2.getRotationMatrix2D((float(center[0]) - 0.5, float(center[1]) - 0.5), float(deg), 1)
        return WarpAffineTransform(mat, img.shape[1::-1], interp=self.interp, borderMode=self.border,
                                   borderValue=self.border_value)


class RotationAndCropValid(ImageAugmentor):
    """Rotate by a random angle around the center, then crop the largest rectangle with no border pixels.
    Output sizes vary."""

    def __init__(self, max_deg: float, interp: int = INTER_LINEAR, step_deg: float | None = None) -> None:
        """
        Args:
            max_deg, interp, step_deg: as in :class:`Rotation`.
        """
        _check_step_deg("RotationAndCropValid", max_deg, step_deg)
        super().__init__()
        self.max_deg, self.interp, self.step_deg = max_deg, interp, step_deg

    def _get_deg(self, img: np.ndarray) -> float:
        deg = self._rand_range(-self.max_deg, self.max_deg)
        if self.step_deg:
            deg = deg // self.step_deg * self.step_deg
        return float(deg)

    def get_transform(self, img: np.ndarray) -> Any:
        deg = self._get_deg(img)
        h, w = img.shape[:2]
        cx, cy = w * 0.5, h * 0.5
        rot = WarpAffineTransform(cv2.getRotationMatrix2D((cx - 0.5, cy - 0.5), deg, 1), (w, h), interp=self.interp)
        neww, newh = RotationAndCropValid.largest_rotated_rect(w, h, deg)
        neww, newh = min(neww, w), min(newh, h)
        crop = CropTransform(int(cy - newh * 0.5), int(cx - neww * 0.5), newh, neww)
        return TransformList([rot, crop])

    @staticmethod
    def largest_rotated_rect(w: int, h: int, angle: float) -> tuple[int, int]:
        """(width, height) of the largest axis-aligned rectangle inside a w x h rectangle rotated by ``angle``
        degrees (centered in it)."""
        if w <= 0 or h <= 0:
            return 0, 0
        a = math.radians(angle)
        sin_a, cos_a = abs(math.sin(a)), abs(math.cos(a))
        long_side, short_side = max(w, h), min(w, h)
        if short_side <= 2.0 * sin_a * cos_a * long_side:
            # Two corners touch the long side; the other two lie on the center line.
            half = 0.5 * short_side
            if w >= h:
                wr, hr = half / sin_a, half / cos_a
            else:
                wr, hr = half / cos_a, half / sin_a
        else:
            # All four corners touch the rotated rectangle's sides.
            cos_2a = cos_a * cos_a - sin_a * sin_a
            wr, hr = (w * cos_a - h * sin_a) / cos_2a, (h * cos_a - w * sin_a) / cos_2a
        return int(np.round(wr)), int(np.round(hr))


class Affine(ImageAugmentor):
    """A random affine warp around the image center: scale, translation, rotation and shear."""

    def __init__(self, scale: tuple | None = None, translate_frac: tuple | None = None, rotate_max_deg: float = 0.0,
                 shear: float = 0.0, interp: int = INTER_LINEAR, border: int = BORDER_REPLICATE,
                 border_value: Any = 0) -> None:
        """
        Args:
            scale (tuple): (a, b): the scale factor is drawn from [a, b]; None keeps the scale.
            translate_frac (tuple): (a, b): the largest horizontal / vertical shift as fractions of width /
                height; None: no shift.
            rotate_max_deg (float): the largest absolute rotation, in degrees.
            shear (float): the largest absolute shear angle, in degrees (0 to 180).
            interp: a cv2 interpolation flag.
            border: a cv2 border mode.
            border_value: the fill value when ``border == cv2.BORDER_CONSTANT``.
        """
        if scale is not None and not (isinstance(scale, tuple) and len(scale) == 2):
            raise ValueError(f"Affine(scale={scale!r}): expected a tuple of two floats, e.g. (0.9, 1.1)")
        if translate_frac is not None and not (isinstance(translate_frac, tuple) and len(translate_frac) == 2):
            raise ValueError(f"Affine(translate_frac={translate_frac!r}): expected a tuple of two floats, "
                             "e.g. (0.1, 0.1)")
        if shear < 0.0:
            raise ValueError(f"Affine(shear={shear}): must be between 0.0 and 180.0")
        super().__init__()
        self.scale, self.translate_frac, self.rotate_max_deg, self.shear = scale, translate_frac, rotate_max_deg, shear
        self.interp, self.border, self.border_value = interp, border, border_value

    def get_transform(self, img: np.ndarray) -> Any:
        scale = self._rand_range(self.scale[0], self.scale[1]) if self.scale is not None else 1.0
        if self.translate_frac is not None:
            max_dx = self.translate_frac[0] * img.shape[1]
            max_dy = self.translate_frac[1] * img.shape[0]
            dx = np.round(self._rand_range(-max_dx, max_dx))
            dy = np.round(self._rand_range(-max_dy, max_dy))
        else:
            dx = dy = 0
        if self.shear > 0.0:
            shear = math.radians(self._rand_range(-self.shear, self.shear))
            sin_s, cos_s = math.sin(shear), math.cos(shear)
        cx, cy = img.shape[1] * 0.5 - 0.5, img.shape[0] * 0.5 - 0.5
        deg = self._rand_range(-self.rotate_max_deg, self.rotate_max_deg)
        mat = cv2.getRotationMatrix2D((cx, cy), float(deg), float(scale))
        if self.shear > 0.0:
            m00, m01, m10, m11 = mat[0, 0], mat[0, 1], mat[1, 0], mat[1, 1]
            mat[0, 1] = m01 * cos_s + m00 * sin_s
            mat[1, 1] = m11 * cos_s + m10 * sin_s
            # Translation that keeps the center where it was.
            mat[0, 2] = cx * (1.0 - m00) - cy * mat[0, 1]
            mat[1, 2] = -cx * m10 + cy * (1.0 - mat[1, 1])
        mat[0, 2] += dx
        mat[1, 2] += dy
        return WarpAffineTransform(mat, img.shape[1::-1], self.interp, self.border, self.border_value)


# They only read the image's shape.
_declare_non_mutating(Shift.get_transform, Rotation.get_transform, Affine.get_transform)
