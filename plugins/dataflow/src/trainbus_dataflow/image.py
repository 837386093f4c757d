"""Image dataflows: read image files, and apply augmentors to components of datapoints
(``trainbus.dataflow.image``)."""

from __future__ import annotations

import copy as copy_mod
import os
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from trainbus.utils import logger

from .base import RNGDataFlow
from .common import MapData, MapDataComponent
from .imgaug import AugmentorList
from .imgaug.base import check_dtype
from ._opencv import cv2

__all__ = ["ImageFromFile", "AugmentImageComponent", "AugmentImageCoordinates", "AugmentImageComponents"]


def validate_coords(coords: Any, who: str) -> None:
    """Raise unless ``coords`` is an Nx2 floating point array."""
    if not isinstance(coords, np.ndarray) or coords.ndim != 2 or coords.shape[1] != 2 \
            or not np.issubdtype(coords.dtype, np.floating):
        desc = (f"an array of shape {coords.shape} and dtype {coords.dtype}" if isinstance(coords, np.ndarray)
                else f"a {type(coords).__name__}")
        raise ValueError(f"{who}: coordinates must be an Nx2 floating point array of (x, y) rows, got {desc}; "
                         "convert with np.asarray(coords, dtype='float32').reshape(-1, 2)")


def _as_augmentor_list(augmentors: Any, who: str) -> AugmentorList:
    if isinstance(augmentors, AugmentorList):
        return augmentors
    if not isinstance(augmentors, (list, tuple)):
        raise TypeError(f"{who}(augmentors=...) takes a list of augmentors or an AugmentorList, "
                        f"got {augmentors!r}")
    return AugmentorList(augmentors)


def _copy_of(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return x.copy()
    return copy_mod.deepcopy(x)


class _ExceptionHandler:
    """Counts augmentation errors; re-raises them unless ``catch_exceptions`` (then logs some of them and the
    datapoint is dropped)."""

    def __init__(self, catch_exceptions: bool = False) -> None:
        self.catch_exceptions = catch_exceptions
        self.nr_error = 0

    @contextmanager
    def catch(self) -> Iterator[None]:
        try:
            yield
        except Exception:
            self.handle()

    def handle(self) -> None:
        """Count the exception being handled; re-raise it unless ``catch_exceptions``. Call it in an ``except``."""
        self.nr_error += 1
        if not self.catch_exceptions:
            raise
        if self.nr_error < 10 or self.nr_error % 100 == 0:
            logger.exception(f"Got {self.nr_error} augmentation errors so far; the datapoint is skipped")


class _AugmentingMap:
    """What the augmenting dataflows share: their :class:`AugmentorList`, the copy and exception
    options, and a ``reset_state()`` that resets the input dataflow and the augmentors."""

    def _set_augmentors(self, augmentors: Any, who: str, copy: bool, catch_exceptions: bool) -> None:
        self.augs = _as_augmentor_list(augmentors, who)
        self._copy = copy
        self._exception_handler = _ExceptionHandler(catch_exceptions)

    def reset_state(self) -> None:
        self.ds.reset_state()  # type: ignore[attr-defined]
        self.augs.reset_state()


class ImageFromFile(RNGDataFlow):
    """Datapoints ``[image]`` read from files: (h, w, 3) RGB uint8 arrays, or (h, w, 1) grayscale."""

    def __init__(self, files: list, channel: int = 3, resize: Any = None, shuffle: bool = False) -> None:
        """
        Args:
            files (list): image file paths.
            channel (int): 3 (read as color, converted to RGB) or 1 (read as grayscale, shape (h, w, 1)).
            resize: an int or (h, w): resize every image to this size.
            shuffle (bool): shuffle the file order at every epoch.
        """
        if not len(files):
            raise ValueError("ImageFromFile(files=[]): no image files given")
        self.files = list(files)
        self.channel = int(channel)
        if self.channel not in (1, 3):
            raise ValueError(f"ImageFromFile(channel={channel!r}): must be 1 (grayscale) or 3 (RGB)")
        self.imread_mode = cv2.IMREAD_GRAYSCALE if self.channel == 1 else cv2.IMREAD_COLOR
        if resize is not None:
            if isinstance(resize, (int, np.integer)):
                resize = (int(resize), int(resize))
            elif not (isinstance(resize, (list, tuple)) and len(resize) == 2):
                raise ValueError(f"ImageFromFile(resize={resize!r}): expected an int or an (h, w) pair")
            resize = (int(resize[0]), int(resize[1]))
        self.resize = resize
        self.shuffle = shuffle

    def __len__(self) -> int:
        return len(self.files)

    def __iter__(self) -> Iterator[list]:
        if self.shuffle:
            if self.rng is None:
                self.reset_state()
            self.rng.shuffle(self.files)
        for f in self.files:
            im = cv2.imread(os.fspath(f), self.imread_mode)
            if im is None:
                why = "it does not exist" if not os.path.exists(f) else "OpenCV cannot decode it as an image"
                raise OSError(f"ImageFromFile: cannot read the image file {f!r}: {why}")
            if self.channel == 3:
                im = cv2.cvtColor(im, cv2.COLOR_BGR2RGB)  # a contiguous copy: later OpenCV calls take it as is
            if self.resize is not None:
                im = cv2.resize(im, (self.resize[1], self.resize[0]))
            if self.channel == 1:
                im = im[:, :, np.newaxis]
            yield [im]


class AugmentImageComponent(_AugmentingMap, MapDataComponent):
    """Augment one image component of every datapoint."""

    def __init__(self, ds: Any, augmentors: Any, index: int | str = 0, copy: bool = True,
                 catch_exceptions: bool = False) -> None:
        """
        Args:
            ds (DataFlow): the input dataflow.
            augmentors: a list of augmentors (applied in order) or an :class:`AugmentorList`.
            index (int or str): the index (or dict key) of the image component.
            copy (bool): augment a copy of the image (some augmentors change their input in place); turn it off
                when the input images may be changed. The copy is only made where it matters: not at all when the
                augmentors are ones that never write into their input and one of them returns a new array (as
                ``Flip``, ``Resize``, the affine warps do); the output is the same either way.
            catch_exceptions (bool): skip datapoints whose augmentation raises (logging some of the errors)
                instead of raising.
        """
        self._set_augmentors(augmentors, "AugmentImageComponent", copy, catch_exceptions)
        super().__init__(ds, self._aug_mapper, index)

    def _aug_mapper(self, x: Any) -> Any:
        if not isinstance(x, np.ndarray):
            check_dtype(x, f"AugmentImageComponent(index={self._index!r})")
        try:  # what _ExceptionHandler.catch() does, without a context manager's cost per datapoint
            if not self._copy:
                return self.augs.augment(x)
            if type(self.augs) is AugmentorList:
                return self.augs._augment_copy(x)  # copies x only if an augmentor might write into it
            return self.augs.augment(_copy_of(x))
        except Exception:
            self._exception_handler.handle()
        return None


class AugmentImageCoordinates(_AugmentingMap, MapData):
    """Augment an image and an Nx2 float array of (x, y) coordinates with the same transform."""

    def __init__(self, ds: Any, augmentors: Any, img_index: int | str = 0, coords_index: int | str = 1,
                 copy: bool = True, catch_exceptions: bool = False) -> None:
        """
        Args:
            ds (DataFlow): the input dataflow.
            augmentors: a list of augmentors (applied in order) or an :class:`AugmentorList`.
            img_index (int or str): the index (or key) of the image.
            coords_index (int or str): the index (or key) of the coordinates.
            copy, catch_exceptions: as in :class:`AugmentImageComponent`.
        """
        self._set_augmentors(augmentors, "AugmentImageCoordinates", copy, catch_exceptions)
        self._img_index, self._coords_index = img_index, coords_index
        super().__init__(ds, self._aug_mapper)

    def _aug_mapper(self, dp: Any) -> Any:
        with self._exception_handler.catch():
            img, coords = dp[self._img_index], dp[self._coords_index]
            check_dtype(img, f"AugmentImageCoordinates(img_index={self._img_index!r})")
            validate_coords(coords, f"AugmentImageCoordinates(coords_index={self._coords_index!r})")
            if self._copy:
                img, coords = _copy_of(img), _copy_of(coords)
            tfms = self.augs.get_transform(img)
            if isinstance(dp, tuple):
                dp = list(dp)
            dp[self._img_index] = tfms.apply_image(img)
            dp[self._coords_index] = tfms.apply_coords(coords)
            return dp
        return None


class AugmentImageComponents(_AugmentingMap, MapData):
    """Augment several image components (and coordinate components) of every datapoint with one shared
    transform, drawn from the first image in ``index``.

    Example::

        ds = AugmentImageComponents(ds, augs, index=(0, 1), coords_index=(2,))  # [image, mask, keypoints]
    """

    def __init__(self, ds: Any, augmentors: Any, index: tuple = (0, 1), coords_index: tuple = (),
                 copy: bool = True, catch_exceptions: bool = False) -> None:
        """
        Args:
            ds (DataFlow): the input dataflow.
            augmentors: a list of augmentors (applied in order) or an :class:`AugmentorList`.
            index (tuple): indices (or keys) of the image components; the first one decides the transform.
            coords_index (tuple): indices (or keys) of Nx2 coordinate components.
            copy, catch_exceptions: as in :class:`AugmentImageComponent`.
        """
        self._set_augmentors(augmentors, "AugmentImageComponents", copy, catch_exceptions)
        if not len(index):
            raise ValueError("AugmentImageComponents(index=()): give at least one image component")
        self._index, self._coords_index = tuple(index), tuple(coords_index)
        super().__init__(ds, self._aug_mapper)

    def _aug_mapper(self, dp: Any) -> Any:
        copy_func = _copy_of if self._copy else (lambda x: x)
        if isinstance(dp, tuple):
            dp = list(dp)
        with self._exception_handler.catch():
            major = self._index[0]
            im = copy_func(dp[major])
            check_dtype(im, f"AugmentImageComponents(index={self._index!r}): component {major!r}")
            tfms = self.augs.get_transform(im)
            dp[major] = tfms.apply_image(im)
            for idx in self._index[1:]:
                check_dtype(dp[idx], f"AugmentImageComponents(index={self._index!r}): component {idx!r}")
                dp[idx] = tfms.apply_image(copy_func(dp[idx]))
            for idx in self._coords_index:
                coords = copy_func(dp[idx])
                validate_coords(coords, f"AugmentImageComponents(coords_index={self._coords_index!r}): "
                                        f"component {idx!r}")
                dp[idx] = tfms.apply_coords(coords)
            return dp
        return None
