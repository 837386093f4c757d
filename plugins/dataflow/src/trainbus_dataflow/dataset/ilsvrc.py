"""ILSVRC12 (ImageNet 1000 classes): the directory layout of the image tarballs and Caffe's meta files;
Tiny ImageNet (200 classes of 64x64 images) in the layout of its zip file."""

from __future__ import annotations

import os
import struct
from typing import Iterator

import numpy as np

from trainbus.utils import logger
from trainbus.utils.fs import get_dataset_path, mkdir_p
from trainbus_dataflow._proto import iter_fields, read_varint
from trainbus_dataflow.base import RNGDataFlow
from trainbus_dataflow.dataset._files import (DatasetFileNotFoundError, check_listed_images, corrupt_file_error,
                                              extract_tarball, fetch_file, pass_order)
from trainbus_dataflow.dataset.places import read_bgr_image

__all__ = ["ILSVRCMeta", "ILSVRC12", "ILSVRC12Files", "TinyImageNet", "parse_blob_proto"]

CAFFE_ILSVRC12_URL = ("http://dl.caffe.berkeleyvision.org/caffe_ilsvrc12.tar.gz", 17858008)


def parse_blob_proto(buf: bytes) -> np.ndarray:
    """Decode a Caffe ``BlobProto`` message (e.g. ``imagenet_mean.binaryproto``) into a float32 array.

    The shape is taken from ``shape.dim`` when present, else from ``num``/``channels``/``height``/
    ``width``; the values from ``data`` (packed or not) or ``double_data``.

    Raises:
        ValueError: when the bytes are not a complete ``BlobProto``.
    """
    legacy = {1: 0, 2: 0, 3: 0, 4: 0}  # num, channels, height, width
    dims: list[int] = []
    floats: list[np.ndarray] = []
    doubles: list[np.ndarray] = []
    for field, wire, value in iter_fields(buf):
        if wire == 0:
            if field in legacy:
                legacy[field] = value
        elif field == 5 and wire in (2, 5):  # data, packed or not
            floats.append(np.frombuffer(value, "<f4"))
        elif field == 8 and wire in (1, 2):  # double_data, packed or not
            doubles.append(np.frombuffer(value, "<f8"))
        elif field == 7 and wire == 2:  # BlobShape { repeated int64 dim = 1 [packed]; }
            for sub, sub_wire, sub_value in iter_fields(value):
                if sub == 1 and sub_wire == 2:
                    p = 0
                    while p < len(sub_value):
                        d, p = read_varint(sub_value, p)
                        dims.append(d)
                elif sub == 1 and sub_wire == 0:
                    dims.append(sub_value)
                else:
                    raise ValueError("unexpected field in BlobShape")
    values = np.concatenate(floats) if floats else (np.concatenate(doubles) if doubles else np.zeros(0))
    if not dims:
        dims = [legacy[k] for k in (1, 2, 3, 4)]
        while dims and dims[0] in (0, 1) and int(np.prod(dims[1:] or [0])) == values.size:
            dims = dims[1:]
    if int(np.prod(dims)) != values.size:
        raise ValueError(f"shape {dims} does not match {values.size} values")
    return values.astype(np.float32).reshape(dims)


class ILSVRCMeta:
    """The ILSVRC12 meta data of Caffe's ``caffe_ilsvrc12.tar.gz``: ``synsets.txt``,
    ``synset_words.txt``, ``train.txt``/``val.txt``/``test.txt`` and ``imagenet_mean.binaryproto``.
    """

    def __init__(self, dir: str | None = None) -> None:
        """
        Args:
            dir: the directory of the extracted meta files; defaults to
                ``get_dataset_path('ilsvrc_metadata')``. When ``synsets.txt`` is missing there, the
                tarball is downloaded and extracted into it.
        """
        if dir is None:
            dir = get_dataset_path("ilsvrc_metadata")
        self.dir = os.path.expanduser(dir)
        mkdir_p(self.dir)
        if not os.path.isfile(os.path.join(self.dir, "synsets.txt")):
            self._download_caffe_meta()

    def _download_caffe_meta(self) -> None:
        url, size = CAFFE_ILSVRC12_URL
        tarball = os.path.join(self.dir, url.rsplit("/", 1)[-1])
        fetch_file("ILSVRC12 meta", tarball, url, expect_size=size)
        extract_tarball("ILSVRC12 meta", tarball, self.dir, url)

    def _lines(self, filename: str) -> list[str]:
        fname = os.path.join(self.dir, filename)
        if not os.path.isfile(fname):
            raise DatasetFileNotFoundError(
                f"ILSVRC12 meta: the file {fname} is missing. Extract {CAFFE_ILSVRC12_URL[0]} into {self.dir} "
                f"(or delete {os.path.join(self.dir, 'synsets.txt')} to have it downloaded again).")
        with open(fname) as f:
            return [x.strip() for x in f]

    def get_synset_words_1000(self) -> dict[int, str]:
        """``{class number: "synset id, description"}`` from ``synset_words.txt``."""
        return dict(enumerate(self._lines("synset_words.txt")))

    def get_synset_1000(self) -> dict[int, str]:
        """``{class number: synset id}`` from ``synsets.txt``."""
        return dict(enumerate(self._lines("synsets.txt")))

    def get_image_list(self, name: str, dir_structure: str = "original") -> list[tuple[str, int]]:
        """The ``(image file name, label)`` pairs of ``{name}.txt``.

        Args:
            name: ``'train'``, ``'val'`` or ``'test'``.
            dir_structure: ``'original'`` or ``'train'`` (see :class:`ILSVRC12`). With ``'train'``,
                file names of val/test get their class's synset directory prepended.
        """
        if name not in ("train", "val", "test"):
            raise ValueError(f"get_image_list(name={name!r}): must be 'train', 'val' or 'test'")
        if dir_structure not in ("original", "train"):
            raise ValueError(f"get_image_list(dir_structure={dir_structure!r}): must be 'original' or 'train'")
        synset = self.get_synset_1000() if (name != "train" and dir_structure != "original") else None
        fname = os.path.join(self.dir, name + ".txt")
        ret = []
        for lineno, line in enumerate(self._lines(name + ".txt"), 1):
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or not parts[1].lstrip("-").isdigit():
                raise corrupt_file_error("ILSVRC12 meta", fname, f"line {lineno} is {line!r}, expected "
                                         "'<file name> <label>'", CAFFE_ILSVRC12_URL[0])
            fn, cls = parts[0], int(parts[1])
            if synset is not None:
                fn = os.path.join(synset[cls], fn)
            ret.append((fn, cls))
        if not ret:
            raise corrupt_file_error("ILSVRC12 meta", fname, "it lists no image", CAFFE_ILSVRC12_URL[0])
        return ret

    def get_per_pixel_mean(self, size: tuple[int, int] | None = None) -> np.ndarray:
        """The mean image of ``imagenet_mean.binaryproto``: float32 (h, w, 3 BGR) in [0, 255].

        Args:
            size: ``(h, w)`` to resize to; defaults to the file's size (256x256).
        """
        mean_file = os.path.join(self.dir, "imagenet_mean.binaryproto")
        if not os.path.isfile(mean_file):
            raise DatasetFileNotFoundError(
                f"ILSVRC12 meta: the file {mean_file} is missing. Extract {CAFFE_ILSVRC12_URL[0]} into {self.dir}.")
        with open(mean_file, "rb") as f:
            buf = f.read()
        try:
            arr = parse_blob_proto(buf)
        except (ValueError, struct.error) as e:
            raise corrupt_file_error("ILSVRC12 meta", mean_file, f"not a BlobProto: {e}", CAFFE_ILSVRC12_URL[0]) from e
        if arr.ndim == 4:
            arr = arr[0]
        if arr.ndim != 3 or arr.shape[0] != 3:
            raise corrupt_file_error("ILSVRC12 meta", mean_file, f"a blob of shape {arr.shape}, expected (3, h, w)",
                                     CAFFE_ILSVRC12_URL[0])
        arr = np.ascontiguousarray(np.transpose(arr, [1, 2, 0]))
        if size is not None:
            from .._opencv import cv2
            arr = cv2.resize(arr, (int(size[1]), int(size[0])))
        return arr

    @staticmethod
    def guess_dir_structure(dir: str) -> str:
        """``'train'`` when ``dir`` (e.g. ``/path/to/imagenet/val``) has synset sub-directories
        (``n01440764/`` ...), else ``'original'``."""
        entries = sorted(os.listdir(dir))
        if not entries:
            raise DatasetFileNotFoundError(f"ILSVRC12: the directory {dir} is empty; extract the image tarball "
                                           "into it (see the ILSVRC12 docstring for the layout)")
        subdir = entries[0]
        if subdir.startswith("n") and os.path.isdir(os.path.join(dir, subdir)):
            structure = "train"
        else:
            structure = "original"
        logger.info(f"[ILSVRC12] Assuming directory {dir} has '{structure}' structure.")
        return structure


class ILSVRC12Files(RNGDataFlow):
    """Like :class:`ILSVRC12`, but produces ``[image file path, label]`` instead of decoded images,
    so decoding can happen elsewhere (e.g. in parallel workers)."""

    def __init__(self, dir: str, name: str, meta_dir: str | None = None, shuffle: bool | None = None,
                 dir_structure: str | None = None) -> None:
        """The arguments are those of :class:`ILSVRC12`."""
        if name not in ("train", "test", "val"):
            raise ValueError(f"{type(self).__name__}(name={name!r}): must be 'train', 'val' or 'test'")
        dir = os.path.expanduser(dir)
        self.full_dir = os.path.join(dir, name)
        self.name = name
        if not os.path.isdir(self.full_dir):
            raise DatasetFileNotFoundError(
                f"ILSVRC12: the directory {self.full_dir} is missing. Extract ILSVRC2012_img_{name}.tar into it "
                f"(see the {type(self).__name__} docstring for the layout).")
        if meta_dir is not None and not os.path.isdir(meta_dir):
            raise DatasetFileNotFoundError(
                f"ILSVRC12: meta_dir {meta_dir} is not a directory; extract {CAFFE_ILSVRC12_URL[0]} into it or "
                f"pass meta_dir=None to use get_dataset_path('ilsvrc_metadata').")
        if shuffle is None:
            shuffle = name == "train"
        self.shuffle = shuffle
        if name == "train":
            dir_structure = "train"
        if dir_structure is None:
            dir_structure = ILSVRCMeta.guess_dir_structure(self.full_dir)
        self.dir_structure = dir_structure
        meta = ILSVRCMeta(meta_dir)
        self.imglist = meta.get_image_list(name, dir_structure)
        check_listed_images("ILSVRC12", (os.path.join(self.full_dir, fname) for fname, _ in self.imglist),
                            os.path.join(meta.dir, name + ".txt"),
                            f"Check that {self.full_dir} has the '{dir_structure}' layout (dir_structure=) and that "
                            f"the whole tarball was extracted.")

    def __len__(self) -> int:
        return len(self.imglist)

    def __iter__(self) -> Iterator[list]:
        for k in pass_order(self):
            fname, label = self.imglist[k]
            yield [os.path.join(self.full_dir, fname), label]


class ILSVRC12(ILSVRC12Files):
    """The ILSVRC12 classification images: produces ``[image, label]``, ``image`` a uint8 (h, w, 3)
    BGR array as decoded by OpenCV, ``label`` an int in 0..999 following Caffe's ``synsets.txt``
    (see :class:`ILSVRCMeta`).

    ``dir`` holds one sub-directory per split. With ``dir_structure='original'`` (what extracting
    the tarballs gives)::

        dir/
          train/
            n02134418/
              n02134418_198.JPEG
              ...
          val/
            ILSVRC2012_val_00000001.JPEG
            ...
          test/
            ILSVRC2012_test_00000001.JPEG

    With ``dir_structure='train'``, ``val/`` (and ``test/``) are split into synset directories like
    ``train/``: ``val/n01440764/ILSVRC2012_val_00000293.JPEG``. ``train/`` always has that layout.
    Extracting the training tarball takes a second step, one tar per class::

        mkdir train && tar xf ILSVRC2012_img_train.tar -C train && cd train
        for f in *.tar; do mkdir -p "${f%.tar}" && tar xf "$f" -C "${f%.tar}" && rm "$f"; done
    """

    def __init__(self, dir: str, name: str, meta_dir: str | None = None, shuffle: bool | None = None,
                 dir_structure: str | None = None) -> None:
        """
        Args:
            dir: the directory containing the sub-directory ``name``.
            name: ``'train'``, ``'val'`` or ``'test'``.
            meta_dir: the directory of Caffe's meta files (see :class:`ILSVRCMeta`).
            shuffle: shuffle every pass; defaults to True for ``'train'``.
            dir_structure: ``'original'`` or ``'train'``, the layout of ``val``/``test``; guessed
                from the directory when not given.
        """
        super().__init__(dir, name, meta_dir, shuffle, dir_structure)

    def __iter__(self) -> Iterator[list]:
        from .._opencv import cv2

        for fname, label in super().__iter__():
            im = cv2.imread(fname, cv2.IMREAD_COLOR)
            if im is None:
                raise corrupt_file_error("ILSVRC12", fname, "OpenCV cannot decode it")
            yield [im, label]

    @staticmethod
    def get_training_bbox(bbox_dir: str, imglist: list[tuple[str, int]]) -> list[np.ndarray | None]:
        """The first bounding box ``[xmin, ymin, xmax, ymax]`` (float32) of every image of ``imglist``,
        read from the Pascal-VOC XML files under ``bbox_dir`` (``<image name>.xml``); ``None`` for an
        image without a readable box."""
        import xml.etree.ElementTree as ET

        ret: list[np.ndarray | None] = []
        cnt = 0
        for fname, _ in imglist:
            xml = os.path.join(bbox_dir, os.path.splitext(fname)[0] + ".xml")
            try:
                box = ET.parse(xml).getroot().find("object").find("bndbox")
                ret.append(np.asarray([float(box.find(k).text) for k in ("xmin", "ymin", "xmax", "ymax")],
                                      dtype=np.float32))
                cnt += 1
            except (OSError, ET.ParseError, AttributeError, TypeError, ValueError):
                ret.append(None)
        logger.info(f"{cnt}/{len(imglist)} images have bounding box.")
        return ret


TINY_IMAGENET_URL = "http://cs231n.stanford.edu/tiny-imagenet-200.zip"


class TinyImageNet(RNGDataFlow):
    """Tiny ImageNet (the ``tiny-imagenet-200.zip`` of Stanford's CS231n): 200 classes with 500
    training and 50 validation images each. Produces ``[image, label]``, ``image`` a uint8 (64, 64, 3)
    BGR array as decoded by OpenCV (grayscale files are expanded to 3 channels), ``label`` an int in
    [0, 200): the line number of the class's WordNet id in ``wnids.txt``.

    ``dir`` is the extracted ``tiny-imagenet-200/``::

        dir/
          wnids.txt                  # one WordNet id a line: n01443537 ...
          train/
            n01443537/
              images/
                n01443537_0.JPEG
                ...
          val/
            val_annotations.txt      # <image file> <wnid> <x0> <y0> <x1> <y1>, tab-separated
            images/
              val_0.JPEG
              ...

    Any number of classes is accepted (labels are then in [0, number of lines of ``wnids.txt``)).
    Training images come class by class, in ``wnids.txt`` order, each class's files sorted by name;
    validation images in the order of ``val_annotations.txt``.
    """

    def __init__(self, dir: str, name: str, shuffle: bool | None = None) -> None:
        """
        Args:
            dir: the directory holding ``wnids.txt``, ``train/`` and ``val/``.
            name: ``'train'`` or ``'val'``.
            shuffle: shuffle every pass; defaults to True for ``'train'``.
        """
        if name not in ("train", "val"):
            raise ValueError(f"TinyImageNet(name={name!r}): must be 'train' or 'val'")
        dir = os.path.expanduser(dir)
        if not os.path.isdir(dir):
            raise DatasetFileNotFoundError(
                f"TinyImageNet: the directory {dir} does not exist. Download {TINY_IMAGENET_URL}, unzip it and pass "
                f"the tiny-imagenet-200 directory it creates.")
        self.dir = dir
        self.name = name
        self.full_dir = os.path.join(dir, name)
        if shuffle is None:
            shuffle = name == "train"
        self.shuffle = shuffle

        wnids_file = os.path.join(dir, "wnids.txt")
        if not os.path.isfile(wnids_file):
            raise DatasetFileNotFoundError(
                f"TinyImageNet: the file {wnids_file} is missing. {dir} must be {TINY_IMAGENET_URL} unzipped "
                f"(tiny-imagenet-200/ with wnids.txt, train/ and val/).")
        with open(wnids_file) as f:
            self.wnids = [x.strip() for x in f if x.strip()]
        if not self.wnids:
            raise corrupt_file_error("TinyImageNet", wnids_file, "it lists no class", TINY_IMAGENET_URL)
        class_id = {wnid: i for i, wnid in enumerate(self.wnids)}
        if len(class_id) != len(self.wnids):
            dups = sorted({w for w in self.wnids if self.wnids.count(w) > 1})
            raise corrupt_file_error("TinyImageNet", wnids_file, f"it lists {dups} more than once", TINY_IMAGENET_URL)
        if not os.path.isdir(self.full_dir):
            raise DatasetFileNotFoundError(
                f"TinyImageNet: the directory {self.full_dir} is missing. Unzip {TINY_IMAGENET_URL} completely "
                f"into {os.path.dirname(dir.rstrip(os.sep)) or '.'}.")

        self.imglist: list[tuple[str, int]] = []
        if name == "train":
            self.listed_in = self.full_dir
            for label, wnid in enumerate(self.wnids):
                img_dir = os.path.join(self.full_dir, wnid, "images")
                if not os.path.isdir(img_dir):
                    raise DatasetFileNotFoundError(
                        f"TinyImageNet: the directory {img_dir} of class {wnid} (line {label + 1} of {wnids_file}) "
                        f"is missing. Unzip {TINY_IMAGENET_URL} completely.")
                files = sorted(x for x in os.listdir(img_dir)
                               if not x.startswith(".") and os.path.isfile(os.path.join(img_dir, x)))
                if not files:
                    raise DatasetFileNotFoundError(
                        f"TinyImageNet: the directory {img_dir} of class {wnid} holds no image. Unzip "
                        f"{TINY_IMAGENET_URL} completely.")
                self.imglist.extend((os.path.join(img_dir, x), label) for x in files)
        else:
            ann_file = os.path.join(self.full_dir, "val_annotations.txt")
            self.listed_in = ann_file
            if not os.path.isfile(ann_file):
                raise DatasetFileNotFoundError(
                    f"TinyImageNet: the file {ann_file} is missing. Unzip {TINY_IMAGENET_URL} completely.")
            with open(ann_file) as f:
                for lineno, line in enumerate(f, 1):
                    parts = line.split()
                    if not parts:
                        continue
                    if len(parts) < 2:
                        raise corrupt_file_error("TinyImageNet", ann_file, f"line {lineno} is {line.strip()!r}, "
                                                 "expected '<image file> <wnid> ...'", TINY_IMAGENET_URL)
                    if parts[1] not in class_id:
                        raise corrupt_file_error("TinyImageNet", ann_file, f"line {lineno} names the class "
                                                 f"{parts[1]!r}, which is not in {wnids_file}", TINY_IMAGENET_URL)
                    self.imglist.append((os.path.join(self.full_dir, "images", parts[0]), class_id[parts[1]]))
            if not self.imglist:
                raise corrupt_file_error("TinyImageNet", ann_file, "it lists no image", TINY_IMAGENET_URL)
            check_listed_images("TinyImageNet", (path for path, _ in self.imglist), ann_file,
                                f"Unzip {TINY_IMAGENET_URL} completely.")
        logger.info(f"[TinyImageNet] Found {len(self.imglist)} images of {len(self.wnids)} classes in "
                    f"{self.full_dir}.")

    def __len__(self) -> int:
        return len(self.imglist)

    def __iter__(self) -> Iterator[list]:
        for k in pass_order(self):
            path, label = self.imglist[k]
            yield [read_bgr_image("TinyImageNet", path, self.listed_in, TINY_IMAGENET_URL), label]
