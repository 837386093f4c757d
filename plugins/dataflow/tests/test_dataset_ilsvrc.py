"""ILSVRC12 readers on the real directory layout and Caffe's ``caffe_ilsvrc12`` meta files, through
``trainbus.dataflow.dataset``."""

from __future__ import annotations

import os
import socket
import struct

import numpy as np
import pytest

from dataflow_fixtures import encode_varint as _varint
from trainbus.dataflow.dataset import (ILSVRC12, DatasetFileCorruptError, DatasetFileNotFoundError, ILSVRC12Files,
                                       ILSVRCMeta)
from trainbus_dataflow.dataset import ilsvrc as ilsvrc_mod
from optdeps import import_opt  # tests/_support

cv2 = import_opt("image", "cv2")  # trainbus-dataflow[image], kept outside site-packages
pytestmark = pytest.mark.usefixtures("opencv_importable")

SYNSETS = ["n01440764", "n01443537", "n01484850"]
WORDS = ["n01440764 tench, Tinca tinca", "n01443537 goldfish, Carassius auratus",
         "n01484850 great white shark, white shark"]


def blob_proto(arr: np.ndarray, packed: bool = True, with_shape: bool = False) -> bytes:
    """Encode a Caffe BlobProto (num=1, channels=2, height=3, width=4, data=5, shape=7) by hand."""
    c, h, w = arr.shape
    msg = b""
    if with_shape:
        dims = b"".join(_varint(d) for d in (1, c, h, w))
        shape = _varint((1 << 3) | 2) + _varint(len(dims)) + dims
        msg += _varint((7 << 3) | 2) + _varint(len(shape)) + shape
    else:
        for field, v in ((1, 1), (2, c), (3, h), (4, w)):
            msg += _varint(field << 3) + _varint(v)
    floats = arr.astype("<f4").ravel()
    if packed:
        body = floats.tobytes()
        msg += _varint((5 << 3) | 2) + _varint(len(body)) + body
    else:
        msg += b"".join(_varint((5 << 3) | 5) + struct.pack("<f", x) for x in floats)
    return msg


def make_meta(d):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "synsets.txt"), "w") as f:
        f.write("\n".join(SYNSETS) + "\n")
    with open(os.path.join(d, "synset_words.txt"), "w") as f:
        f.write("\n".join(WORDS) + "\n")
    with open(os.path.join(d, "train.txt"), "w") as f:
        f.write("n01440764/n01440764_10026.JPEG 0\nn01443537/n01443537_2.JPEG 1\nn01484850/n01484850_7.JPEG 2\n"
                "n01440764/n01440764_39.JPEG 0\n")
    with open(os.path.join(d, "val.txt"), "w") as f:
        f.write("ILSVRC2012_val_00000001.JPEG 2\nILSVRC2012_val_00000002.JPEG 0\n")
    with open(os.path.join(d, "test.txt"), "w") as f:
        f.write("ILSVRC2012_test_00000001.JPEG 0\n")


def make_images(root, val_structure="original", seed=0):
    rng = np.random.RandomState(seed)
    written = {}

    def put(rel):
        p = os.path.join(root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        img = rng.randint(0, 256, size=(rng.randint(20, 40), rng.randint(20, 40), 3)).astype(np.uint8)
        assert cv2.imwrite(p, img, [cv2.IMWRITE_JPEG_QUALITY, 95])
        written[rel] = cv2.imread(p, cv2.IMREAD_COLOR)

    for rel in ["n01440764/n01440764_10026.JPEG", "n01443537/n01443537_2.JPEG", "n01484850/n01484850_7.JPEG",
                "n01440764/n01440764_39.JPEG"]:
        put(os.path.join("train", rel))
    if val_structure == "original":
        put("val/ILSVRC2012_val_00000001.JPEG")
        put("val/ILSVRC2012_val_00000002.JPEG")
    else:
        put("val/n01484850/ILSVRC2012_val_00000001.JPEG")
        put("val/n01440764/ILSVRC2012_val_00000002.JPEG")
    return written


def test_meta_files(tmp_path):
    make_meta(str(tmp_path / "meta"))
    meta = ILSVRCMeta(str(tmp_path / "meta"))
    assert meta.get_synset_1000() == {0: "n01440764", 1: "n01443537", 2: "n01484850"}
    assert meta.get_synset_words_1000()[1] == "n01443537 goldfish, Carassius auratus"
    assert meta.get_image_list("val") == [("ILSVRC2012_val_00000001.JPEG", 2), ("ILSVRC2012_val_00000002.JPEG", 0)]
    assert meta.get_image_list("val", "train") == [(os.path.join("n01484850", "ILSVRC2012_val_00000001.JPEG"), 2),
                                                   (os.path.join("n01440764", "ILSVRC2012_val_00000002.JPEG"), 0)]
    assert meta.get_image_list("train", "train")[3] == ("n01440764/n01440764_39.JPEG", 0)
    with pytest.raises(ValueError, match="dir_structure='flat'"):
        meta.get_image_list("val", "flat")


@pytest.mark.parametrize("packed,with_shape", [(True, False), (False, False), (True, True)])
def test_per_pixel_mean_binaryproto(tmp_path, packed, with_shape):
    make_meta(str(tmp_path))
    mean = np.random.RandomState(1).rand(3, 8, 6).astype(np.float32) * 255
    (tmp_path / "imagenet_mean.binaryproto").write_bytes(blob_proto(mean, packed, with_shape))
    meta = ILSVRCMeta(str(tmp_path))
    got = meta.get_per_pixel_mean()
    assert got.shape == (8, 6, 3) and got.dtype == np.float32
    np.testing.assert_array_equal(got, mean.transpose(1, 2, 0))
    small = meta.get_per_pixel_mean((4, 3))
    assert small.shape == (4, 3, 3)
    np.testing.assert_allclose(small, cv2.resize(mean.transpose(1, 2, 0), (3, 4)))


def test_broken_binaryproto_and_missing_meta_file(tmp_path):
    make_meta(str(tmp_path))
    full = blob_proto(np.ones((3, 4, 4), np.float32))
    (tmp_path / "imagenet_mean.binaryproto").write_bytes(full[:-10])
    with pytest.raises(DatasetFileCorruptError, match=r"imagenet_mean\.binaryproto is truncated or corrupt"):
        ILSVRCMeta(str(tmp_path)).get_per_pixel_mean()
    os.unlink(tmp_path / "synset_words.txt")
    with pytest.raises(DatasetFileNotFoundError, match=r"synset_words\.txt is missing\. Extract .*caffe_ilsvrc12"):
        ILSVRCMeta(str(tmp_path)).get_synset_words_1000()


def test_meta_download_unreachable(tmp_path, monkeypatch):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    url = f"http://127.0.0.1:{port}/caffe_ilsvrc12.tar.gz"
    monkeypatch.setattr(ilsvrc_mod, "CAFFE_ILSVRC12_URL", (url, 17858008))
    with pytest.raises(DatasetFileNotFoundError) as ei:
        ILSVRCMeta(str(tmp_path / "m"))
    target = os.path.join(str(tmp_path / "m"), "caffe_ilsvrc12.tar.gz")
    assert f"the file {target} is missing" in str(ei.value) and url in str(ei.value)


def test_ilsvrc12_train_and_val_original(tmp_path):
    make_meta(str(tmp_path / "meta"))
    written = make_images(str(tmp_path / "imagenet"))
    files = ILSVRC12Files(str(tmp_path / "imagenet"), "train", meta_dir=str(tmp_path / "meta"), shuffle=False)
    files.reset_state()
    assert len(files) == 4
    got = list(files)
    root = str(tmp_path / "imagenet")
    assert got == [[os.path.join(root, "train", "n01440764/n01440764_10026.JPEG"), 0],
                   [os.path.join(root, "train", "n01443537/n01443537_2.JPEG"), 1],
                   [os.path.join(root, "train", "n01484850/n01484850_7.JPEG"), 2],
                   [os.path.join(root, "train", "n01440764/n01440764_39.JPEG"), 0]]
    val = ILSVRC12(root, "val", meta_dir=str(tmp_path / "meta"))
    assert val.shuffle is False and val.dir_structure == "original"
    val.reset_state()
    dps = list(val)
    assert [lab for _, lab in dps] == [2, 0]
    np.testing.assert_array_equal(dps[0][0], written["val/ILSVRC2012_val_00000001.JPEG"])
    assert dps[0][0].dtype == np.uint8 and dps[0][0].ndim == 3 and dps[0][0].shape[2] == 3
    train = ILSVRC12(root, "train", meta_dir=str(tmp_path / "meta"))
    assert train.shuffle is True
    train.reset_state()
    orders = [[lab for _, lab in train] for _ in range(4)]
    assert all(sorted(o) == [0, 0, 1, 2] for o in orders)


def test_ilsvrc12_val_train_structure_is_guessed(tmp_path):
    make_meta(str(tmp_path / "meta"))
    written = make_images(str(tmp_path / "imagenet"), val_structure="train")
    val = ILSVRC12(str(tmp_path / "imagenet"), "val", meta_dir=str(tmp_path / "meta"), shuffle=False)
    assert val.dir_structure == "train"
    val.reset_state()
    dps = list(val)
    np.testing.assert_array_equal(dps[1][0], written["val/n01440764/ILSVRC2012_val_00000002.JPEG"])
    assert [lab for _, lab in dps] == [2, 0]


def test_ilsvrc12_missing_dirs_and_images(tmp_path):
    make_meta(str(tmp_path / "meta"))
    with pytest.raises(DatasetFileNotFoundError, match=r"the directory .*imagenet/val is missing\. Extract "
                                                        r"ILSVRC2012_img_val\.tar"):
        ILSVRC12(str(tmp_path / "imagenet"), "val", meta_dir=str(tmp_path / "meta"))
    make_images(str(tmp_path / "imagenet"))
    os.unlink(tmp_path / "imagenet" / "val" / "ILSVRC2012_val_00000002.JPEG")
    with pytest.raises(DatasetFileNotFoundError, match=r"ILSVRC2012_val_00000002\.JPEG, listed in .*val\.txt"):
        ILSVRC12Files(str(tmp_path / "imagenet"), "val", meta_dir=str(tmp_path / "meta"))
    with pytest.raises(DatasetFileNotFoundError, match="meta_dir .*nowhere is not a directory"):
        ILSVRC12Files(str(tmp_path / "imagenet"), "train", meta_dir=str(tmp_path / "nowhere"))
    (tmp_path / "imagenet" / "train" / "n01443537" / "n01443537_2.JPEG").write_bytes(b"not a jpeg")
    ds = ILSVRC12(str(tmp_path / "imagenet"), "train", meta_dir=str(tmp_path / "meta"), shuffle=False)
    ds.reset_state()
    with pytest.raises(DatasetFileCorruptError, match=r"n01443537_2\.JPEG is truncated or corrupt \(OpenCV"):
        list(ds)


def test_training_bbox(tmp_path):
    xml = ("<annotation><size><width>50</width><height>40</height></size><object><name>n01440764</name>"
           "<bndbox><xmin>3</xmin><ymin>4</ymin><xmax>30</xmax><ymax>35</ymax></bndbox></object></annotation>")
    (tmp_path / "n01440764").mkdir()
    (tmp_path / "n01440764" / "n01440764_1.xml").write_text(xml)
    boxes = ILSVRC12.get_training_bbox(str(tmp_path), [("n01440764/n01440764_1.JPEG", 0),
                                                       ("n01440764/n01440764_2.JPEG", 0)])
    np.testing.assert_array_equal(boxes[0], np.array([3, 4, 30, 35], np.float32))
    assert boxes[1] is None
