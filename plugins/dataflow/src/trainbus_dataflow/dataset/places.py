"""Places365-Standard (scene categories), in the "easy directory structure" of its small-image release."""

from __future__ import annotations

import os
from typing import Iterator

import numpy as np

from trainbus.utils import logger
from trainbus_dataflow.base import RNGDataFlow
from trainbus_dataflow.dataset._files import (DatasetFileNotFoundError, check_listed_images, corrupt_file_error,
                                              pass_order)

__all__ = ["Places365Standard"]

PLACES365_EASY_URL = "http://data.csail.mit.edu/places/places365/places365standard_easyformat.tar"


def read_bgr_image(dataset: str, path: str, listed_in: str, url: str | None = None) -> np.ndarray:
    """Decode the image file ``path`` into a uint8 (h, w, 3) BGR array with OpenCV.

    Raises:
        DatasetFileNotFoundError: ``path`` (listed in ``listed_in``) does not exist.
        DatasetFileCorruptError: OpenCV cannot decode it.
    """
    from .._opencv import cv2

    im = cv2.imread(path, cv2.IMREAD_COLOR)
    if im is None:
        if not os.path.isfile(path):
            raise DatasetFileNotFoundError(
                f"{dataset}: the image {path}, listed in {listed_in}, is missing. Extract the whole dataset again"
                + (f" ({url})." if url else "."))
        raise corrupt_file_error(dataset, path, "OpenCV cannot decode it", url)
    return im


class Places365Standard(RNGDataFlow):
    """The Places365-Standard scene dataset (http://places2.csail.mit.edu/download.html), its small
    (256x256) images only: produces ``[image, label]``, ``image`` a uint8 (256, 256, 3) BGR array as
    decoded by OpenCV, ``label`` an int in 0..364.

    ``dir`` is the "easy directory structure" (``places365standard_easyformat.tar`` extracted)::

        dir/
          train.txt        # one image a line: train/airfield/00000001.jpg
          val.txt          # val/airfield/00000001.jpg
          train/
            airfield/
              00000001.jpg
              ...
          val/
            airfield/
              ...

    The second component of each listed path is the class name. Class ids are the positions of the
    class names in alphabetical order (as in the published ``categories_places365.txt``), counted
    over the classes the label file lists; :meth:`get_label_names` gives the names.
    """

    def __init__(self, dir: str, name: str, shuffle: bool | None = None) -> None:
        """
        Args:
            dir: the directory holding ``train.txt``, ``val.txt``, ``train/`` and ``val/``.
            name: ``'train'`` or ``'val'``.
            shuffle: shuffle every pass; defaults to True for ``'train'``.
        """
        if name not in ("train", "val"):
            raise ValueError(f"Places365Standard(name={name!r}): must be 'train' or 'val'")
        dir = os.path.expanduser(dir)
        if not os.path.isdir(dir):
            raise DatasetFileNotFoundError(
                f"Places365Standard: the directory {dir} does not exist. Download {PLACES365_EASY_URL} and extract "
                f"it; pass the directory that holds train.txt and val.txt (places365_standard/).")
        self.dir = dir
        self.name = name
        if shuffle is None:
            shuffle = name == "train"
        self.shuffle = shuffle

        label_file = os.path.join(dir, name + ".txt")
        if not os.path.isfile(label_file):
            raise DatasetFileNotFoundError(
                f"Places365Standard: the file {label_file} is missing. {dir} must be the 'easy directory structure' "
                f"({PLACES365_EASY_URL} extracted), holding train.txt, val.txt, train/ and val/.")
        self.label_file = label_file
        entries: list[tuple[str, str]] = []
        with open(label_file) as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                rel = line.split()[0]
                parts = rel.strip("/").split("/")
                if len(parts) < 3:
                    raise corrupt_file_error(
                        "Places365Standard", label_file,
                        f"line {lineno} is {line!r}, expected '<split>/<class name>/<image file>'", PLACES365_EASY_URL)
                entries.append((os.path.join(dir, rel), parts[1]))
        if not entries:
            raise corrupt_file_error("Places365Standard", label_file, "it lists no image", PLACES365_EASY_URL)
        self._labels = sorted({cls for _, cls in entries})
        class_id = {cls: i for i, cls in enumerate(self._labels)}
        self._files = [(path, class_id[cls]) for path, cls in entries]
        check_listed_images("Places365Standard", (path for path, _ in self._files), label_file,
                            f"Check that {dir} has the 'easy directory structure' and that the whole tarball was "
                            "extracted.")
        logger.info(f"Found {len(self._files)} images of {len(self._labels)} classes in {label_file}.")

    def get_label_names(self) -> list[str]:
        """The class names, indexed by label (alphabetical)."""
        return list(self._labels)

    def __len__(self) -> int:
        return len(self._files)

    def __iter__(self) -> Iterator[list]:
        for k in pass_order(self):
            path, label = self._files[k]
            yield [read_bgr_image("Places365Standard", path, self.label_file, PLACES365_EASY_URL), label]
