"""CIFAR-10/100 readers on real python-pickle batches, through ``trainbus.dataflow.dataset``."""

from __future__ import annotations

import http.server
import io
import os
import pickle
import tarfile
import threading

import numpy as np
import pytest

from ports import free_ports
from trainbus.dataflow.dataset import Cifar10, Cifar100, DatasetFileCorruptError, DatasetFileNotFoundError
from trainbus_dataflow.dataset import cifar as cifar_mod


def _dump(path, obj):
    # protocol 2 pickles of byte-string keys, like the published (Python 2) files
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


def make_cifar10(root, n_per_batch=3, seed=0):
    """Write cifar-10-batches-py/ with 5 train batches and a test batch; return (train, test) arrays."""
    rng = np.random.RandomState(seed)
    d = os.path.join(root, "cifar-10-batches-py")
    os.makedirs(d)
    out = {}
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.randint(0, 256, size=(n_per_batch, 3072)).astype(np.uint8)
        labels = rng.randint(0, 10, size=n_per_batch).tolist()
        _dump(os.path.join(d, name), {b"batch_label": name.encode(), b"labels": labels, b"data": data,
                                      b"filenames": [b"x.png"] * n_per_batch})
        out[name] = (data, labels)
    _dump(os.path.join(d, "batches.meta"), {"label_names": ["airplane", "automobile", "bird", "cat", "deer", "dog",
                                                            "frog", "horse", "ship", "truck"],
                                            "num_cases_per_batch": n_per_batch, "num_vis": 3072})
    return out


def hwc(data):
    return data.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)


def test_cifar10_values_order_layout(tmp_path):
    batches = make_cifar10(str(tmp_path))
    ds = Cifar10("train", shuffle=False, dir=str(tmp_path))
    ds.reset_state()
    assert len(ds) == 15
    dps = list(ds)
    exp_imgs = np.concatenate([hwc(batches[f"data_batch_{i}"][0]) for i in range(1, 6)])
    exp_labels = sum((batches[f"data_batch_{i}"][1] for i in range(1, 6)), [])
    for k, (img, lab) in enumerate(dps):
        assert img.shape == (32, 32, 3) and img.dtype == np.uint8
        np.testing.assert_array_equal(img, exp_imgs[k])
        assert type(lab) is int and lab == exp_labels[k]
    # pixel (row 0, col 1) of channel 2 (blue) is byte 2*1024 + 1 of the row-major CHW record
    assert dps[0][0][0, 1, 2] == batches["data_batch_1"][0][0, 2048 + 1]
    assert ds.get_label_names()[:3] == ["airplane", "automobile", "bird"]
    test = Cifar10("test", dir=str(tmp_path))
    assert test.shuffle is False and ds.shuffle is False
    assert Cifar10("train", dir=str(tmp_path)).shuffle is True
    test.reset_state()
    assert [lab for _, lab in test] == batches["test_batch"][1]


def test_cifar10_means(tmp_path):
    batches = make_cifar10(str(tmp_path), seed=1)
    ds = Cifar10("test", dir=str(tmp_path))
    everything = np.concatenate([hwc(d) for d, _ in batches.values()]).astype(np.float32)
    mean = ds.get_per_pixel_mean()
    assert mean.shape == (32, 32, 3) and mean.dtype == np.float32
    np.testing.assert_allclose(mean, everything.mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(ds.get_per_pixel_mean(("test",)), hwc(batches["test_batch"][0]).mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(ds.get_per_channel_mean(), everything.mean(axis=(0, 1, 2)), rtol=1e-5)
    with pytest.raises(ValueError, match="'val' is not 'train' or 'test'"):
        ds.get_per_pixel_mean(("val",))


def test_cifar10_shuffle(tmp_path):
    make_cifar10(str(tmp_path), n_per_batch=6)
    ds = Cifar10("train", dir=str(tmp_path))
    ds.reset_state()
    ref = {img.tobytes(): k for k, img in enumerate(ds.images)}
    orders = [[ref[img.tobytes()] for img, _ in ds] for _ in range(3)]
    assert all(sorted(o) == list(range(30)) for o in orders)
    assert len({tuple(o) for o in orders}) > 1


def test_cifar100_fine_labels(tmp_path):
    d = tmp_path / "cifar-100-python"
    d.mkdir()
    rng = np.random.RandomState(3)
    data = {s: rng.randint(0, 256, size=(n, 3072)).astype(np.uint8) for s, n in [("train", 5), ("test", 2)]}
    fine = {"train": [99, 0, 42, 7, 3], "test": [5, 64]}
    for s in ("train", "test"):
        _dump(str(d / s), {b"data": data[s], b"fine_labels": fine[s], b"coarse_labels": [1] * len(fine[s])})
    _dump(str(d / "meta"), {"fine_label_names": [f"c{i}" for i in range(100)], "coarse_label_names": ["x"] * 20})
    ds = Cifar100("train", shuffle=False, dir=str(tmp_path))
    ds.reset_state()
    got = list(ds)
    assert [lab for _, lab in got] == fine["train"]
    np.testing.assert_array_equal(np.stack([img for img, _ in got]), hwc(data["train"]))
    assert ds.get_label_names()[99] == "c99"
    assert len(Cifar100("test", dir=str(tmp_path))) == 2


def test_download_and_extract_tarball(tmp_path, monkeypatch):
    src = tmp_path / "src"
    batches = make_cifar10(str(src), n_per_batch=2, seed=4)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        tf.add(str(src / "cifar-10-batches-py"), arcname="cifar-10-batches-py")
    (tmp_path / "srv").mkdir()
    (tmp_path / "srv" / "cifar-10-python.tar.gz").write_bytes(buf.getvalue())

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(tmp_path / "srv"), **kw)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/cifar-10-python.tar.gz"
        monkeypatch.setitem(cifar_mod._URLS, 10, (url, len(buf.getvalue())))
        monkeypatch.setenv("TENSORPACK_DATASET", str(tmp_path))
        monkeypatch.delenv("TRAINBUS_DATASET", raising=False)
        ds = Cifar10("test", shuffle=False)
    finally:
        httpd.shutdown()
        httpd.server_close()
        t.join()
    assert sorted(os.listdir(tmp_path / "cifar10_data")) == ["cifar-10-batches-py", "cifar-10-python.tar.gz"]
    ds.reset_state()
    assert [lab for _, lab in ds] == batches["test_batch"][1]


def test_missing_folder_unreachable(tmp_path, monkeypatch):
    url = f"http://127.0.0.1:{free_ports(1)[0]}/~kriz/cifar-10-python.tar.gz"
    monkeypatch.setitem(cifar_mod._URLS, 10, (url, 170498071))
    with pytest.raises(DatasetFileNotFoundError) as ei:
        Cifar10("train", dir=str(tmp_path))
    msg = str(ei.value)
    tarball = os.path.join(str(tmp_path), "cifar-10-python.tar.gz")
    assert f"CIFAR-10: the file {tarball} is missing" in msg and url in msg and f"put it at {tarball}" in msg


def test_missing_batch_and_truncated_batch(tmp_path):
    make_cifar10(str(tmp_path))
    d = os.path.join(str(tmp_path), "cifar-10-batches-py")
    os.unlink(os.path.join(d, "data_batch_3"))
    with pytest.raises(DatasetFileNotFoundError, match=r"data_batch_3 is missing from .*Delete the folder"):
        Cifar10("train", dir=str(tmp_path))
    raw = open(os.path.join(d, "test_batch"), "rb").read()
    open(os.path.join(d, "test_batch"), "wb").write(raw[: len(raw) - 100])
    with pytest.raises(DatasetFileCorruptError) as ei:
        Cifar10("test", dir=str(tmp_path))
    assert "test_batch is truncated or corrupt (cannot unpickle it" in str(ei.value)
    assert "cifar-10-python.tar.gz" in str(ei.value)
