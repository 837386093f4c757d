"""SVHN, Caltech101 Silhouettes and BSDS500 readers on real MATLAB .mat files (and JPEG images for
BSDS500), through ``trainbus.dataflow.dataset``."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ports import free_ports
from trainbus.dataflow.dataset import (BSDS500, Caltech101Silhouettes, DatasetFileCorruptError,
                                       DatasetFileNotFoundError, SVHNDigit)
from optdeps import import_opt  # tests/_support

cv2 = import_opt("image", "cv2")  # trainbus-dataflow[image], kept outside site-packages
scipy = import_opt("mat", "scipy.io")  # trainbus-dataflow[mat]
pytestmark = pytest.mark.usefixtures("opencv_importable", "scipy_importable")


def write_svhn(path, n, seed):
    rng = np.random.RandomState(seed)
    X = rng.randint(0, 256, size=(32, 32, 3, n)).astype(np.uint8)
    y = rng.randint(1, 11, size=(n, 1)).astype(np.uint8)  # the files use 10 for digit 0
    scipy.io.savemat(path, {"X": X, "y": y})
    return X, y


def test_svhn_values_order_and_label_10(tmp_path):
    X, y = write_svhn(str(tmp_path / "train_32x32.mat"), 9, 0)
    y[0, 0], y[1, 0] = 10, 3
    scipy.io.savemat(str(tmp_path / "train_32x32.mat"), {"X": X, "y": y})
    ds = SVHNDigit("train", data_dir=str(tmp_path), shuffle=False)
    ds.reset_state()
    assert len(ds) == 9
    dps = list(ds)
    for k, (img, lab) in enumerate(dps):
        assert img.shape == (32, 32, 3) and img.dtype == np.uint8
        np.testing.assert_array_equal(img, X[:, :, :, k])
        assert int(lab) == int(y[k, 0]) % 10
    assert int(dps[0][1]) == 0 and int(dps[1][1]) == 3


def test_svhn_shuffle_cache_and_mean(tmp_path):
    X1, _ = write_svhn(str(tmp_path / "train_32x32.mat"), 12, 1)
    X2, _ = write_svhn(str(tmp_path / "test_32x32.mat"), 4, 2)
    a = SVHNDigit("train", data_dir=str(tmp_path))
    b = SVHNDigit("train", data_dir=str(tmp_path))
    assert a.X is b.X  # one copy per file
    a.reset_state()
    ref = {X1[:, :, :, k].tobytes(): k for k in range(12)}
    orders = [[ref[img.tobytes()] for img, _ in a] for _ in range(3)]
    assert all(sorted(o) == list(range(12)) for o in orders) and len({tuple(o) for o in orders}) > 1
    mean = SVHNDigit.get_per_pixel_mean(("train", "test"), data_dir=str(tmp_path))
    allx = np.concatenate([X1, X2], axis=3).transpose(3, 0, 1, 2)
    np.testing.assert_allclose(mean, allx.mean(axis=0))
    # a rewritten file is read again, not served from the cache
    X3, _ = write_svhn(str(tmp_path / "train_32x32.mat"), 2, 3)
    os.utime(tmp_path / "train_32x32.mat", ns=(1, 1))
    assert len(SVHNDigit("train", data_dir=str(tmp_path))) == 2


def test_svhn_missing_and_truncated(tmp_path, monkeypatch):
    base = f"http://127.0.0.1:{free_ports(1)[0]}/housenumbers/"
    monkeypatch.setattr(SVHNDigit, "_SOURCE_URL", base)
    with pytest.raises(DatasetFileNotFoundError) as ei:
        SVHNDigit("extra", data_dir=str(tmp_path))
    path = os.path.join(str(tmp_path), "extra_32x32.mat")
    assert f"SVHN: the file {path} is missing" in str(ei.value) and base + "extra_32x32.mat" in str(ei.value)
    write_svhn(path, 50, 4)
    raw = open(path, "rb").read()
    open(path, "wb").write(raw[: len(raw) // 3])
    with pytest.raises(DatasetFileCorruptError, match=r"extra_32x32\.mat is truncated or corrupt \(scipy"):
        SVHNDigit("extra", data_dir=str(tmp_path))
    with pytest.raises(ValueError, match="name='val'"):
        SVHNDigit("val", data_dir=str(tmp_path))


def write_caltech(path, seed):
    rng = np.random.RandomState(seed)
    out = {}
    for split, n in [("train", 6), ("val", 3), ("test", 4)]:
        out[f"{split}_data"] = (rng.rand(n, 784) > 0.5).astype(np.float64)
        out[f"{split}_labels"] = rng.randint(1, 102, size=(n, 1)).astype(np.float64)  # 1-based, as published
    out["classnames"] = np.array(["c%d" % i for i in range(101)], dtype=object)
    scipy.io.savemat(path, out)
    return out


def test_caltech101_silhouettes(tmp_path, monkeypatch):
    out = write_caltech(str(tmp_path / "caltech101_silhouettes_28_split1.mat"), 5)
    for split in ("train", "val", "test"):
        ds = Caltech101Silhouettes(split, shuffle=False, dir=str(tmp_path))
        ds.reset_state()
        dps = list(ds)
        assert len(ds) == len(dps) == out[f"{split}_data"].shape[0]
        for k, (img, lab) in enumerate(dps):
            assert img.shape == (28, 28)
            np.testing.assert_array_equal(img, out[f"{split}_data"][k].reshape(28, 28))
            assert int(lab) == int(out[f"{split}_labels"][k, 0]) - 1
    monkeypatch.setattr(Caltech101Silhouettes, "_SOURCE_URL", f"http://127.0.0.1:{free_ports(1)[0]}/data/")
    with pytest.raises(DatasetFileNotFoundError, match=r"caltech101_silhouettes_28_split1\.mat is missing"):
        Caltech101Silhouettes("train", dir=str(tmp_path / "empty"))
    scipy.io.savemat(str(tmp_path / "caltech101_silhouettes_28_split1.mat"), {"train_data": np.zeros((2, 10))})
    with pytest.raises(DatasetFileCorruptError, match="no 'train_data' or 'train_labels'|no 'val_data'"):
        Caltech101Silhouettes("val", dir=str(tmp_path))


def _ground_truth(h, w, boundaries):
    cell = np.empty((1, len(boundaries)), dtype=object)
    for k, b in enumerate(boundaries):
        cell[0, k] = {"Segmentation": np.ones((h, w), np.uint16), "Boundaries": b.astype(np.uint8)}
    return {"groundTruth": cell}


def make_bsds(root, seed=0):
    """BSR/BSDS500/data/{images,groundTruth}/train with one landscape and one portrait image."""
    rng = np.random.RandomState(seed)
    data = os.path.join(root, "BSR", "BSDS500", "data")
    expected = []
    for imgid, (h, w) in [("100075", (321, 481)), ("2092", (481, 321))]:
        os.makedirs(os.path.join(data, "images", "train"), exist_ok=True)
        os.makedirs(os.path.join(data, "groundTruth", "train"), exist_ok=True)
        img = rng.randint(0, 256, size=(h, w, 3)).astype(np.uint8)
        jpg = os.path.join(data, "images", "train", imgid + ".jpg")
        assert cv2.imwrite(jpg, img)
        annots = [rng.rand(h, w) > 0.7 for _ in range(3)]
        scipy.io.savemat(os.path.join(data, "groundTruth", "train", imgid + ".mat"), _ground_truth(h, w, annots))
        decoded = cv2.imread(jpg, cv2.IMREAD_COLOR)
        label = sum(a.astype(np.float32) for a in annots) / 3
        if h > w:
            decoded, label = decoded.transpose(1, 0, 2), label.T
        expected.append((decoded, label))
    return expected


def test_bsds500_images_and_edge_fractions(tmp_path):
    expected = make_bsds(str(tmp_path))
    ds = BSDS500("train", data_dir=str(tmp_path), shuffle=False)
    ds.reset_state()
    got = list(ds)
    assert len(ds) == len(got) == 2
    for (img, lab), (eimg, elab) in zip(got, expected):  # sorted names: 100075 before 2092
        assert img.shape == (321, 481, 3) and img.dtype == np.uint8
        assert lab.shape == (321, 481) and lab.dtype == np.float32
        np.testing.assert_array_equal(img, eimg)
        np.testing.assert_allclose(lab, elab, atol=1e-6)
        assert set(np.unique(np.round(lab * 3)).tolist()) <= {0.0, 1.0, 2.0, 3.0}


def test_bsds500_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(BSDS500, "_URL", f"http://127.0.0.1:{free_ports(1)[0]}/BSR/BSR_bsds500.tgz")
    with pytest.raises(DatasetFileNotFoundError, match=r"BSR_bsds500\.tgz is missing and could not be downloaded"):
        BSDS500("train", data_dir=str(tmp_path))
    make_bsds(str(tmp_path))
    os.unlink(os.path.join(str(tmp_path), "BSR", "BSDS500", "data", "groundTruth", "train", "2092.mat"))
    with pytest.raises(DatasetFileNotFoundError, match=r"the annotation .*2092\.mat of the image .*2092\.jpg"):
        BSDS500("train", data_dir=str(tmp_path))
    with pytest.raises(DatasetFileNotFoundError, match=r"no \.jpg image in .*images/val"):
        BSDS500("val", data_dir=str(tmp_path))
