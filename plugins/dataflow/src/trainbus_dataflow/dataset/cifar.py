"""CIFAR-10 and CIFAR-100, read from the python pickle batches of ``cifar-{10,100}-python.tar.gz``."""

from __future__ import annotations

import os
import pickle
from typing import Any, Iterator, Sequence

import numpy as np

from trainbus.utils import logger
from trainbus.utils.fs import get_dataset_path
from trainbus_dataflow.base import RNGDataFlow
from trainbus_dataflow.dataset._files import (DatasetFileNotFoundError, corrupt_file_error, extract_tarball, fetch_file,
                                              pass_order)

__all__ = ["CifarBase", "Cifar10", "Cifar100"]

_URLS = {10: ("http://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", 170498071),
         100: ("http://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz", 169001437)}
_FOLDERS = {10: "cifar-10-batches-py", 100: "cifar-100-python"}


def _str(x: Any) -> Any:
    return x.decode("latin1") if isinstance(x, bytes) else x


def _load_pickle(path: str, dataset: str, url: str) -> dict:
    """A CIFAR pickle as a dict with ``str`` keys (the files are Python 2 pickles of byte strings)."""
    try:
        with open(path, "rb") as f:
            obj = pickle.load(f, encoding="bytes")
    except FileNotFoundError:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as e:
        raise corrupt_file_error(dataset, path, f"cannot unpickle it: {type(e).__name__}: {e}", url) from e
    if not isinstance(obj, dict):
        raise corrupt_file_error(dataset, path, f"holds a {type(obj).__name__}, not a dict", url)
    return {_str(k): v for k, v in obj.items()}


def _filenames(dir: str, classnum: int) -> tuple[list[str], list[str], str]:
    base = os.path.join(dir, _FOLDERS[classnum])
    if classnum == 10:
        train = [os.path.join(base, f"data_batch_{i}") for i in range(1, 6)]
        return train, [os.path.join(base, "test_batch")], os.path.join(base, "batches.meta")
    return [os.path.join(base, "train")], [os.path.join(base, "test")], os.path.join(base, "meta")


def _read_batches(files: Sequence[str], classnum: int) -> tuple[np.ndarray, list[int]]:
    dataset, url = f"CIFAR-{classnum}", _URLS[classnum][0]
    images, labels = [], []
    label_key = "labels" if classnum == 10 else "fine_labels"
    for fname in files:
        d = _load_pickle(fname, dataset, url)
        if "data" not in d or label_key not in d:
            raise corrupt_file_error(dataset, fname, f"keys {sorted(d)}; expected 'data' and '{label_key}'", url)
        data = np.asarray(d["data"])
        lab = [int(x) for x in d[label_key]]
        if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072 or data.shape[0] != len(lab):
            raise corrupt_file_error(dataset, fname, f"'data' is {data.dtype} {data.shape} for {len(lab)} labels; "
                                     "expected uint8 (N, 3072)", url)
        images.append(data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        labels.extend(lab)
    arr = np.ascontiguousarray(np.concatenate(images)) if images else np.zeros((0, 32, 32, 3), np.uint8)
    return arr, labels


class CifarBase(RNGDataFlow):
    """CIFAR-10/100: produces ``[image, label]``, ``image`` a 32x32x3 uint8 array (RGB, HWC) in
    [0, 255], ``label`` an ``int`` (CIFAR-100: the fine label).

    The batches are looked for in ``dir/cifar-10-batches-py/`` (``data_batch_1`` .. ``data_batch_5``,
    ``test_batch``, ``batches.meta``) or ``dir/cifar-100-python/`` (``train``, ``test``, ``meta``).
    When that folder is missing, ``cifar-{10,100}-python.tar.gz`` is downloaded into ``dir`` and
    extracted.
    """

    def __init__(self, train_or_test: str, shuffle: bool | None = None, dir: str | None = None,
                 cifar_classnum: int = 10) -> None:
        """
        Args:
            train_or_test: ``'train'`` or ``'test'``.
            shuffle: shuffle every pass; defaults to True for ``'train'``.
            dir: the directory holding the extracted folder; defaults to
                ``get_dataset_path('cifar10_data')`` / ``get_dataset_path('cifar100_data')``.
            cifar_classnum: 10 or 100.
        """
        if train_or_test not in ("train", "test"):
            raise ValueError(f"{type(self).__name__}(train_or_test={train_or_test!r}): must be 'train' or 'test'")
        if cifar_classnum not in (10, 100):
            raise ValueError(f"cifar_classnum={cifar_classnum!r}: must be 10 or 100")
        self.cifar_classnum = cifar_classnum
        if dir is None:
            dir = get_dataset_path(f"cifar{cifar_classnum}_data")
        self.dir = dir
        self._maybe_download()
        train_files, test_files, meta_file = _filenames(dir, cifar_classnum)
        self.fs = train_files if train_or_test == "train" else test_files
        folder = os.path.join(dir, _FOLDERS[cifar_classnum])
        for f in self.fs + [meta_file]:
            if not os.path.isfile(f):
                raise DatasetFileNotFoundError(
                    f"CIFAR-{cifar_classnum}: the file {f} is missing from {folder}. Delete the folder {folder} to "
                    f"download {_URLS[cifar_classnum][0]} again, or extract that tarball into {dir} by hand.")
        self._label_names = self._parse_meta(meta_file)
        self.train_or_test = train_or_test
        self.images, self.labels = _read_batches(self.fs, cifar_classnum)
        if shuffle is None:
            shuffle = train_or_test == "train"
        self.shuffle = shuffle

    def _maybe_download(self) -> None:
        folder = os.path.join(self.dir, _FOLDERS[self.cifar_classnum])
        if os.path.isdir(folder):
            return
        url, size = _URLS[self.cifar_classnum]
        tarball = os.path.join(self.dir, url.rsplit("/", 1)[-1])
        fetch_file(f"CIFAR-{self.cifar_classnum}", tarball, url, expect_size=size)
        logger.info(f"Extracting {tarball} into {self.dir} ...")
        extract_tarball(f"CIFAR-{self.cifar_classnum}", tarball, self.dir, url)
        if not os.path.isdir(folder):
            raise corrupt_file_error(f"CIFAR-{self.cifar_classnum}", tarball,
                                     f"it has no folder {_FOLDERS[self.cifar_classnum]}", url)

    def _parse_meta(self, path: str) -> list[str]:
        d = _load_pickle(path, f"CIFAR-{self.cifar_classnum}", _URLS[self.cifar_classnum][0])
        key = "label_names" if self.cifar_classnum == 10 else "fine_label_names"
        if key not in d:
            raise corrupt_file_error(f"CIFAR-{self.cifar_classnum}", path, f"no '{key}' in keys {sorted(d)}",
                                     _URLS[self.cifar_classnum][0])
        return [_str(x) for x in d[key]]

    @property
    def data(self) -> list[list]:
        """All datapoints ``[image, label]`` in file order."""
        return [[img, lab] for img, lab in zip(self.images, self.labels)]

    def __len__(self) -> int:
        return len(self.labels)

    def __iter__(self) -> Iterator[list]:
        for k in pass_order(self):
            yield [self.images[k], self.labels[k]]

    def get_per_pixel_mean(self, names: Sequence[str] = ("train", "test")) -> np.ndarray:
        """The mean 32x32x3 float32 image over the splits ``names`` (``'train'`` and/or ``'test'``)."""
        for name in names:
            if name not in ("train", "test"):
                raise ValueError(f"get_per_pixel_mean(names={names!r}): {name!r} is not 'train' or 'test'")
        train_files, test_files, _ = _filenames(self.dir, self.cifar_classnum)
        files = (train_files if "train" in names else []) + (test_files if "test" in names else [])
        images, _ = _read_batches(files, self.cifar_classnum)
        return images.astype(np.float32).mean(axis=0)

    def get_per_channel_mean(self, names: Sequence[str] = ("train", "test")) -> np.ndarray:
        """The mean of each of the 3 channels over the splits ``names``."""
        return np.mean(self.get_per_pixel_mean(names), axis=(0, 1))

    def get_label_names(self) -> list[str]:
        """The class names, indexed by label (CIFAR-100: the fine labels)."""
        return self._label_names


class Cifar10(CifarBase):
    """CIFAR-10: ``[32x32x3 uint8 image, int label in 0..9]``; see :class:`CifarBase`."""

    def __init__(self, train_or_test: str, shuffle: bool | None = None, dir: str | None = None) -> None:
        super().__init__(train_or_test, shuffle, dir, 10)


class Cifar100(CifarBase):
    """CIFAR-100: ``[32x32x3 uint8 image, int fine label in 0..99]``; see :class:`CifarBase`."""

    def __init__(self, train_or_test: str, shuffle: bool | None = None, dir: str | None = None) -> None:
        super().__init__(train_or_test, shuffle, dir, 100)
