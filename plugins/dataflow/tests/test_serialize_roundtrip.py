"""LMDB / Numpy / TFRecord / HDF5 serializers: round trips with values, order, shuffling and
lengths; crash safety of ``save``. Through ``trainbus.dataflow``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from trainbus.dataflow import (DataFromList, HDF5Serializer, LMDBData, LMDBSerializer, NumpySerializer,
                               TFRecordSerializer)
from trainbus.utils.serialize import loads


def make_points(n=23, seed=0):
    rng = np.random.RandomState(seed)
    return [[rng.rand(2, 3).astype(np.float32), rng.randint(0, 255, size=(4,)).astype(np.uint8), i, f"s{i}"]
            for i in range(n)]


def assert_same(got, exp):
    assert len(got) == len(exp)
    for g, e in zip(got, exp):
        np.testing.assert_array_equal(g[0], e[0])
        assert g[0].dtype == np.float32 and g[0].shape == (2, 3)
        np.testing.assert_array_equal(g[1], e[1])
        assert g[1].dtype == np.uint8
        assert g[2] == e[2] and g[3] == e[3]


@pytest.mark.parametrize("as_dir", [False, True])
def test_lmdb_roundtrip_order_and_shuffle(tmp_path, as_dir):
    import lmdb

    pts = make_points()
    path = str(tmp_path / "db")
    if as_dir:
        os.mkdir(path)
    LMDBSerializer.save(DataFromList(pts, shuffle=False), path, write_frequency=5)
    files = sorted(os.listdir(path if as_dir else tmp_path))
    assert files == (["data.mdb"] if as_dir else ["db"])  # no temporaries or lock files left
    # the records as tensorpack lays them out: zero-padded keys and a __keys__ record
    env = lmdb.open(path, subdir=as_dir, readonly=True, lock=False)
    with env.begin() as txn:
        assert txn.stat()["entries"] == 24
        assert loads(txn.get(b"__keys__")) == [b"%08d" % i for i in range(23)]
        assert loads(txn.get(b"00000007"))[2] == 7
    env.close()
    ds = LMDBSerializer.load(path, shuffle=False)
    ds.reset_state()
    assert len(ds) == 23
    assert_same(list(ds), pts)
    assert_same(list(ds), pts)  # a second pass
    shuf = LMDBSerializer.load(path, shuffle=True)
    shuf.reset_state()
    orders = [[dp[2] for dp in shuf] for _ in range(3)]
    assert all(sorted(o) == list(range(23)) for o in orders)
    assert len({tuple(o) for o in orders}) > 1
    by_idx = {dp[2]: dp for dp in shuf}
    assert_same([by_idx[i] for i in range(23)], pts)


def test_lmdb_refuses_to_overwrite_and_bad_input(tmp_path):
    path = str(tmp_path / "x.lmdb")
    LMDBSerializer.save(DataFromList([[1]], shuffle=False), path)
    with pytest.raises(FileExistsError, match=r"the LMDB file .*x\.lmdb exists"):
        LMDBSerializer.save(DataFromList([[2]], shuffle=False), path)
    with pytest.raises(TypeError, match="expected a DataFlow .*got list"):
        LMDBSerializer.save([[1]], str(tmp_path / "y.lmdb"))
    with pytest.raises(FileNotFoundError, match=r"no LMDB database at .*nope\.lmdb"):
        LMDBSerializer.load(str(tmp_path / "nope.lmdb"))
    ds = LMDBSerializer.load(path, shuffle=False)
    with pytest.raises(RuntimeError, match=r"call reset_state\(\) before iterating"):
        list(ds)


def test_lmdb_failed_save_leaves_nothing(tmp_path):
    def gen():
        for i in range(10):
            if i == 6:
                raise RuntimeError("source broke")
            yield [i]

    from trainbus.dataflow import DataFromGenerator

    with pytest.raises(RuntimeError, match="source broke"):
        LMDBSerializer.save(DataFromGenerator(gen), str(tmp_path / "a.lmdb"), write_frequency=2)
    assert os.listdir(tmp_path) == []


def test_lmdb_killed_save_leaves_no_database(tmp_path):
    """A process killed in the middle of save() leaves no file under the database's name."""
    path = str(tmp_path / "k.lmdb")
    marker = str(tmp_path / "half")
    code = textwrap.dedent(f"""
        import os, time
        from trainbus.dataflow import DataFromGenerator, LMDBSerializer
        def gen():
            for i in range(100000):
                if i == 300:
                    open({marker!r}, "w").close()
                    while True:
                        time.sleep(1)
                yield [i, b"x" * 100]
        LMDBSerializer.save(DataFromGenerator(gen), {path!r}, write_frequency=100)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 60
        while not os.path.exists(marker):
            assert proc.poll() is None, "the writer exited early"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert not os.path.exists(path)
    with pytest.raises(FileNotFoundError):
        LMDBSerializer.load(path)
    leftovers = [f for f in os.listdir(tmp_path) if f != "half"]
    assert all(f.startswith(".k.lmdb.") for f in leftovers)  # only the hidden temporary of the dead writer


def test_two_loaders_of_one_database(tmp_path):
    path = str(tmp_path / "db")
    LMDBSerializer.save(DataFromList([[i] for i in range(5)], shuffle=False), path)
    a = LMDBSerializer.load(path, shuffle=False)
    b = LMDBData(path, shuffle=False)
    a.reset_state()
    b.reset_state()
    assert [dp[0] for dp in a] == list(range(5))
    assert [loads(v)[0] for _, v in b] == list(range(5))
    assert [k for k, _ in b] == [b"%08d" % i for i in range(5)]


def test_numpy_roundtrip(tmp_path):
    pts = make_points(7)
    path = str(tmp_path / "pts.data")  # written exactly there (no .npz appended)
    NumpySerializer.save(DataFromList(pts, shuffle=False), path)
    assert os.listdir(tmp_path) == ["pts.data"]
    ds = NumpySerializer.load(path, shuffle=False)
    ds.reset_state()
    assert len(ds) == 7
    assert_same(list(ds), pts)
    shuf = NumpySerializer.load(path)
    shuf.reset_state()
    assert sorted(dp[2] for dp in shuf) == list(range(7))
    with pytest.raises(FileNotFoundError, match="pts2"):
        NumpySerializer.load(str(tmp_path / "pts2"))


def test_tfrecord_roundtrip_readable_by_tf_data(tmp_path):
    import tensorflow as tf

    pts = make_points(9)
    path = str(tmp_path / "pts.tfrecord")
    TFRecordSerializer.save(DataFromList(pts, shuffle=False), path)
    assert os.listdir(tmp_path) == ["pts.tfrecord"]
    ds = TFRecordSerializer.load(path, size=9)
    ds.reset_state()
    assert len(ds) == 9
    assert_same(list(ds), pts)
    nolen = TFRecordSerializer.load(path)
    nolen.reset_state()
    with pytest.raises((TypeError, NotImplementedError)):
        len(nolen)
    assert_same(list(nolen), pts)
    # a real TFRecord file: TensorFlow's own reader gives back the same records
    if tf.executing_eagerly():
        recs = [r.numpy() for r in tf.data.TFRecordDataset(path)]
    else:
        it = tf.compat.v1.data.make_one_shot_iterator(tf.data.TFRecordDataset(path)).get_next()
        with tf.compat.v1.Session() as sess:
            recs = []
            try:
                while True:
                    recs.append(sess.run(it))
            except tf.errors.OutOfRangeError:
                pass
    assert_same([loads(r) for r in recs], pts)


def test_hdf5_roundtrip(tmp_path):
    import h5py

    pts = [[p[0], p[1], p[2]] for p in make_points(6)]
    path = str(tmp_path / "pts.h5")
    HDF5Serializer.save(DataFromList(pts, shuffle=False), path, ["img", "code", "idx"])
    with h5py.File(path, "r") as f:
        assert f["img"].shape == (6, 2, 3) and f["img"].dtype == np.float32
        np.testing.assert_array_equal(f["idx"][...], np.arange(6))
    ds = HDF5Serializer.load(path, ["img", "idx"], shuffle=False)
    ds.reset_state()
    got = list(ds)
    assert len(ds) == 6 and [int(g[1]) for g in got] == list(range(6))
    np.testing.assert_array_equal(np.stack([g[0] for g in got]), np.stack([p[0] for p in pts]))
    shuf = HDF5Serializer.load(path, ["idx"])
    shuf.reset_state()
    assert sorted(int(g[0]) for g in shuf) == list(range(6))
    with pytest.raises(ValueError, match="datapoint 0 has 3 components but data_paths names 2"):
        HDF5Serializer.save(DataFromList(pts, shuffle=False), str(tmp_path / "b.h5"), ["a", "b"])
    assert sorted(os.listdir(tmp_path)) == ["pts.h5"]


def test_lmdb_loaded_arrays_are_independent_of_the_database(tmp_path):
    """Values are decoded straight from LMDB's memory map: what comes out must be copies that stay
    valid after the pass and the database are gone, and may be written to."""
    pts = make_points(40, seed=3)
    path = str(tmp_path / "db")
    LMDBSerializer.save(DataFromList(pts, shuffle=False), path)
    for shuffle in (False, True):
        ds = LMDBSerializer.load(path, shuffle=shuffle)
        ds.reset_state()
        got = sorted(ds, key=lambda dp: dp[2])
        assert all(dp[0].flags.writeable for dp in got)
        got[0][0][...] = -1.0
        again = sorted(ds, key=lambda dp: dp[2])
        assert_same(again, pts)
        assert_same(got[1:], pts[1:])
