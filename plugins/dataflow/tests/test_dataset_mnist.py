"""MNIST / Fashion-MNIST readers on real IDX files (gzip-compressed, as published), through
``trainbus.dataflow.dataset``; downloads only from a local HTTP server or an unreachable port."""

from __future__ import annotations

import gzip
import http.server
import os
import struct
import threading

import numpy as np
import pytest

from ports import free_ports
from trainbus.dataflow import dataset
from trainbus.dataflow.dataset import DatasetFileCorruptError, DatasetFileNotFoundError, FashionMnist, Mnist


def write_idx(path: str, arr: np.ndarray, compress: bool = True) -> bytes:
    """An IDX file of unsigned bytes exactly as the MNIST site ships it."""
    magic = 0x0800 | arr.ndim
    body = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in arr.shape) + arr.astype(np.uint8).tobytes()
    data = gzip.compress(body) if compress else body
    with open(path, "wb") as f:
        f.write(data)
    return data


def make_split(d, prefix: str, n: int, seed: int, compress: bool = True):
    rng = np.random.RandomState(seed)
    images = rng.randint(0, 256, size=(n, 28, 28)).astype(np.uint8)
    labels = rng.randint(0, 10, size=(n,)).astype(np.uint8)
    suffix = ".gz" if compress else ""
    write_idx(os.path.join(d, f"{prefix}-images-idx3-ubyte{suffix}"), images, compress)
    write_idx(os.path.join(d, f"{prefix}-labels-idx1-ubyte{suffix}"), labels, compress)
    return images, labels


def test_mnist_values_order_and_dtypes(tmp_path):
    images, labels = make_split(str(tmp_path), "train", 7, 0)
    timg, tlab = make_split(str(tmp_path), "t10k", 3, 1)
    ds = dataset.Mnist("train", shuffle=False, dir=str(tmp_path))
    ds.reset_state()
    assert len(ds) == 7
    dps = list(ds)
    assert len(dps) == 7
    for k, (img, lab) in enumerate(dps):
        assert img.shape == (28, 28) and img.dtype == np.float32
        np.testing.assert_allclose(img, images[k].astype(np.float32) / 255.0, rtol=0, atol=1e-7)
        assert 0.0 <= img.min() and img.max() <= 1.0
        assert int(lab) == int(labels[k])
    test = Mnist("test", shuffle=False, dir=str(tmp_path))
    test.reset_state()
    assert [int(lab) for _, lab in test] == tlab.tolist()


def test_mnist_shuffle_is_a_permutation_and_changes(tmp_path):
    images, labels = make_split(str(tmp_path), "train", 30, 2)
    ds = Mnist("train", dir=str(tmp_path))  # shuffle=True is the default
    ds.reset_state()
    orders = []
    for _ in range(3):
        firsts = [img[0, :4].tobytes() for img, _ in ds]
        orders.append([next(k for k in range(30) if (images[k, 0, :4] / np.float32(255)).astype(np.float32).tobytes()
                            == f) for f in firsts])
    for o in orders:
        assert sorted(o) == list(range(30))
    assert any(o != list(range(30)) for o in orders)
    assert len({tuple(o) for o in orders}) > 1


def test_fashion_mnist_dir_and_label_names(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINBUS_DATASET", str(tmp_path))
    d = tmp_path / "fashion_mnist_data"
    d.mkdir()
    _, labels = make_split(str(d), "t10k", 4, 3)
    ds = FashionMnist("test", shuffle=False)
    ds.reset_state()
    assert [int(lab) for _, lab in ds] == labels.tolist()
    names = ds.get_label_names()
    assert len(names) == 10 and names[0] == "T-shirt/top" and names[9] == "Ankle boot"


def test_uncompressed_idx_files_are_read(tmp_path):
    images, labels = make_split(str(tmp_path), "t10k", 5, 4, compress=False)
    ds = Mnist("test", shuffle=False, dir=str(tmp_path))
    ds.reset_state()
    got = list(ds)
    np.testing.assert_array_equal(np.stack([g[0] for g in got]) * 255.0, images.astype(np.float32))


def test_missing_file_unreachable_says_which_file_and_url(tmp_path, monkeypatch):
    base = f"http://127.0.0.1:{free_ports(1)[0]}/exdb/mnist/"
    monkeypatch.setattr(Mnist, "_SOURCE_URLS", (base,))
    with pytest.raises(DatasetFileNotFoundError) as ei:
        Mnist("train", dir=str(tmp_path))
    msg = str(ei.value)
    path = os.path.join(str(tmp_path), "train-images-idx3-ubyte.gz")
    assert f"the file {path} is missing" in msg
    assert base + "train-images-idx3-ubyte.gz" in msg and f"put it at {path}" in msg
    assert "$TRAINBUS_DATASET" in msg and "$TENSORPACK_DATASET" in msg
    assert isinstance(ei.value, FileNotFoundError)
    assert os.listdir(tmp_path) == []  # nothing half-written


def test_missing_files_are_downloaded_from_the_first_working_mirror(tmp_path, monkeypatch):
    served = tmp_path / "srv"
    served.mkdir()
    images, labels = make_split(str(served), "t10k", 6, 5)
    requests = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(served), **kw)

        def log_message(self, *args):
            requests.append(self.path)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        dead = f"http://127.0.0.1:{free_ports(1)[0]}/"
        monkeypatch.setattr(Mnist, "_SOURCE_URLS", (dead, f"http://127.0.0.1:{httpd.server_address[1]}/"))
        out = tmp_path / "data"
        ds = Mnist("test", shuffle=False, dir=str(out))
    finally:
        httpd.shutdown()
        httpd.server_close()
        t.join()
    assert sorted(os.listdir(out)) == ["t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
    assert sorted(requests) == ["/t10k-images-idx3-ubyte.gz", "/t10k-labels-idx1-ubyte.gz"]
    ds.reset_state()
    assert [int(lab) for _, lab in ds] == labels.tolist()


def test_truncated_and_wrong_files(tmp_path, monkeypatch):
    monkeypatch.setattr(Mnist, "_SOURCE_URLS", ("http://mirror.invalid/mnist/",))
    make_split(str(tmp_path), "train", 5, 6)
    img = os.path.join(str(tmp_path), "train-images-idx3-ubyte.gz")
    data = open(img, "rb").read()
    open(img, "wb").write(data[: len(data) // 2])  # a download cut in the middle
    with pytest.raises(DatasetFileCorruptError) as ei:
        Mnist("train", dir=str(tmp_path))
    msg = str(ei.value)
    assert f"the file {img} is truncated or corrupt" in msg
    assert "Delete it and run again" in msg and "http://mirror.invalid/mnist/train-images-idx3-ubyte.gz" in msg

    # complete gzip stream, but the IDX body is shorter than its header says
    body = struct.pack(">IIII", 2051, 5, 28, 28) + bytes(28 * 28 * 2)
    open(img, "wb").write(gzip.compress(body))
    with pytest.raises(DatasetFileCorruptError, match=r"\(5, 28, 28\) bytes of data \(3920\) but only 1568 follow"):
        Mnist("train", dir=str(tmp_path))

    # labels file where the images file should be
    write_idx(img, np.zeros(5, np.uint8))
    with pytest.raises(DatasetFileCorruptError, match="IDX magic number 2049, expected 2051"):
        Mnist("train", dir=str(tmp_path))


def test_bad_split_name(tmp_path):
    with pytest.raises(ValueError, match="train_or_test='val'.*'train' or 'test'"):
        Mnist("val", dir=str(tmp_path))
