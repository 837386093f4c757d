"""SVHN cropped digits, read from ``{train,test,extra}_32x32.mat``."""

from __future__ import annotations

import os
from typing import Iterator, Sequence

import numpy as np

from trainbus.utils import logger
from trainbus.utils.fs import get_dataset_path
from trainbus_dataflow.base import RNGDataFlow
from trainbus_dataflow.dataset._files import corrupt_file_error, fetch_file, pass_order
from trainbus_dataflow.dataset._mat import load_mat

__all__ = ["SVHNDigit"]


class SVHNDigit(RNGDataFlow):
    """The SVHN cropped-digit dataset (http://ufldl.stanford.edu/housenumbers/): produces
    ``[image, label]``, ``image`` a 32x32x3 uint8 array (RGB) in [0, 255], ``label`` a
    ``numpy.uint8`` in 0..9 (the files' label 10 means digit 0).

    Loaded arrays are cached per file, so several instances of one split share memory.
    """

    _SOURCE_URL = "http://ufldl.stanford.edu/housenumbers/"
    _Cache: dict = {}

    def __init__(self, name: str, data_dir: str | None = None, shuffle: bool = True) -> None:
        """
        Args:
            name: ``'train'``, ``'test'`` or ``'extra'``.
            data_dir: the directory holding ``{name}_32x32.mat``; defaults to
                ``get_dataset_path('svhn_data')``. A missing file is downloaded.
            shuffle: shuffle every pass.
        """
        if name not in ("train", "test", "extra"):
            raise ValueError(f"SVHNDigit(name={name!r}): must be 'train', 'test' or 'extra'")
        self.shuffle = shuffle
        self.name = name
        if data_dir is None:
            data_dir = get_dataset_path("svhn_data")
        filename = os.path.join(data_dir, f"{name}_32x32.mat")
        url = self._SOURCE_URL + os.path.basename(filename)
        fetch_file("SVHN", filename, url)
        st = os.stat(filename)
        key = (os.path.abspath(filename), st.st_size, st.st_mtime_ns)
        if key not in SVHNDigit._Cache:
            logger.info(f"Loading {filename} ...")
            data = load_mat("SVHN", filename, url)
            if "X" not in data or "y" not in data:
                raise corrupt_file_error("SVHN", filename, "no 'X' or 'y' variable in it", url)
            X, Y = np.asarray(data["X"]), np.asarray(data["y"]).reshape(-1)
            if X.ndim != 4 or X.shape[:3] != (32, 32, 3) or X.shape[3] != Y.shape[0]:
                raise corrupt_file_error("SVHN", filename, f"X has shape {X.shape} and y {Y.shape}; expected "
                                         "(32, 32, 3, N) and (N, 1)", url)
            X = np.ascontiguousarray(X.transpose(3, 0, 1, 2)).astype(np.uint8, copy=False)
            Y = Y.astype(np.uint8)
            Y[Y == 10] = 0
            SVHNDigit._Cache[key] = (X, Y)
        self.X, self.Y = SVHNDigit._Cache[key]

    def __len__(self) -> int:
        return self.X.shape[0]

    def __iter__(self) -> Iterator[list]:
        for k in pass_order(self):
            yield [self.X[k], self.Y[k]]

    @staticmethod
    def get_per_pixel_mean(names: Sequence[str] = ("train", "test", "extra"),
                           data_dir: str | None = None) -> np.ndarray:
        """The mean 32x32x3 image (float64) over the splits ``names``."""
        for name in names:
            if name not in ("train", "test", "extra"):
                raise ValueError(f"get_per_pixel_mean(names={names!r}): {name!r} is not 'train', 'test' or 'extra'")
        images = [SVHNDigit(x, data_dir, shuffle=False).X for x in names]
        return np.concatenate(images).mean(axis=0)
