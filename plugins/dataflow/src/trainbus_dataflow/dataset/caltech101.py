"""Caltech 101 Silhouettes (28x28), read from ``caltech101_silhouettes_28_split1.mat``."""

from __future__ import annotations

import os
from typing import Iterator

import numpy as np

from trainbus.utils.fs import get_dataset_path
from trainbus_dataflow.base import RNGDataFlow
from trainbus_dataflow.dataset._files import corrupt_file_error, fetch_file, pass_order
from trainbus_dataflow.dataset._mat import load_mat

__all__ = ["Caltech101Silhouettes"]


class Caltech101Silhouettes(RNGDataFlow):
    """Caltech 101 Silhouettes: produces ``[image, label]``, ``image`` a 28x28 array in [0, 1] (the
    file's dtype, float64 in the published file), ``label`` an int in 0..100 (the file's 1-based
    label minus one).
    """

    _DIR_NAME = "caltech101_data"
    _SOURCE_URL = "https://people.cs.umass.edu/~marlin/data/"
    _FILENAME = "caltech101_silhouettes_28_split1.mat"

    def __init__(self, name: str, shuffle: bool = True, dir: str | None = None) -> None:
        """
        Args:
            name: ``'train'``, ``'test'`` or ``'val'``.
            shuffle: shuffle every pass.
            dir: the directory holding the ``.mat`` file; defaults to
                ``get_dataset_path('caltech101_data')``. A missing file is downloaded.
        """
        if name not in ("train", "test", "val"):
            raise ValueError(f"Caltech101Silhouettes(name={name!r}): must be 'train', 'test' or 'val'")
        if dir is None:
            dir = get_dataset_path(self._DIR_NAME)
        self.name = name
        self.shuffle = shuffle
        path = os.path.join(dir, self._FILENAME)
        url = self._SOURCE_URL + self._FILENAME
        fetch_file("Caltech101 Silhouettes", path, url)
        self.data = load_mat("Caltech101 Silhouettes", path, url)
        dkey, lkey = f"{name}_data", f"{name}_labels"
        if dkey not in self.data or lkey not in self.data:
            raise corrupt_file_error("Caltech101 Silhouettes", path, f"no '{dkey}' or '{lkey}' variable in it", url)
        images = np.asarray(self.data[dkey])
        labels = np.asarray(self.data[lkey]).ravel()
        if images.ndim != 2 or images.shape[1] != 784 or images.shape[0] != labels.shape[0]:
            raise corrupt_file_error("Caltech101 Silhouettes", path, f"'{dkey}' has shape {images.shape} for "
                                     f"{labels.shape[0]} labels; expected (N, 784)", url)
        self.images = images.reshape((-1, 28, 28))
        self.labels = labels.astype(np.int64) - 1

    def __len__(self) -> int:
        return self.images.shape[0]

    def __iter__(self) -> Iterator[list]:
        for k in pass_order(self):
            yield [self.images[k], self.labels[k]]
