"""Places365Standard and TinyImageNet on real image files in their published directory layouts,
through ``trainbus.dataflow.dataset``."""

from __future__ import annotations

import importlib
import os

import numpy as np
import pytest

from trainbus.dataflow.dataset import (DatasetFileCorruptError, DatasetFileNotFoundError, Places365Standard,
                                       TinyImageNet)
from optdeps import import_opt  # tests/_support

cv2 = import_opt("image", "cv2")  # trainbus-dataflow[image], kept outside site-packages
pytestmark = pytest.mark.usefixtures("opencv_importable")

# ---------------------------------------------------------------- Places365-Standard ("easy" layout)

PLACES_TRAIN = ["train/canyon/00000001.jpg", "train/airfield/00000001.png", "train/beach/00000001.png",
                "train/airfield/00000002.png", "train/canyon/00000002.png"]
PLACES_VAL = ["val/beach/Places365_val_00000001.png", "val/airfield/Places365_val_00000002.png"]


def _write(path, img, params=()):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    assert cv2.imwrite(path, img, list(params))
    return cv2.imread(path, cv2.IMREAD_COLOR)


def make_places(root, seed=0):
    """The easy directory structure with small images; returns {relative path: the decoded BGR image}."""
    rng = np.random.RandomState(seed)
    written = {}
    for rel in PLACES_TRAIN + PLACES_VAL:
        img = rng.randint(0, 256, size=(rng.randint(8, 20), rng.randint(8, 20), 3)).astype(np.uint8)
        written[rel] = _write(os.path.join(root, rel), img, [cv2.IMWRITE_JPEG_QUALITY, 95])
        if rel.endswith(".png"):  # lossless: what was written is what is read
            np.testing.assert_array_equal(written[rel], img)
    with open(os.path.join(root, "train.txt"), "w") as f:
        f.write("\n".join(PLACES_TRAIN) + "\n")
    with open(os.path.join(root, "val.txt"), "w") as f:
        f.write("\n".join(PLACES_VAL) + "\n\n")
    return written


def test_places_module_paths():
    mod = importlib.import_module("trainbus.dataflow.dataset.places")
    assert mod.Places365Standard is Places365Standard
    import trainbus.dataflow.dataset as dataset
    assert "Places365Standard" in dataset.__all__ and "TinyImageNet" in dataset.__all__
    assert importlib.import_module("trainbus.dataflow.dataset.ilsvrc").TinyImageNet is TinyImageNet


def test_places_train_order_labels_and_names(tmp_path):
    root = str(tmp_path / "places365_standard")
    written = make_places(root)
    ds = Places365Standard(root, "train", shuffle=False)
    assert ds.shuffle is False and len(ds) == 5
    assert ds.get_label_names() == ["airfield", "beach", "canyon"]
    ds.reset_state()
    dps = list(ds)
    assert [label for _, label in dps] == [2, 0, 1, 0, 2]
    assert all(type(label) is int for _, label in dps)
    for (img, _), rel in zip(dps, PLACES_TRAIN):
        assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
        np.testing.assert_array_equal(img, written[rel])
    assert [label for _, label in ds] == [2, 0, 1, 0, 2]  # a second pass, same order


def test_places_val_and_default_shuffle(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    root = str(tmp_path / "p")
    written = make_places(root)
    val = Places365Standard(root, "val")
    assert val.shuffle is False and len(val) == 2
    assert val.get_label_names() == ["airfield", "beach"]  # the classes val.txt lists
    val.reset_state()
    dps = list(val)
    assert [label for _, label in dps] == [1, 0]
    np.testing.assert_array_equal(dps[0][0], written[PLACES_VAL[0]])

    train = Places365Standard("~/p", "train")  # "~" is expanded
    assert train.shuffle is True
    train.reset_state()
    train.rng = np.random.RandomState(3)
    expected_order = np.random.RandomState(3).permutation(5)
    assert list(expected_order) != list(range(5))
    labels = [2, 0, 1, 0, 2]
    got = list(train)
    assert [label for _, label in got] == [labels[k] for k in expected_order]
    for (img, _), k in zip(got, expected_order):
        np.testing.assert_array_equal(img, written[PLACES_TRAIN[k]])


def test_places_grayscale_file_becomes_bgr(tmp_path):
    root = str(tmp_path)
    gray = np.arange(12 * 10, dtype=np.uint8).reshape(12, 10)
    assert cv2.imwrite(os.path.join(root, "g.png"), gray)
    os.makedirs(os.path.join(root, "val", "bog"))
    os.replace(os.path.join(root, "g.png"), os.path.join(root, "val", "bog", "1.png"))
    (tmp_path / "val.txt").write_text("val/bog/1.png\n")
    ds = Places365Standard(root, "val")
    ds.reset_state()
    [[img, label]] = list(ds)
    assert label == 0 and img.shape == (12, 10, 3)
    for c in range(3):
        np.testing.assert_array_equal(img[:, :, c], gray)


def test_places_errors(tmp_path):
    with pytest.raises(ValueError, match=r"name='test'\): must be 'train' or 'val'"):
        Places365Standard(str(tmp_path), "test")
    with pytest.raises(DatasetFileNotFoundError, match=r"the directory .*nowhere does not exist\. Download "
                                                        r"http://data\.csail\.mit\.edu/.*easyformat\.tar"):
        Places365Standard(str(tmp_path / "nowhere"), "train")
    with pytest.raises(DatasetFileNotFoundError, match=r"the file .*train\.txt is missing\. .* 'easy directory "
                                                        r"structure'"):
        Places365Standard(str(tmp_path), "train")
    root = str(tmp_path / "p")
    make_places(root)
    os.unlink(os.path.join(root, "train", "beach", "00000001.png"))
    with pytest.raises(DatasetFileNotFoundError, match=r"the image .*train/beach/00000001\.png, listed in "
                                                        r".*train\.txt, is missing"):
        Places365Standard(root, "train")
    (tmp_path / "p" / "val" / "airfield" / "Places365_val_00000002.png").write_bytes(b"\x89PNG but cut")
    ds = Places365Standard(root, "val", shuffle=False)
    ds.reset_state()
    it = iter(ds)
    assert next(it)[1] == 1
    with pytest.raises(DatasetFileCorruptError, match=r"Places365_val_00000002\.png is truncated or corrupt "
                                                       r"\(OpenCV cannot decode it\)"):
        next(it)
    (tmp_path / "p" / "val.txt").write_text("val/beach/Places365_val_00000001.png\nairfield.png\n")
    with pytest.raises(DatasetFileCorruptError, match=r"val\.txt is truncated or corrupt \(line 2 is "
                                                       r"'airfield\.png', expected '<split>/<class name>/"):
        Places365Standard(root, "val")
    (tmp_path / "p" / "val.txt").write_text("\n")
    with pytest.raises(DatasetFileCorruptError, match=r"val\.txt is truncated or corrupt \(it lists no image\)"):
        Places365Standard(root, "val")


# ---------------------------------------------------------------- Tiny ImageNet (tiny-imagenet-200 layout)

WNIDS = ["n02124075", "n01443537", "n04067472"]  # not sorted: the label is the line in wnids.txt
TRAIN_COUNTS = {"n02124075": 3, "n01443537": 2, "n04067472": 11}
VAL = [("val_0.JPEG", "n04067472"), ("val_1.JPEG", "n02124075"), ("val_2.JPEG", "n04067472"),
       ("val_3.JPEG", "n01443537")]


def make_tiny(root, seed=0, gray=("n01443537_1.JPEG",)):
    """The tiny-imagenet-200 layout with 64x64 JPEGs (some grayscale, as in the real set); returns
    {file name: the decoded BGR image}."""
    rng = np.random.RandomState(seed)
    written = {}

    def put(path):
        name = os.path.basename(path)
        shape = (64, 64) if name in gray else (64, 64, 3)
        img = rng.randint(0, 256, size=shape).astype(np.uint8)
        written[name] = _write(path, img, [cv2.IMWRITE_JPEG_QUALITY, 90])

    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "wnids.txt"), "w") as f:
        f.write("\n".join(WNIDS) + "\n")
    for wnid, n in TRAIN_COUNTS.items():
        for i in range(n):
            put(os.path.join(root, "train", wnid, "images", f"{wnid}_{i}.JPEG"))
        with open(os.path.join(root, "train", wnid, f"{wnid}_boxes.txt"), "w") as f:
            f.write("".join(f"{wnid}_{i}.JPEG\t0\t1\t60\t62\n" for i in range(n)))
    for name, _ in VAL:
        put(os.path.join(root, "val", "images", name))
    with open(os.path.join(root, "val", "val_annotations.txt"), "w") as f:
        f.write("".join(f"{name}\t{wnid}\t3\t4\t50\t60\n" for name, wnid in VAL))
    return written


def test_tiny_imagenet_train_order_and_values(tmp_path):
    root = str(tmp_path / "tiny-imagenet-200")
    written = make_tiny(root)
    ds = TinyImageNet(root, "train", shuffle=False)
    assert len(ds) == 16 and ds.wnids == WNIDS
    ds.reset_state()
    dps = list(ds)
    expected_names = ([f"n02124075_{i}.JPEG" for i in range(3)] + [f"n01443537_{i}.JPEG" for i in range(2)]
                      + [f"n04067472_{i}.JPEG" for i in (0, 1, 10, 2, 3, 4, 5, 6, 7, 8, 9)])  # sorted file names
    assert [label for _, label in dps] == [0] * 3 + [1] * 2 + [2] * 11
    assert all(type(label) is int and 0 <= label < len(WNIDS) for _, label in dps)
    for (img, _), name in zip(dps, expected_names):
        assert img.shape == (64, 64, 3) and img.dtype == np.uint8
        np.testing.assert_array_equal(img, written[name])
    gray = dps[4][0]  # n01443537_1.JPEG was written with one channel
    np.testing.assert_array_equal(gray[:, :, 0], gray[:, :, 2])


def test_tiny_imagenet_val_and_default_shuffle(tmp_path):
    root = str(tmp_path / "tiny-imagenet-200")
    written = make_tiny(root)
    val = TinyImageNet(root, "val")
    assert val.shuffle is False and len(val) == 4
    val.reset_state()
    dps = list(val)
    assert [label for _, label in dps] == [2, 0, 2, 1]
    for (img, _), (name, _) in zip(dps, VAL):
        np.testing.assert_array_equal(img, written[name])

    train = TinyImageNet(root, "train")
    assert train.shuffle is True
    train.reset_state()
    train.rng = np.random.RandomState(7)
    order = np.random.RandomState(7).permutation(16)
    plain = TinyImageNet(root, "train", shuffle=False)
    plain.reset_state()
    in_order = list(plain)
    got = list(train)
    assert [label for _, label in got] == [in_order[k][1] for k in order]
    for (img, _), k in zip(got, order):
        np.testing.assert_array_equal(img, in_order[k][0])


def test_tiny_imagenet_errors(tmp_path):
    with pytest.raises(ValueError, match=r"TinyImageNet\(name='test'\): must be 'train' or 'val'"):
        TinyImageNet(str(tmp_path), "test")
    with pytest.raises(DatasetFileNotFoundError, match=r"the directory .*absent does not exist\. Download "
                                                        r"http://cs231n\.stanford\.edu/tiny-imagenet-200\.zip"):
        TinyImageNet(str(tmp_path / "absent"), "val")
    with pytest.raises(DatasetFileNotFoundError, match=r"the file .*wnids\.txt is missing"):
        TinyImageNet(str(tmp_path), "train")
    root = str(tmp_path / "tiny")
    make_tiny(root)

    os.rename(os.path.join(root, "train", "n01443537"), os.path.join(root, "moved"))
    with pytest.raises(DatasetFileNotFoundError, match=r"the directory .*train/n01443537/images of class "
                                                        r"n01443537 \(line 2 of .*wnids\.txt\) is missing"):
        TinyImageNet(root, "train")
    os.rename(os.path.join(root, "moved"), os.path.join(root, "train", "n01443537"))

    os.unlink(os.path.join(root, "val", "images", "val_2.JPEG"))
    with pytest.raises(DatasetFileNotFoundError, match=r"the image .*val/images/val_2\.JPEG, listed in "
                                                        r".*val_annotations\.txt, is missing"):
        TinyImageNet(root, "val")
    (tmp_path / "tiny" / "val" / "images" / "val_2.JPEG").write_bytes(b"\xff\xd8 not really a jpeg")
    ds = TinyImageNet(root, "val")
    ds.reset_state()
    with pytest.raises(DatasetFileCorruptError, match=r"val_2\.JPEG is truncated or corrupt \(OpenCV cannot "
                                                       r"decode it\)"):
        list(ds)

    ann = tmp_path / "tiny" / "val" / "val_annotations.txt"
    ann.write_text("val_0.JPEG\tn04067472\t3\t4\t50\t60\nval_1.JPEG\tn09999999\t1\t1\t2\t2\n")
    with pytest.raises(DatasetFileCorruptError, match=r"line 2 names the class 'n09999999', which is not in "
                                                       r".*wnids\.txt"):
        TinyImageNet(root, "val")
    ann.unlink()
    with pytest.raises(DatasetFileNotFoundError, match=r"the file .*val/val_annotations\.txt is missing"):
        TinyImageNet(root, "val")

    (tmp_path / "tiny" / "wnids.txt").write_text("n02124075\nn01443537\nn02124075\n")
    with pytest.raises(DatasetFileCorruptError, match=r"wnids\.txt is truncated or corrupt \(it lists "
                                                       r"\['n02124075'\] more than once\)"):
        TinyImageNet(root, "train")
