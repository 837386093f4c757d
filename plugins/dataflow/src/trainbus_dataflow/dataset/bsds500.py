"""The Berkeley Segmentation Data Set 500 (BSDS500): images and their edge annotations."""

from __future__ import annotations

import glob
import os
from typing import Iterator

import numpy as np

from trainbus.utils import logger
from trainbus.utils.fs import get_dataset_path
from trainbus_dataflow.base import RNGDataFlow
from trainbus_dataflow.dataset._files import (DatasetFileNotFoundError, corrupt_file_error, extract_tarball, fetch_file,
                                              pass_order)
from trainbus_dataflow.dataset._mat import load_mat

__all__ = ["BSDS500"]

IMG_W, IMG_H = 481, 321


class BSDS500(RNGDataFlow):
    """BSDS500 (https://www2.eecs.berkeley.edu/Research/Projects/CS/vision/grouping/resources.html):
    produces ``[image, label]``, ``image`` a (321, 481, 3) uint8 BGR array, ``label`` a (321, 481)
    float32 array in [0, 1]: for each pixel, the fraction of the annotators who marked it as an edge.
    Portrait images and annotations are transposed to landscape.

    The layout is the one of ``BSR_bsds500.tgz``: ``data_dir/BSR/BSDS500/data/images/{name}/*.jpg``
    and ``data_dir/BSR/BSDS500/data/groundTruth/{name}/<image id>.mat``. Images come in sorted
    file-name order (before shuffling).
    """

    _URL = "http://www.eecs.berkeley.edu/Research/Projects/CS/vision/grouping/BSR/BSR_bsds500.tgz"
    _SIZE = 70763455

    def __init__(self, name: str, data_dir: str | None = None, shuffle: bool = True) -> None:
        """
        Args:
            name: ``'train'``, ``'test'`` or ``'val'``.
            data_dir: the directory containing the ``BSR`` folder; defaults to
                ``get_dataset_path('bsds500_data')``. When ``BSR`` is missing, the tarball is
                downloaded and extracted there.
            shuffle: shuffle every pass.
        """
        if name not in ("train", "test", "val"):
            raise ValueError(f"BSDS500(name={name!r}): must be 'train', 'test' or 'val'")
        if data_dir is None:
            data_dir = get_dataset_path("bsds500_data")
        if not os.path.isdir(os.path.join(data_dir, "BSR")):
            tarball = os.path.join(data_dir, self._URL.rsplit("/", 1)[-1])
            fetch_file("BSDS500", tarball, self._URL, expect_size=self._SIZE)
            logger.info(f"Extracting {tarball} into {data_dir} ...")
            extract_tarball("BSDS500", tarball, data_dir, self._URL)
        self.data_root = os.path.join(data_dir, "BSR", "BSDS500", "data")
        if not os.path.isdir(self.data_root):
            raise DatasetFileNotFoundError(
                f"BSDS500: the directory {self.data_root} is missing. Extract {self._URL} into {data_dir} so that "
                f"{os.path.join(data_dir, 'BSR')} holds BSDS500/data/images and BSDS500/data/groundTruth.")
        self.shuffle = shuffle
        self._load(name)

    def _load(self, name: str) -> None:
        from .._opencv import cv2

        image_files = sorted(glob.glob(os.path.join(self.data_root, "images", name, "*.jpg")))
        if not image_files:
            raise DatasetFileNotFoundError(
                f"BSDS500: no .jpg image in {os.path.join(self.data_root, 'images', name)}. Extract {self._URL} "
                f"again into the directory that holds BSR.")
        gt_dir = os.path.join(self.data_root, "groundTruth", name)
        self.data = np.zeros((len(image_files), IMG_H, IMG_W, 3), dtype=np.uint8)
        self.label = np.zeros((len(image_files), IMG_H, IMG_W), dtype=np.float32)
        for idx, f in enumerate(image_files):
            im = cv2.imread(f, cv2.IMREAD_COLOR)
            if im is None:
                raise corrupt_file_error("BSDS500", f, "OpenCV cannot decode it", self._URL)
            if im.shape[0] > im.shape[1]:
                im = np.transpose(im, (1, 0, 2))
            if im.shape[:2] != (IMG_H, IMG_W):
                raise corrupt_file_error("BSDS500", f, f"image of size {im.shape[:2]}, expected {(IMG_H, IMG_W)}",
                                         self._URL)
            gt_file = os.path.join(gt_dir, os.path.basename(f).split(".")[0] + ".mat")
            if not os.path.isfile(gt_file):
                raise DatasetFileNotFoundError(
                    f"BSDS500: the annotation {gt_file} of the image {f} is missing. Extract {self._URL} again "
                    f"into the directory that holds BSR.")
            mat = load_mat("BSDS500", gt_file, self._URL)
            if "groundTruth" not in mat:
                raise corrupt_file_error("BSDS500", gt_file, "no 'groundTruth' variable in it", self._URL)
            annots = mat["groundTruth"][0]
            n = annots.shape[0]
            gt = sum(np.asarray(annots[k]["Boundaries"][0][0], dtype=np.float32) for k in range(n))
            gt = np.asarray(gt, dtype=np.float32) * np.float32(1.0 / n)
            if gt.shape[0] > gt.shape[1]:
                gt = gt.transpose()
            if gt.shape != (IMG_H, IMG_W):
                raise corrupt_file_error("BSDS500", gt_file, f"boundaries of size {gt.shape}, expected "
                                         f"{(IMG_H, IMG_W)}", self._URL)
            self.data[idx] = im
            self.label[idx] = gt
        self.image_files = image_files

    def __len__(self) -> int:
        return self.data.shape[0]

    def __iter__(self) -> Iterator[list]:
        for k in pass_order(self):
            yield [self.data[k], self.label[k]]
