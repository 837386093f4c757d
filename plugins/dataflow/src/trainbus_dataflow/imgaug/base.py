"""Augmentor base classes: an augmentor draws random parameters and returns a deterministic :class:`Transform`.

Every augmentor owns ``self.rng`` (a ``numpy.random.RandomState``). ``reset_state()`` gives it a fresh seed
(from :func:`trainbus.dataflow.get_rng`, the seeding of ``RNGDataFlow``), and
after ``os.fork()`` every live augmentor in the child is reseeded, so worker processes don't repeat each other.
"""

from __future__ import annotations

import inspect
import os
import pprint
import warnings
import weakref
from collections import namedtuple
from typing import Any

import numpy as np

from trainbus.dataflow import get_rng

__all__ = ["Augmentor", "ImageAugmentor", "AugmentorList", "PhotometricAugmentor"]

ImagePlaceholder = namedtuple("ImagePlaceholder", ["shape"])
"""Something with a ``shape``, for asking an augmentor for its transform without an actual image."""

_LIVE_AUGMENTORS: "weakref.WeakSet[ImageAugmentor]" = weakref.WeakSet()


def _reseed_after_fork() -> None:
    for aug in list(_LIVE_AUGMENTORS):
        aug.reset_state()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reseed_after_fork)


def _track(aug: "ImageAugmentor") -> None:
    try:
        _LIVE_AUGMENTORS.add(aug)
    except TypeError:  # unhashable (a subclass defined __eq__ only): it is not reseeded after fork
        pass


def _new_rng(obj: Any) -> np.random.RandomState:
    # The same seeding as RNGDataFlow: different per object, process and time unless a global seed is fixed.
    return get_rng(obj)


def check_dtype(img: Any, who: Any = "augmentor") -> None:
    """Raise a ``TypeError`` unless ``img`` is a NumPy array (what every augmentor works on)."""
    if not isinstance(img, np.ndarray):
        raise TypeError(f"{who} needs an image as a numpy array (uint8 in 0..255 or floating point), "
                        f"but got a {type(img).__name__}; convert it with np.asarray(...) first")


#: ``get_transform`` and ``apply_image`` functions that never write into the image they are given (they read its
#: shape or values, and return a new array or a view of it); see :meth:`AugmentorList._augment_copy`. A subclass
#: that overrides one of them is not covered.
_NON_MUTATING: set = set()


def _declare_non_mutating(*functions: Any) -> None:
    """Add ``functions`` (``SomeAugmentor.get_transform``, ``SomeTransform.apply_image``) to :data:`_NON_MUTATING`."""
    _NON_MUTATING.update(functions)


def _non_mutating(method: Any) -> bool:
    """Whether bound ``method`` is one of the :data:`_NON_MUTATING` functions (a function set on the instance is
    not: it has no ``__func__``)."""
    return getattr(method, "__func__", None) in _NON_MUTATING


def default_repr(obj: Any) -> str:
    """``imgaug.Name(arg=value, ...)`` from the constructor's arguments that differ from their defaults.

    Needs an attribute of the same name for every constructor argument; raises ``AttributeError`` otherwise.
    """
    sig = inspect.signature(type(obj).__init__)
    parts = []
    for name, param in list(sig.parameters.items())[1:]:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise AttributeError(f"{type(obj).__name__} takes *args/**kwargs")
        value = getattr(obj, name)
        if param.default is not param.empty and value is param.default:
            continue
        parts.append(f"{name}={pprint.pformat(value)}")
    return f"imgaug.{type(obj).__name__}({', '.join(parts)})"


class _ReprFromArgs:
    """``repr``/``str`` from :func:`default_repr`, or ``object``'s when the constructor's arguments
    were not kept as attributes."""

    def __repr__(self) -> str:
        try:
            return default_repr(self)
        except AttributeError:
            return object.__repr__(self)

    __str__ = __repr__


def _list_repr(kind: str, items: Any) -> str:
    """``imgaug.<kind>([...])`` with the repr of every item of ``items`` on its own indented line."""
    inner = ",\n".join("  " + repr(x) for x in items)
    return f"imgaug.{kind}([\n{inner}])"


class ImageAugmentor(_ReprFromArgs):
    """Base class of all augmentors.

    Images are NumPy arrays of shape (h, w) or (h, w, c): uint8 in [0, 255], or floating point in [0, 1] or
    [0, 255]. A subclass implements :meth:`get_transform` (draw random parameters with ``self.rng`` and return a
    deterministic :class:`~trainbus_dataflow.imgaug.Transform`). Subclasses written for tensorpack's older
    interface (``_get_augment_params(img)`` + ``_augment(img, params)``) keep working.

    Attributes:
        rng: the ``numpy.random.RandomState`` the augmentor draws from; replaced by :meth:`reset_state`.
    """

    def __init__(self) -> None:
        self.reset_state()
        _track(self)

    def __getattr__(self, name: str) -> Any:
        # Subclasses that skip super().__init__() get their rng on first use.
        if name == "rng":
            self.reset_state()
            _track(self)
            return self.__dict__["rng"]
        raise AttributeError(f"{type(self).__name__} object has no attribute {name!r}")

    def _init(self, params: dict | None = None) -> None:
        """Store constructor arguments as attributes (call with ``locals()``); names starting with ``_`` and
        ``self`` are skipped."""
        if params:
            for k, v in params.items():
                if k != "self" and not k.startswith("_") and k != "__class__":
                    setattr(self, k, v)

    def reset_state(self) -> None:
        """Reseed ``self.rng``. Call it (once or more) in the process that uses the augmentor before using it;
        the augmentation dataflows call it from their own ``reset_state``, and it is called after ``fork``."""
        self.rng = _new_rng(self)

    def _rand_range(self, low: float = 1.0, high: float | None = None, size: Any = None) -> np.ndarray:
        """Uniform float32 random number(s) in ``[low, high)`` drawn from ``self.rng`` (``[0, low)`` when
        ``high`` is None)."""
        if high is None:
            low, high = 0, low
        if size is None and isinstance(low, (int, float)) and isinstance(high, (int, float)):
            # The same draw as uniform(low, high, []).astype("float32"), without the intermediate array;
            # uniform(0, 1) is 0 + 1 * random_sample() exactly, and random_sample() skips uniform's argument checks.
            value = self.rng.random_sample() if low == 0 and high == 1 else self.rng.uniform(low, high)
            return np.array(value, dtype=np.float32)
        return self.rng.uniform(low, high, [] if size is None else size).astype("float32")

    def get_transform(self, img: np.ndarray) -> Any:
        """Draw this augmentor's random parameters for ``img`` and return the deterministic transform.

        The returned object's ``apply_image`` / ``apply_coords`` transform the image and anything associated
        with it (other images of the same size, Nx2 (x, y) coordinates) the same way.
        """
        from .transform import BaseTransform, TransformFactory

        if not hasattr(self, "_augment"):
            raise NotImplementedError(
                f"{type(self).__name__} must implement get_transform(img) returning a Transform "
                "(or the older pair _get_augment_params(img) and _augment(img, params))")
        legacy_params = getattr(self, "_get_augment_params", None) or getattr(self, "get_augment_params", None)
        params = None if legacy_params is None else legacy_params(img)
        if isinstance(params, BaseTransform):
            return params

        def apply_coords(coords: np.ndarray) -> np.ndarray:
            fn = getattr(self, "_augment_coords", None)
            return coords if fn is None else fn(coords, params)

        return TransformFactory(name=f"from {self}", apply_image=lambda im: self._augment(im, params),
                                apply_coords=apply_coords)

    def augment(self, img: np.ndarray) -> np.ndarray:
        """Draw a transform for ``img`` and return the augmented image (when only one image is involved)."""
        check_dtype(img, type(self).__name__)
        return self.get_transform(img).apply_image(img)

    # Older interface, kept for code written against it.
    def augment_return_params(self, d: np.ndarray) -> tuple[np.ndarray, Any]:
        """Deprecated: use ``t = get_transform(img); t.apply_image(img)``. Returns ``(augmented, transform)``."""
        _warn_deprecated("augment_return_params", "get_transform")
        t = self.get_transform(d)
        return t.apply_image(d), t

    def augment_with_params(self, d: np.ndarray, param: Any) -> np.ndarray:
        """Deprecated: use ``transform.apply_image(img)``."""
        _warn_deprecated("augment_with_params", "transform.apply_image")
        return param.apply_image(d)

    def augment_coords(self, coords: np.ndarray, param: Any) -> np.ndarray:
        """Deprecated: use ``transform.apply_coords(coords)``."""
        _warn_deprecated("augment_coords", "transform.apply_coords")
        return param.apply_coords(coords)


def _warn_deprecated(old: str, new: str) -> None:
    warnings.warn(f"ImageAugmentor.{old} is deprecated; use {new} instead", DeprecationWarning, stacklevel=3)


Augmentor = ImageAugmentor
"""The older name of :class:`ImageAugmentor` (the same class)."""


class AugmentorList(ImageAugmentor):
    """Apply a list of augmentors in order; each one draws its parameters from the previous one's output."""

    def __init__(self, augmentors: list | tuple) -> None:
        """
        Args:
            augmentors (list): :class:`ImageAugmentor` instances, applied in this order.
        """
        if not isinstance(augmentors, (list, tuple)):
            raise TypeError(f"AugmentorList(augmentors=...) takes a list or tuple of augmentors, "
                            f"got a {type(augmentors).__name__}")
        for i, a in enumerate(augmentors):
            if not hasattr(a, "get_transform"):
                raise TypeError(f"AugmentorList: augmentors[{i}] = {a!r} is not an augmentor "
                                "(it has no get_transform method)")
        self.augmentors = augmentors
        super().__init__()

    def reset_state(self) -> None:
        """Reseed this list's rng and every augmentor's."""
        super().reset_state()
        for a in self.augmentors:
            a.reset_state()

    @staticmethod
    def _check_image(img: Any) -> None:
        check_dtype(img, "AugmentorList")
        if img.ndim not in (2, 3):
            raise ValueError(f"AugmentorList needs images of shape (h, w) or (h, w, c), got shape {img.shape}")

    def get_transform(self, img: np.ndarray) -> Any:
        self._check_image(img)
        from .transform import LazyTransform, TransformList

        # Later augmentors see the output of earlier ones, so their transforms are created when applied.
        tfms: list = []
        for idx, a in enumerate(self.augmentors):
            t = a.get_transform(img) if idx == 0 else LazyTransform(a.get_transform)
            if isinstance(t, TransformList):
                tfms.extend(t.tfms)
            else:
                tfms.append(t)
        return TransformList(tfms)

    def augment(self, img: np.ndarray) -> np.ndarray:
        self._check_image(img)
        # Same draws in the same order as get_transform(img).apply_image(img), without the lazy wrappers.
        for a in self.augmentors:
            img = a.get_transform(img).apply_image(img)
        return img

    def _augment_copy(self, img: np.ndarray) -> np.ndarray:
        """What ``self.augment(img.copy())`` returns, copying ``img`` only when that copy is needed.

        While no copy is made, the transforms run on ``img`` itself; those that return views of it are kept. Before
        the first augmentor or transform that might write into its input (one not declared non-mutating), and at
        the end if the result is still a view of ``img``, ``img`` is copied and the kept views are taken again from
        the copy: the same transforms on the same values as with the copy made first. Once a transform returns a
        new array, nothing later can reach ``img`` and no copy is made at all.
        """
        self._check_image(img)
        src: np.ndarray | None = img  # the caller's image, while what is worked on may still be (a view of) it
        views: list = []  # the transforms since src that returned views of it
        for a in self.augmentors:
            if src is not None and not _non_mutating(a.get_transform):
                img, src = _replay(views, src), None
            t = a.get_transform(img)
            if src is not None and not _non_mutating(t.apply_image):
                img, src = _replay(views, src), None
            img = t.apply_image(img)
            if src is not None:
                if np.may_share_memory(img, src):
                    views.append(t)
                else:
                    src = None
        return img if src is None else _replay(views, src)

    def __repr__(self) -> str:
        return _list_repr("AugmentorList", self.augmentors)

    __str__ = __repr__


def _replay(views: list, src: np.ndarray) -> np.ndarray:
    """A copy of ``src`` with the (view-returning) transforms ``views`` applied to it again, in order."""
    img = src.copy()
    for t in views:
        img = t.apply_image(img)
    return img


class PhotometricAugmentor(ImageAugmentor):
    """Base class of augmentors that change pixel values only (coordinates pass through unchanged).

    A subclass implements ``_get_augment_params(img)`` (draw random parameters; the default draws nothing and
    returns None) and ``_augment(img, params)`` (return the changed image).
    """

    def get_transform(self, img: np.ndarray) -> Any:
        from .transform import PhotometricTransform

        params = self._get_augment_params(img)
        return PhotometricTransform(func=lambda im: self._augment(im, params), name=f"from {self}")

    def _get_augment_params(self, img: np.ndarray) -> Any:
        return None

    def _augment(self, img: np.ndarray, params: Any) -> np.ndarray:
        raise NotImplementedError(f"{type(self).__name__} must implement _augment(img, params)")


def hw_pair(value: Any, who: str, argname: str) -> tuple[int, int]:
    """``value`` as an (h, w) pair of ints: an int ``n`` means ``(n, n)``; raises naming ``who`` and ``argname``."""
    if isinstance(value, (int, np.integer)):
        return int(value), int(value)
    if isinstance(value, (list, tuple, np.ndarray)) and len(value) == 2:
        try:
            return int(value[0]), int(value[1])
        except (TypeError, ValueError):
            pass
    raise ValueError(f"{who}({argname}={value!r}): expected an int or an (h, w) pair of ints")
