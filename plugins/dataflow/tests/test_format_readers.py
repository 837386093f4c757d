"""LMDBData (keys, shuffling), LMDBDataDecoder, CaffeLMDB on hand-encoded Caffe datums, HDF5Data
and SVMLightData, through ``trainbus.dataflow``."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dataflow_fixtures import encode_varint as _varint
from trainbus.dataflow import CaffeLMDB, HDF5Data, LMDBData, LMDBDataDecoder, SVMLightData


def datum(img_chw: np.ndarray, label: int) -> bytes:
    """A caffe.Datum: channels=1, height=2, width=3, data=4 (bytes), label=5."""
    c, h, w = img_chw.shape
    raw = img_chw.astype(np.uint8).tobytes()
    return (_varint(1 << 3) + _varint(c) + _varint(2 << 3) + _varint(h) + _varint(3 << 3) + _varint(w)
            + _varint((4 << 3) | 2) + _varint(len(raw)) + raw + _varint(5 << 3) + _varint(label))


def write_raw_lmdb(path: str, items: dict[bytes, bytes]) -> None:
    import lmdb

    env = lmdb.open(path, subdir=True, map_size=1 << 26)
    with env.begin(write=True) as txn:
        for k, v in items.items():
            txn.put(k, v)
    env.close()


def test_lmdbdata_without_keys_record(tmp_path):
    items = {f"k{i:03d}".encode(): f"v{i}".encode() for i in range(12)}
    path = str(tmp_path / "raw")
    write_raw_lmdb(path, items)
    ordered = LMDBData(path, shuffle=False)
    ordered.reset_state()
    assert len(ordered) == 12
    assert [tuple(dp) for dp in ordered] == sorted(items.items())
    shuf = LMDBData(path, shuffle=True)  # keys collected from the database
    assert sorted(shuf.keys) == sorted(items)
    shuf.reset_state()
    passes = [[k for k, _ in shuf] for _ in range(3)]
    assert all(sorted(p) == sorted(items) for p in passes) and len({tuple(p) for p in passes}) > 1
    assert all(v == items[k] for k, v in shuf)
    fmt = LMDBData(path, shuffle=True, keys="k{:03d}")
    assert sorted(fmt.keys) == sorted(items)
    some = LMDBData(path, shuffle=True, keys=["k001", b"k005"])
    some.reset_state()
    assert sorted(k for k, _ in some) == [b"k001", b"k005"]
    bad = LMDBData(path, shuffle=True, keys=[b"k001", b"nope"])
    bad.reset_state()
    with pytest.raises(KeyError, match=r"the key b.nope. is not in"):
        list(bad)


def test_lmdbdata_decoder_drops_none(tmp_path):
    path = str(tmp_path / "raw")
    write_raw_lmdb(path, {b"%02d" % i: str(i * i).encode() for i in range(6)})
    dec = LMDBDataDecoder(LMDBData(path, shuffle=False), lambda k, v: None if int(k) % 2 else [int(k), int(v)])
    dec.reset_state()
    assert list(dec) == [[0, 0], [2, 4], [4, 16]]
    with pytest.raises(TypeError, match="decoder must be callable"):
        LMDBDataDecoder(LMDBData(path), "nope")


def test_lmdbdata_is_not_reentrant(tmp_path):
    path = str(tmp_path / "raw")
    write_raw_lmdb(path, {b"a": b"1", b"b": b"2"})
    ds = LMDBData(path, shuffle=False)
    ds.reset_state()
    it = iter(ds)
    next(it)
    with pytest.raises(Exception, match="not reentrant"):
        next(iter(ds))


def test_caffe_lmdb(tmp_path, caplog):
    rng = np.random.RandomState(0)
    imgs = [rng.randint(0, 256, size=(3, 4, 5)).astype(np.uint8) for _ in range(4)]
    items = {b"%08d" % i: datum(img, 10 + i) for i, img in enumerate(imgs)}
    items[b"%08d" % 4] = b"\x0a\xff"  # a broken record: length past the end
    path = str(tmp_path / "caffe")
    write_raw_lmdb(path, items)
    ds = CaffeLMDB(path, shuffle=False)
    ds.reset_state()
    got = list(ds)
    assert len(got) == 4
    for (img, lab), exp, i in zip(got, imgs, range(4)):
        assert img.shape == (4, 5, 3) and img.dtype == np.uint8
        np.testing.assert_array_equal(img, exp.transpose(1, 2, 0))
        assert lab == 10 + i
    shuf = CaffeLMDB(path, shuffle=True, keys="{:0>8d}")
    shuf.reset_state()
    assert sorted(lab for _, lab in shuf) == [10, 11, 12, 13]


def test_hdf5data(tmp_path):
    import h5py

    path = str(tmp_path / "d.h5")
    with h5py.File(path, "w") as f:
        f["images"] = np.arange(24, dtype=np.float32).reshape(4, 2, 3)
        f["grp/labels"] = np.array([3, 1, 4, 1])
        f["short"] = np.zeros(3)
    ds = HDF5Data(path, ["images", "grp/labels"], shuffle=False)
    ds.reset_state()
    got = list(ds)
    assert len(ds) == 4 and [int(g[1]) for g in got] == [3, 1, 4, 1]
    np.testing.assert_array_equal(got[2][0], np.arange(12, 18, dtype=np.float32).reshape(2, 3))
    with pytest.raises(ValueError, match=r"different lengths \[4, 3\]"):
        HDF5Data(path, ["images", "short"])
    with pytest.raises(KeyError, match=r"has no dataset \['labels'\]"):
        HDF5Data(path, ["labels"])
    with pytest.raises(FileNotFoundError, match="missing.h5"):
        HDF5Data(str(tmp_path / "missing.h5"), ["images"])


def test_svmlight(tmp_path, sklearn_importable):
    path = tmp_path / "d.svm"
    path.write_text("1 1:0.5 3:2\n-1 2:1.5\n# comment\n1 1:1 2:1 3:1\n")
    ds = SVMLightData(str(path), shuffle=False)
    ds.reset_state()
    got = list(ds)
    assert len(ds) == 3
    np.testing.assert_array_equal(np.stack([g[0] for g in got]), [[0.5, 0, 2], [0, 1.5, 0], [1, 1, 1]])
    assert [g[1] for g in got] == [1, -1, 1]
    with pytest.raises(FileNotFoundError, match="nope.svm"):
        SVMLightData(os.path.join(str(tmp_path), "nope.svm"))


def test_forked_reader_while_parent_holds_the_database_open(tmp_path):
    """A worker forked while the parent reads the database can open and read it too (LMDB refuses a
    second environment of one file in a process, forked children included)."""
    from trainbus.dataflow import DataFromList, LMDBSerializer

    path = str(tmp_path / "x.lmdb")
    LMDBSerializer.save(DataFromList([[i] for i in range(50)], shuffle=False), path)
    parent = LMDBSerializer.load(path, shuffle=False)
    parent.reset_state()
    assert [dp[0] for dp in parent] == list(range(50))
    child_df = LMDBSerializer.load(path, shuffle=True)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            child_df.reset_state()
            os.write(w, repr(sorted(dp[0] for dp in child_df)).encode())
        finally:
            os._exit(0)
    os.close(w)
    got = b""
    while chunk := os.read(r, 65536):
        got += chunk
    os.close(r)
    os.waitpid(pid, 0)
    assert got.decode() == repr(list(range(50)))
