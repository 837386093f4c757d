"""MNIST and Fashion-MNIST, read from the IDX files their authors ship (gzip-compressed)."""

from __future__ import annotations

import gzip
import os
import zlib
from typing import Iterator

import numpy as np

from trainbus.utils.fs import get_dataset_path
from trainbus_dataflow.base import RNGDataFlow
from trainbus_dataflow.dataset._files import corrupt_file_error, fetch_file, pass_order

__all__ = ["Mnist", "FashionMnist", "read_idx"]

_IDX_MAGIC_IMAGES = 2051  # 0x00000803: unsigned byte, 3 dimensions
_IDX_MAGIC_LABELS = 2049  # 0x00000801: unsigned byte, 1 dimension


def _read_all(path: str) -> bytes:
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as f:
            return f.read()
    with open(path, "rb") as f:
        return f.read()


def read_idx(path: str, magic: int, dataset: str = "MNIST", url: str | None = None) -> np.ndarray:
    """Read an IDX file of unsigned bytes (``.gz`` or not) into a uint8 array of its dimensions.

    The header is the big-endian magic number (``0x0801`` for labels, ``0x0803`` for images) followed
    by one big-endian uint32 size per dimension.

    Raises:
        DatasetFileCorruptError: on a wrong magic number or a file shorter than its header says.
    """
    try:
        buf = _read_all(path)
    except (EOFError, OSError, zlib.error) as e:
        raise corrupt_file_error(dataset, path, f"gzip cannot read it: {e}", url) from e
    if len(buf) < 4:
        raise corrupt_file_error(dataset, path, f"{len(buf)} bytes, shorter than the IDX header", url)
    got = int.from_bytes(buf[:4], "big")
    if got != magic:
        raise corrupt_file_error(dataset, path, f"IDX magic number {got}, expected {magic}", url)
    ndim = magic & 0xFF
    head = 4 + 4 * ndim
    if len(buf) < head:
        raise corrupt_file_error(dataset, path, f"{len(buf)} bytes, shorter than the IDX header", url)
    shape = tuple(int(x) for x in np.frombuffer(buf, ">u4", ndim, 4))
    need = int(np.prod(shape))
    if len(buf) - head < need:
        raise corrupt_file_error(dataset, path, f"the header announces {shape} bytes of data ({need}) but only "
                                 f"{len(buf) - head} follow", url)
    return np.frombuffer(buf, np.uint8, need, head).reshape(shape)


class Mnist(RNGDataFlow):
    """MNIST digits: produces ``[image, label]``, ``image`` a 28x28 float32 array in [0, 1],
    ``label`` a ``numpy.uint8`` in 0..9.

    The four files ``{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz`` are looked for in ``dir``
    (default ``get_dataset_path('mnist_data')``); a missing one is downloaded, and when that is not
    possible the error says which URL to fetch and where to put it. Uncompressed copies (the same
    names without ``.gz``) are read as well.
    """

    _DIR_NAME = "mnist_data"
    _DATASET = "MNIST"
    #: base URLs tried in order for a missing file
    _SOURCE_URLS: tuple[str, ...] = ("http://yann.lecun.com/exdb/mnist/",
                                     "https://ossci-datasets.s3.amazonaws.com/mnist/")

    def __init__(self, train_or_test: str, shuffle: bool = True, dir: str | None = None) -> None:
        """
        Args:
            train_or_test: ``'train'`` (60000 images) or ``'test'`` (10000 images).
            shuffle: produce the datapoints in a new random order every pass.
            dir: the directory holding the files; defaults to ``get_dataset_path('mnist_data')``.
        """
        if train_or_test not in ("train", "test"):
            raise ValueError(f"{type(self).__name__}(train_or_test={train_or_test!r}): must be 'train' or 'test'")
        if dir is None:
            dir = get_dataset_path(self._DIR_NAME)
        self.dir = dir
        self.train_or_test = train_or_test
        self.shuffle = shuffle
        prefix = "train" if train_or_test == "train" else "t10k"
        images = self._load(f"{prefix}-images-idx3-ubyte.gz", _IDX_MAGIC_IMAGES)
        labels = self._load(f"{prefix}-labels-idx1-ubyte.gz", _IDX_MAGIC_LABELS)
        if images.shape[0] != labels.shape[0]:
            raise corrupt_file_error(self._DATASET, os.path.join(dir, f"{prefix}-labels-idx1-ubyte.gz"),
                                     f"{labels.shape[0]} labels for {images.shape[0]} images")
        self.images = images.astype(np.float32) / np.float32(255.0)
        self.labels = labels

    def _load(self, filename: str, magic: int) -> np.ndarray:
        path = os.path.join(self.dir, filename)
        raw = path[:-3]
        if not os.path.isfile(path) and os.path.isfile(raw):
            return read_idx(raw, magic, self._DATASET)
        urls = [u + filename for u in self._SOURCE_URLS]
        fetch_file(self._DATASET, path, urls)
        return read_idx(path, magic, self._DATASET, urls[0])

    def __len__(self) -> int:
        return self.images.shape[0]

    def __iter__(self) -> Iterator[list]:
        for k in pass_order(self):
            yield [self.images[k], self.labels[k]]


class FashionMnist(Mnist):
    """Fashion-MNIST: the same files, layout and datapoints as :class:`Mnist` (in
    ``get_dataset_path('fashion_mnist_data')``), with 10 clothing classes."""

    _DIR_NAME = "fashion_mnist_data"
    _DATASET = "Fashion-MNIST"
    _SOURCE_URLS = ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",)

    def get_label_names(self) -> list[str]:
        """The class names, indexed by label."""
        return ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
