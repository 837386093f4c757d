"""Deterministic transforms: what an augmentor returns from ``get_transform(img)``.

A transform's ``apply_image(img)`` changes an image; ``apply_coords(coords)`` maps an Nx2 float array of (x, y)
points the same way (in place where it can). Any other ``apply_<kind>`` method can be added by a subclass.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .base import _declare_non_mutating, _list_repr, _ReprFromArgs
from .._opencv import BORDER_CONSTANT, INTER_LINEAR, cv2

__all__ = ["Transform", "ResizeTransform", "CropTransform", "FlipTransform", "TransformList", "TransformFactory",
           "WarpAffineTransform", "TransposeTransform", "PhotometricTransform", "NoOpTransform", "LazyTransform"]


def _keep_channel_axis(src: np.ndarray, out: np.ndarray) -> np.ndarray:
    # OpenCV drops a trailing axis of size 1; put it back.
    if src.ndim == 3 and out.ndim == 2:
        return out[:, :, np.newaxis]
    return out


_CV2_DTYPES = frozenset(np.dtype(t) for t in ("uint8", "int8", "uint16", "int16", "int32", "float32", "float64"))


class BaseTransform:
    """Common base of transforms and transform containers (for ``isinstance`` checks)."""

    def _init(self, params: dict | None = None) -> None:
        if params:
            for k, v in params.items():
                if k != "self" and not k.startswith("_") and k != "__class__":
                    setattr(self, k, v)


class Transform(_ReprFromArgs, BaseTransform):
    """A deterministic change of an image (and of what goes with it), made by an augmentor.

    Subclasses implement ``apply_image(img)`` and, where it makes sense, ``apply_coords(coords)`` (an Nx2 array,
    one (x, y) per row). Calling an ``apply_<kind>`` method a subclass does not implement raises
    ``NotImplementedError`` naming the class. Implementations may change their input in place.
    """

    def __init__(self) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("apply_"):
            def missing(x: Any) -> Any:
                raise NotImplementedError(f"{type(self).__name__} does not implement {name}")

            return missing
        raise AttributeError(f"{type(self).__name__} object has no attribute {name!r}")


class ResizeTransform(Transform):
    """Resize an image of size (h, w) to (new_h, new_w) with ``cv2.resize``."""

    def __init__(self, h: int, w: int, new_h: int, new_w: int, interp: int) -> None:
        """
        Args:
            h, w (int): the size of the images this transform accepts.
            new_h, new_w (int): the output size.
            interp (int): a cv2 interpolation flag, e.g. ``cv2.INTER_LINEAR``.
        """
        self.h, self.w, self.new_h, self.new_w, self.interp = h, w, new_h, new_w, interp

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        if img.shape[:2] != (self.h, self.w):
            raise ValueError(f"{self!r} was made for images of size {(self.h, self.w)}, "
                             f"but got an image of shape {img.shape}")
        return _keep_channel_axis(img, cv2.resize(img, (self.new_w, self.new_h), interpolation=self.interp))

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        coords[:, 0] = coords[:, 0] * (self.new_w * 1.0 / self.w)
        coords[:, 1] = coords[:, 1] * (self.new_h * 1.0 / self.h)
        return coords


class CropTransform(Transform):
    """Take the (h, w) window whose top-left corner is (y0, x0). The result is a view of the input."""

    def __init__(self, y0: int, x0: int, h: int, w: int) -> None:
        self.y0, self.x0, self.h, self.w = y0, x0, h, w

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return img[self.y0:self.y0 + self.h, self.x0:self.x0 + self.w]

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        coords[:, 0] -= self.x0
        coords[:, 1] -= self.y0
        return coords


class WarpAffineTransform(Transform):
    """``cv2.warpAffine`` with a 2x3 matrix ``mat`` to an output of size ``dsize`` = (w, h)."""

    def __init__(self, mat: np.ndarray, dsize: tuple, interp: int = INTER_LINEAR,
                 borderMode: int = BORDER_CONSTANT, borderValue: Any = 0) -> None:
        self.mat, self.dsize, self.interp = mat, dsize, interp
        self.borderMode, self.borderValue = borderMode, borderValue

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        out = cv2.warpAffine(img, self.mat, tuple(int(v) for v in self.dsize), flags=self.interp,
                             borderMode=self.borderMode, borderValue=self.borderValue)
        return _keep_channel_axis(img, out)

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        mat = np.asarray(self.mat)
        return coords @ mat[:, :2].T + mat[:, 2]


class FlipTransform(Transform):
    """Mirror an image of size (h, w) left-right (``horiz=True``) or top-bottom."""

    def __init__(self, h: int, w: int, horiz: bool = True) -> None:
        """
        Args:
            h, w (int): the image size (used to map coordinates).
            horiz (bool): flip horizontally if True, vertically otherwise.
        """
        self.h, self.w, self.horiz = h, w, horiz

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        # cv2.flip writes a contiguous copy quickly; a reversed NumPy view would be cheap here but makes every
        # later OpenCV call (resize, warp, ...) copy it element by element first, several times slower.
        if img.dtype in _CV2_DTYPES and img.ndim in (2, 3):
            return _keep_channel_axis(img, cv2.flip(img, 1 if self.horiz else 0))
        return img[:, ::-1] if self.horiz else img[::-1]

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        if self.horiz:
            coords[:, 0] = self.w - coords[:, 0]
        else:
            coords[:, 1] = self.h - coords[:, 1]
        return coords


class TransposeTransform(Transform):
    """Swap the image's rows and columns (and x with y)."""

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        if img.ndim == 2 or img.shape[2] <= 4:
            return _keep_channel_axis(img, cv2.transpose(img))
        return np.ascontiguousarray(img.swapaxes(0, 1))

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        return coords[:, ::-1]


class NoOpTransform(Transform):
    """Every ``apply_<kind>`` returns its input unchanged."""

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return img

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        return coords

    def __getattr__(self, name: str) -> Any:
        if name.startswith("apply_"):
            return _identity
        raise AttributeError(f"NoOpTransform object has no attribute {name!r}")

    def __repr__(self) -> str:
        return "imgaug.NoOpTransform()"

    __str__ = __repr__


def _identity(x: Any) -> Any:
    return x


class PhotometricTransform(Transform):
    """Change pixel values with ``func``; coordinates are returned unchanged."""

    def __init__(self, func: Callable[[np.ndarray], np.ndarray], name: str | None = None) -> None:
        """
        Args:
            func (img -> img): what :meth:`apply_image` does.
            name (str, optional): shown in the repr.
        """
        self._func = func
        self._name = name

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return self._func(img)

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        return coords

    def __repr__(self) -> str:
        return f"imgaug.PhotometricTransform({self._name or ''})"

    __str__ = __repr__


class TransformFactory(Transform):
    """A transform made from functions: ``TransformFactory(name=..., apply_image=f, apply_coords=g)``."""

    def __init__(self, name: str | None = None, **kwargs: Callable) -> None:
        """
        Args:
            name (str, optional): shown in the repr.
            **kwargs: ``apply_<kind>=function`` pairs.
        """
        for k, v in kwargs.items():
            if not k.startswith("apply_"):
                raise KeyError(f"TransformFactory got the argument {k!r}; it only takes name= and "
                               "apply_<kind>= functions such as apply_image= and apply_coords=")
            if not callable(v):
                raise TypeError(f"TransformFactory({k}=...) must be a function, got {v!r}")
            setattr(self, k, v)
        self._name = name

    def __repr__(self) -> str:
        return f"imgaug.TransformFactory({self._name or ''})"

    __str__ = __repr__


class TransformList(BaseTransform):
    """Apply transforms one after another; ``apply_<kind>`` runs each transform's method in order."""

    def __init__(self, tfms: list) -> None:
        """
        Args:
            tfms (list[Transform]): the transforms, in order.
        """
        for i, t in enumerate(tfms):
            if not isinstance(t, BaseTransform):
                raise TypeError(f"TransformList: tfms[{i}] = {t!r} is not a Transform")
        self.tfms = list(tfms)

    def _apply(self, x: Any, meth: str) -> Any:
        for t in self.tfms:
            x = getattr(t, meth)(x)
        return x

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        return self._apply(img, "apply_image")

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        return self._apply(coords, "apply_coords")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("apply_"):
            return lambda x: self._apply(x, name)
        raise AttributeError(f"TransformList object has no attribute {name!r}")

    def __add__(self, other: BaseTransform) -> "TransformList":
        return TransformList(self.tfms + (other.tfms if isinstance(other, TransformList) else [other]))

    def __radd__(self, other: BaseTransform) -> "TransformList":
        return TransformList((other.tfms if isinstance(other, TransformList) else [other]) + self.tfms)

    def __iadd__(self, other: BaseTransform) -> "TransformList":
        self.tfms.extend(other.tfms if isinstance(other, TransformList) else [other])
        return self

    def __repr__(self) -> str:
        return _list_repr("TransformList", self.tfms)

    __str__ = __repr__


class LazyTransform(BaseTransform):
    """A transform created by ``get_transform(img)`` from the first image given to :meth:`apply_image`.

    Other ``apply_<kind>`` methods can only be called after that.
    """

    def __init__(self, get_transform: Callable[[np.ndarray], Any]) -> None:
        self.get_transform = get_transform
        self._transform: Any = None

    def apply_image(self, img: np.ndarray) -> np.ndarray:
        if self._transform is None:
            self._transform = self.get_transform(img)
        return self._transform.apply_image(img)

    def _apply(self, x: Any, meth: str) -> Any:
        if self._transform is None:
            raise RuntimeError(f"LazyTransform.{meth} was called before apply_image: the transform is only known "
                               "after an image went through it (apply the image first, then the coordinates)")
        return getattr(self._transform, meth)(x)

    def apply_coords(self, coords: np.ndarray) -> np.ndarray:
        return self._apply(coords, "apply_coords")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("apply_"):
            return lambda x: self._apply(x, name)
        raise AttributeError(f"LazyTransform object has no attribute {name!r}")

    def __repr__(self) -> str:
        if self._transform is None:
            return f"LazyTransform(get_transform={self.get_transform})"
        return repr(self._transform)

    __str__ = __repr__


# They return a new array or a view of their input, never writing into it.
_declare_non_mutating(ResizeTransform.apply_image, CropTransform.apply_image, WarpAffineTransform.apply_image,
                     FlipTransform.apply_image, TransposeTransform.apply_image, NoOpTransform.apply_image)
