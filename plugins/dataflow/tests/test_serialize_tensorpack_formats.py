"""Reading what tensorpack 0.11 wrote: its pickle, msgpack(+msgpack-numpy) and pyarrow.serialize
datapoint encodings, its LMDB / TFRecord / npz / HDF5 layouts; writing them on request; and clear
errors (naming the file and key, never a signal) for damaged LMDB files.

The files are built here the way tensorpack's serializers built them, with pickle, msgpack +
msgpack-numpy, lmdb, h5py and numpy directly (tensorpack itself is not used). pyarrow.serialize no
longer exists: its blobs are real output of pyarrow 11, kept in data/tensorpack/ (make_fixtures.py
there wrote them; ``fixture_objects`` below mirrors its ``objects``).
"""

from __future__ import annotations

import collections
import datetime
import os
import pickle
import signal
import subprocess
import sys
import textwrap

import lmdb
import msgpack
import msgpack_numpy
import numpy as np
import pytest

from trainbus.dataflow import DataFromList, HDF5Serializer, LMDBSerializer, NumpySerializer, TFRecordSerializer
from trainbus.utils import tensorpack_serialize
from trainbus.utils.serialize import dumps, dumps_tensorpack, loads

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "tensorpack")


# ---------------------------------------------------------------- tensorpack's writers, redone here

def tp_pickle(dp):
    return pickle.dumps(dp, protocol=-1)  # tensorpack's PickleSerializer (its 0.11 default)


def tp_msgpack(dp):
    # tensorpack's MsgpackSerializer: msgpack_numpy.patch() then msgpack.dumps(dp, use_bin_type=True)
    return msgpack.packb(dp, use_bin_type=True, default=msgpack_numpy.encode)


def tp_msgpack_read(buf):
    """What tensorpack's MsgpackSerializer.loads returned: the oracle for msgpack values."""
    return msgpack.unpackb(buf, raw=False, object_hook=msgpack_numpy.decode, strict_map_key=False)


def tp_lmdb_save(path, values, keys_value, write_frequency=2):
    """tensorpack's LMDBSerializer.save: keys '{:08}', one value each, then a __keys__ record."""
    isdir = os.path.isdir(path)
    db = lmdb.open(path, subdir=isdir, map_size=1 << 30, readonly=False, meminit=False, map_async=True)
    txn = db.begin(write=True)
    for idx, v in enumerate(values):
        txn.put(f"{idx:08}".encode("ascii"), v)
        if (idx + 1) % write_frequency == 0:
            txn.commit()
            txn = db.begin(write=True)
    txn.commit()
    with db.begin(write=True) as txn:
        txn.put(b"__keys__", keys_value)
    db.sync()
    db.close()


def tp_keys(n):
    return [f"{k:08}".encode("ascii") for k in range(n)]


def read_all(ds):
    ds.reset_state()
    return list(ds)


# ---------------------------------------------------------------- exact comparison

def assert_same(got, exp, where="dp"):
    """Equal values of exactly the same types: arrays by dtype, shape and contents, NumPy scalars by
    type, containers element by element, bytes never equal to str."""
    assert type(got) is type(exp), f"{where}: {type(got).__name__} != {type(exp).__name__} ({got!r:.60} vs {exp!r:.60})"
    if isinstance(exp, np.ndarray):
        assert got.dtype == exp.dtype and got.shape == exp.shape, f"{where}: {got.dtype}{got.shape} != {exp.dtype}{exp.shape}"
        if exp.dtype.kind == "f" or exp.dtype.kind == "c":
            np.testing.assert_array_equal(got, exp)
        else:
            assert got.tobytes() == exp.tobytes(), where
    elif isinstance(exp, np.generic):
        assert got.dtype == exp.dtype and got.tobytes() == exp.tobytes(), where
    elif isinstance(exp, dict):
        assert list(got.keys()) == list(exp.keys()), where
        for k in exp:
            assert_same(got[k], exp[k], f"{where}[{k!r}]")
    elif isinstance(exp, (list, tuple)):
        assert len(got) == len(exp), where
        for i, (g, e) in enumerate(zip(got, exp)):
            assert_same(g, e, f"{where}[{i}]")
    else:
        assert got == exp, f"{where}: {got!r} != {exp!r}"


def datapoints(n=7, seed=0):
    """Datapoints as tensorpack examples make them, plus the awkward cases."""
    rng = np.random.RandomState(seed)
    out = []
    for i in range(n):
        out.append([
            rng.randint(0, 256, size=(5, 4, 3)).astype(np.uint8),   # an image
            i,                                                      # a label
            rng.rand(3).astype(np.float32),
            np.asfortranarray(rng.rand(2, 3)),                      # not C-contiguous
            np.array(rng.randint(-5, 5), dtype=np.int16),           # 0-d
            np.zeros((0, 4), np.int32),
            np.array([b"ab", b"c"]), np.array(["xy", "z"]),
            np.float32(i / 2), np.int64(-i), np.bool_(i % 2), np.uint8(200),
            f"name{i}", f"raw{i}".encode(), None, True, 1.25, -(2**40),
            {"boxes": rng.rand(i % 3, 4).astype(np.float32), "class": [1, 2], b"bkey": "v", 3: "int key"},
            [[1, 2], [np.arange(i, dtype=np.int64)]],
        ])
    return out


# ---------------------------------------------------------------- single blobs

def test_msgpack_numpy_blobs_decode_as_tensorpack_did():
    for dp in datapoints():
        blob = tp_msgpack(dp)
        got = loads(blob)
        assert_same(got, tp_msgpack_read(blob))
        # the values themselves: tuples/lists are lists, arrays keep dtype/shape, str stays str, bytes bytes
        assert got[0].dtype == np.uint8 and got[0].shape == (5, 4, 3)
        np.testing.assert_array_equal(got[3], dp[3])
        assert got[12] == dp[12] and type(got[13]) is bytes and got[18][b"bkey"] == "v" and got[18][3] == "int key"
        assert got[0].flags.writeable  # unlike msgpack-numpy's read-only views
    # structured dtypes, complex numbers and tuples, which msgpack-numpy encodes specially
    dp = [np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")]), 1 + 2j, (1, "t"), np.complex64(1 - 1j)]
    blob = tp_msgpack(dp)
    assert_same(loads(blob), tp_msgpack_read(blob))
    assert loads(blob)[2] == [1, "t"]


def test_pickle_blobs_decode_to_the_pickled_objects():
    for dp in datapoints():
        for proto in (2, 4, 5):
            blob = pickle.dumps(dp, protocol=proto)
            assert_same(loads(blob), dp)
    tup = (np.arange(3), {"k": (1, 2)}, collections.OrderedDict(a=1), datetime.date(2020, 1, 2), {1, 2})
    got = loads(tp_pickle(tup))
    assert type(got) is tuple and type(got[1]["k"]) is tuple and type(got[2]) is collections.OrderedDict
    assert got[3] == datetime.date(2020, 1, 2) and got[4] == {1, 2}


def numpy1_pickled_dp():
    # mirrors make_fixtures.py: the image of its objects()["datapoint"] and friends
    image = np.random.RandomState(0).randint(0, 256, size=(4, 5, 3)).astype(np.uint8)
    return [image, np.int64(3), np.float32(0.5), {"k": np.arange(3.0)}, (1, "a"), b"raw"]


@pytest.mark.parametrize("proto", [2, 5])
def test_pickles_written_under_numpy1_decode(proto):
    with open(os.path.join(DATA, f"numpy1_pickle_p{proto}.bin"), "rb") as f:
        blob = f.read()
    assert b"numpy.core" in blob  # NumPy 1's module names, not this NumPy's
    assert_same(loads(blob), numpy1_pickled_dp())


class Payload:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


class Thing:
    def __init__(self, x):
        self.x = x


def test_pickle_refuses_code_unless_trusted(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"refers to (posix|os)\.system.*trust_pickle=True"):
        loads(pickle.dumps([np.zeros(2), Payload()]))
    assert not os.path.exists(tmp_path / "pwned")
    blob = pickle.dumps([Thing(3)])
    with pytest.raises(ValueError, match=r"Thing"):
        loads(blob)
    assert loads(blob, trust_pickle=True)[0].x == 3


def test_lmdb_of_pickled_objects_needs_trust_pickle(tmp_path):
    path = str(tmp_path / "obj.lmdb")
    tp_lmdb_save(path, [tp_pickle([np.zeros(2), i]) for i in range(2)] + [tp_pickle([Thing(5), 2])],
                 tp_pickle(tp_keys(3)))
    ds = LMDBSerializer.load(path, shuffle=False)
    ds.reset_state()
    with pytest.raises(ValueError, match=r"key b'00000002' in the LMDB file .*obj\.lmdb .*Thing.*trust_pickle=True"):
        list(ds)
    got = read_all(LMDBSerializer.load(path, shuffle=False, trust_pickle=True))
    assert [dp[1] for dp in got] == [0, 1, 2] and got[2][0].x == 5


def fixture_objects():
    """The objects make_fixtures.py serialized, as pyarrow 11's deserialize gave them back (its
    float32 and integer NumPy scalars became Python float/int, float16 stayed np.float16), except
    that pyarrow.Tensor and pyarrow.Buffer objects come back as ndarray and bytes."""
    image = np.random.RandomState(0).randint(0, 256, size=(4, 5, 3)).astype(np.uint8)
    return {
        "basic": [np.arange(6, dtype=np.float32).reshape(2, 3), 5, "hé", b"by",
                  {"a": 1.5, "b": [None, True], 3: (1, "x")}, (1, 2), 2.5, 3,
                  np.float16(1.5), {1, 2}, None, [], np.zeros((0, 3), np.uint8), np.array([0, 2]),
                  np.array(["ab", "c"]), True],
        "more": [image, 7, datetime.datetime(2020, 1, 2, 3, 4, 5, 6), np.arange(3), b"buf", 2**70,
                 collections.OrderedDict(a=1), np.array([1 + 2j]), np.array([b"ab"]), np.array(["x"]),
                 False, np.zeros((2, 0)), np.arange(6).reshape(2, 3).T.copy()],
        "keys": [b"%08d" % i for i in range(3)],
        "scalar": 5,
        "array": np.arange(10, dtype=np.int16),
        "datapoint": [image, 7],
    }


def read_fixture(name):
    with open(os.path.join(DATA, f"pyarrow11_{name}.bin"), "rb") as f:
        return f.read()


@pytest.mark.parametrize("name", sorted(fixture_objects()))
def test_pyarrow_serialize_blobs_decode(name):
    blob = read_fixture(name)
    assert tensorpack_serialize.detect(memoryview(blob)) == "pyarrow"
    got = loads(blob)
    assert_same(got, fixture_objects()[name])
    if name == "more":
        assert got[0].flags.writeable and got[0].flags.c_contiguous


def test_trainbus_buffers_never_reach_the_tensorpack_decoders(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("trainbus's own buffer went to the tensorpack decoders")

    monkeypatch.setattr(tensorpack_serialize, "loads", boom)
    objs = datapoints(3) + [[np.zeros(0)] * 3, [np.zeros(3, np.uint8), np.zeros(0)], 0, [], {}, b"", "x" * 1408]
    for dp in objs:
        assert_same(loads(dumps(dp)), tp_msgpack_read(tp_msgpack(dp)) if dp else dp)
    # a trainbus buffer may start like a pickle (0x80 0x05: a 1408-byte message): its header decides
    buf = dumps("y" * 1405)
    assert buf[:2] == b"\x80\x05" and loads(buf) == "y" * 1405


def test_garbage_blob_error_names_both_readings():
    with pytest.raises(ValueError, match=r"not the output of trainbus.utils.serialize.dumps .* nor a datapoint "
                                         r"tensorpack wrote with its msgpack serializer"):
        loads(b"\x93\x00\x00\x00 garbage garbage garbage")
    with pytest.raises(ValueError, match=r"\(ExtraData: .*\) nor a datapoint tensorpack wrote "
                                         r"with its pyarrow serializer \(ValueError: no Arrow IPC stream"):
        loads(b"\x07\x00\x00\x00 garbage garbage garbage")
    with pytest.raises(ValueError, match="pickle serializer"):
        loads(b"\x80\x04" + b"\xff" * 30)


def test_pyarrow_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"TENSORPACK_SERIALIZE=pyarrow.*pip install 'trainbus-dataflow\[tensorpack\]'"):
        loads(read_fixture("datapoint"))


# ---------------------------------------------------------------- files

def msgpack_and_pickle_cases():
    return [("msgpack", tp_msgpack, tp_msgpack_read), ("pickle", tp_pickle, pickle.loads)]


@pytest.mark.parametrize("as_dir", [False, True])
@pytest.mark.parametrize("fmt,encode,oracle", msgpack_and_pickle_cases(), ids=["msgpack", "pickle"])
def test_lmdb_written_by_tensorpack_loads(tmp_path, as_dir, fmt, encode, oracle):
    dps = datapoints(9)
    path = str(tmp_path / "tp.lmdb")
    if as_dir:
        os.mkdir(path)
    values = [encode(dp) for dp in dps]
    tp_lmdb_save(path, values, encode(tp_keys(len(dps))))
    ds = LMDBSerializer.load(path, shuffle=False)
    assert len(ds) == 9
    got = read_all(ds)
    for g, v in zip(got, values):
        assert_same(g, oracle(v))
    shuffled = LMDBSerializer.load(path, shuffle=True)
    by_label = {dp[1]: dp for dp in read_all(shuffled)}
    assert sorted(by_label) == list(range(9))
    for i, v in enumerate(values):
        assert_same(by_label[i], oracle(v))


@pytest.mark.parametrize("shuffle", [False, True])
def test_lmdb_of_pyarrow_values_loads(tmp_path, shuffle):
    path = str(tmp_path / "pa.lmdb")
    tp_lmdb_save(path, [read_fixture("datapoint")] * 3, read_fixture("keys"))
    got = read_all(LMDBSerializer.load(path, shuffle=shuffle))
    assert len(got) == 3
    for g in got:
        assert_same(g, fixture_objects()["datapoint"])


@pytest.mark.parametrize("fmt,encode,oracle", msgpack_and_pickle_cases(), ids=["msgpack", "pickle"])
def test_tfrecord_written_by_tensorpack_loads(tmp_path, fmt, encode, oracle):
    import tensorflow as tf

    dps = datapoints(4)
    path = str(tmp_path / "tp.tfrecords")
    with tf.io.TFRecordWriter(path) as w:
        for dp in dps:
            w.write(encode(dp))
        w.write(read_fixture("datapoint"))
    got = read_all(TFRecordSerializer.load(path, size=5))
    for g, dp in zip(got, dps):
        assert_same(g, oracle(encode(dp)))
    assert_same(got[4], fixture_objects()["datapoint"])


def test_npz_written_by_tensorpack_loads(tmp_path):
    dps = [[np.full((2, 3), i, np.float32), i] for i in range(5)]
    # tensorpack: np.savez_compressed(path, buffer=np.asarray(buffer, dtype=np.object)) -> a 2-D object array
    np.savez_compressed(str(tmp_path / "out.npz"), buffer=np.asarray(dps, dtype=object))
    got = read_all(NumpySerializer.load(str(tmp_path / "out.npz"), shuffle=False))
    assert len(got) == 5
    for g, dp in zip(got, dps):
        assert type(g) is list
        assert_same(g, dp)
    ragged = [[np.zeros(i), "s"] for i in range(3)] + [[1]]
    arr = np.empty(len(ragged), dtype=object)
    arr[:] = ragged
    np.savez_compressed(str(tmp_path / "ragged.npz"), buffer=arr)
    assert_same(read_all(NumpySerializer.load(str(tmp_path / "ragged.npz"), shuffle=False)), ragged)


def test_damaged_npz_names_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(pickle.dumps([Payload()]))  # not a zip: never handed to np.load's pickle fallback
    with pytest.raises(ValueError, match=r"NumpySerializer.load: .*bad\.npz is not an \.npz file"):
        NumpySerializer.load(str(bad))
    assert not (tmp_path / "pwned").exists()
    np.savez_compressed(str(tmp_path / "other.npz"), data=np.zeros(2))
    with pytest.raises(ValueError, match=r"other\.npz is not a readable NumpySerializer file \(KeyError"):
        NumpySerializer.load(str(tmp_path / "other.npz"))


def test_hdf5_written_by_tensorpack_loads(tmp_path):
    import h5py

    imgs = [np.full((2, 2), i, np.uint8) for i in range(4)]
    labels = [i * 10 for i in range(4)]
    with h5py.File(str(tmp_path / "out.h5"), "w") as hf:  # tensorpack: create_dataset(path, data=list)
        hf.create_dataset("img", data=imgs)
        hf.create_dataset("grp/label", data=labels)
    got = read_all(HDF5Serializer.load(str(tmp_path / "out.h5"), ["img", "grp/label"], shuffle=False))
    assert len(got) == 4
    for i, (img, label) in enumerate(got):
        assert img.dtype == np.uint8 and img.shape == (2, 2) and (img == i).all()
        assert label == i * 10


# ---------------------------------------------------------------- writing tensorpack's formats

@pytest.mark.parametrize("fmt", ["tensorpack-pickle", "tensorpack-msgpack"])
def test_save_in_tensorpack_formats(tmp_path, fmt):
    dps = [[np.arange(6, dtype=np.float32).reshape(2, 3) + i, i, f"s{i}", b"b"] for i in range(5)]
    path = str(tmp_path / "w.lmdb")
    LMDBSerializer.save(DataFromList(dps, shuffle=False), path, write_frequency=2, format=fmt)
    oracle = pickle.loads if fmt == "tensorpack-pickle" else tp_msgpack_read
    env = lmdb.open(path, subdir=False, readonly=True, lock=False)
    with env.begin() as txn:
        raw = {k: v for k, v in txn.cursor()}
    env.close()
    assert oracle(raw[b"__keys__"]) == tp_keys(5)  # tensorpack's reader reads the keys record
    for i, dp in enumerate(dps):
        v = raw[b"%08d" % i]
        if fmt == "tensorpack-pickle":
            assert v[:2] == b"\x80\x04"  # protocol 4: any Python 3 that runs tensorpack reads it
        assert_same(oracle(v), dp)
    assert_same(read_all(LMDBSerializer.load(path, shuffle=False)), dps)
    tf_path = str(tmp_path / "w.tfrecords")
    TFRecordSerializer.save(DataFromList(dps, shuffle=False), tf_path, format=fmt)
    assert_same(read_all(TFRecordSerializer.load(tf_path)), dps)


def test_save_format_default_and_unknown(tmp_path):
    path = str(tmp_path / "d.lmdb")
    LMDBSerializer.save(DataFromList([[np.zeros(2), 1]], shuffle=False), path)
    env = lmdb.open(path, subdir=False, readonly=True, lock=False)
    with env.begin() as txn:
        v = txn.get(b"00000000")
    env.close()
    assert v == dumps([np.zeros(2), 1])  # trainbus's own encoding by default
    with pytest.raises(ValueError, match=r"unknown format 'tensorpack'.*'tensorpack-pickle'"):
        LMDBSerializer.save(DataFromList([[1]], shuffle=False), str(tmp_path / "e.lmdb"), format="tensorpack")
    assert not os.path.exists(tmp_path / "e.lmdb")
    assert dumps_tensorpack([1, "a"], "msgpack") == tp_msgpack([1, "a"])


# ---------------------------------------------------------------- damaged files

def make_lmdb(path, n=100, size=5000):
    LMDBSerializer.save(DataFromList([[np.full(size, i % 256, np.uint8), i] for i in range(n)], shuffle=False), path)


def run_py(code, timeout=120):
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)


def test_truncated_lmdb_raises_instead_of_sigbus(tmp_path):
    path = str(tmp_path / "t.lmdb")
    make_lmdb(path)
    full = os.path.getsize(path)
    os.truncate(path, full // 2)
    # without the check, reading the mapped pages past the end kills the reader with SIGBUS
    raw = run_py(f"""
        import lmdb
        env = lmdb.open({path!r}, subdir=False, readonly=True, lock=False, map_size=1 << 40)
        print(sum(len(v) for _, v in env.begin().cursor()))
    """)
    assert raw.returncode == -signal.SIGBUS, (raw.returncode, raw.stderr[-500:])
    for shuffle in (False, True):
        r = run_py(f"""
            from trainbus.dataflow import LMDBSerializer
            ds = LMDBSerializer.load({path!r}, shuffle={shuffle})
            ds.reset_state()
            print(len(list(ds)))
        """)
        assert r.returncode == 1, (r.returncode, r.stderr[-800:])
        last = r.stderr.strip().splitlines()[-1]
        assert last.startswith("ValueError: LMDBSerializer.load: the LMDB file ") and path in last
        assert f"is truncated: it has {full // 2} bytes" in last and f"({full} bytes)" in last


def test_lmdb_truncated_after_load_is_caught_at_reset_state(tmp_path):
    path = str(tmp_path / "late.lmdb")
    make_lmdb(path, n=40)
    ds = LMDBSerializer.load(path, shuffle=False)
    os.truncate(path, os.path.getsize(path) - 4096 * 3)
    with pytest.raises(ValueError, match=r"the LMDB file .*late\.lmdb is truncated"):
        ds.reset_state()


def test_garbage_file_is_not_an_lmdb(tmp_path):
    path = tmp_path / "g.lmdb"
    path.write_bytes(np.random.RandomState(0).bytes(50000))
    with pytest.raises(ValueError, match=r"LMDBSerializer.load: .*g\.lmdb \(50000 bytes\) is not an LMDB file"):
        LMDBSerializer.load(str(path))
    os.mkdir(tmp_path / "d")
    (tmp_path / "d" / "data.mdb").write_bytes(b"")
    with pytest.raises(ValueError, match=r"d/data\.mdb \(0 bytes\) is not an LMDB file"):
        LMDBSerializer.load(str(tmp_path / "d"))


@pytest.mark.parametrize("shuffle", [False, True])
def test_corrupted_value_names_file_and_key(tmp_path, shuffle):
    path = str(tmp_path / "c.lmdb")
    make_lmdb(path, n=10, size=10)
    env = lmdb.open(path, subdir=False, lock=False)
    with env.begin(write=True) as txn:
        txn.put(b"00000004", b"\x10\x00\x00\x00 not a datapoint at all")
    env.close()
    ds = LMDBSerializer.load(path, shuffle=shuffle)
    ds.reset_state()
    with pytest.raises(ValueError) as e:
        list(ds)
    msg = str(e.value)
    assert msg.startswith("LMDBSerializer.load: the value of key b'00000004' in the LMDB file ") and path in msg
    assert "not the output of trainbus.utils.serialize.dumps" in msg


def test_corrupted_keys_record_names_it(tmp_path):
    path = str(tmp_path / "k.lmdb")
    make_lmdb(path, n=3, size=3)
    env = lmdb.open(path, subdir=False, lock=False)
    with env.begin(write=True) as txn:
        txn.put(b"__keys__", b"\xc1\xc1\xc1\xc1garbage")
    env.close()
    with pytest.raises(ValueError, match=r"the value of key b'__keys__' in the LMDB file .*k\.lmdb is damaged"):
        LMDBSerializer.load(path, shuffle=True)


def test_garbage_over_data_pages_raises_in_python(tmp_path):
    """Random bytes over every page after the two meta pages: a Python error naming the file, in a
    subprocess so that a crash would show as a signal. (Single bytes changed inside B-tree pages
    can still crash LMDB's own C code, which does not check node offsets: see dataflow.md.)"""
    path = str(tmp_path / "p.lmdb")
    make_lmdb(path, n=300, size=50)
    r = run_py(f"""
        import os, shutil, numpy as np
        from trainbus.dataflow import LMDBSerializer
        src = {path!r}
        size = os.path.getsize(src)
        for seed in range(8):
            dst = src + ".%d" % seed
            shutil.copy(src, dst)
            with open(dst, "r+b") as f:
                f.seek(8192)
                f.write(np.random.RandomState(seed).bytes(size - 8192))
            try:
                ds = LMDBSerializer.load(dst, shuffle=bool(seed % 2))
                ds.reset_state()
                list(ds)
                print("read", seed)
            except (ValueError, KeyError) as e:  # KeyError: a key of __keys__ is gone from the tree
                assert dst in str(e), e
                print("error", seed)
    """)
    assert r.returncode == 0, (r.returncode, r.stderr[-1500:])
    assert r.stdout.split().count("error") == 8, r.stdout


def test_damaged_tfrecord_names_file_and_record(tmp_path):
    import tensorflow as tf

    path = str(tmp_path / "bad.tfrecords")
    with tf.io.TFRecordWriter(path) as w:
        w.write(dumps([1]))
        w.write(b"\x10\x00\x00\x00 garbage")
    ds = TFRecordSerializer.load(path)
    ds.reset_state()
    with pytest.raises(ValueError, match=r"TFRecordSerializer.load: record 1 of .*bad\.tfrecords is damaged"):
        list(ds)
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 5)
    ds = TFRecordSerializer.load(path)
    ds.reset_state()
    with pytest.raises(ValueError, match=r"TFRecordSerializer.load: .*bad\.tfrecords is damaged after record 0"):
        list(ds)


# ---------------------------------------------------------------- pyarrow < 1.0 layouts

def old_pyarrow_blob(obj, header_ints, legacy_framing, array_child="ndarray"):
    """A pyarrow.serialize blob laid out as pyarrow 0.x wrote it (its serialize.cc): the int32 counts
    ``header_ints`` padded to 8 bytes, a V4 stream of one dense union whose children are named ""
    (typed by Arrow type), "ndarray"/"tensor" (int32 indexes) or are structs wrapping "list" /
    "tuple" / "dict" list arrays, then the arrays as tensor messages. Built with current pyarrow."""
    import pyarrow as pa

    arrays = []

    def union(items):
        kinds = {}  # child key -> (field name, builder values, arrow type or None)
        types, offsets = [], []

        def slot(key, value):
            if key not in kinds:
                kinds[key] = []
            types.append(list(kinds).index(key))
            offsets.append(len(kinds[key]))
            kinds[key].append(value)

        for x in items:
            if isinstance(x, np.ndarray):
                arrays.append(x)
                slot(array_child, len(arrays) - 1)
            elif isinstance(x, bool):
                slot("bool", x)
            elif isinstance(x, int):
                slot("int", x)
            elif isinstance(x, float):
                slot("double", x)
            elif isinstance(x, str):
                slot("string", x)
            elif isinstance(x, bytes):
                slot("bytes", x)
            elif isinstance(x, (list, tuple)):
                slot("list" if isinstance(x, list) else "tuple", x)
            elif isinstance(x, dict):
                slot("dict", x)
            else:
                raise TypeError(x)
        children, names = [], []
        for key, vals in kinds.items():
            if key in ("ndarray", "tensor"):
                children.append(pa.array(vals, pa.int32()))
                names.append(key)
            elif key in ("list", "tuple"):
                flat = [v for seq in vals for v in seq]
                offs = np.cumsum([0] + [len(v) for v in vals]).astype(np.int32)
                lst = pa.ListArray.from_arrays(pa.array(offs), union(flat))
                children.append(pa.StructArray.from_arrays([lst], names=[key]))
                names.append("")
            elif key == "dict":
                ks = [k for d in vals for k in d]
                vs = [v for d in vals for v in d.values()]
                entries = pa.StructArray.from_arrays([union(ks), union(vs)], names=["keys", "vals"])
                offs = np.cumsum([0] + [len(d) for d in vals]).astype(np.int32)
                lst = pa.ListArray.from_arrays(pa.array(offs), entries)
                children.append(pa.StructArray.from_arrays([lst], names=["dict"]))
                names.append("")
            else:
                t = {"bool": pa.bool_(), "int": pa.int64(), "double": pa.float64(), "string": pa.string(),
                     "bytes": pa.binary()}[key]
                children.append(pa.array(vals, t))
                names.append("")
        return pa.UnionArray.from_dense(pa.array(types, pa.int8()), pa.array(offsets, pa.int32()), children, names)

    col = union([obj])
    batch = pa.RecordBatch.from_arrays([col], names=["list"])
    sink = pa.BufferOutputStream()
    head = np.array(header_ints(len(arrays)), np.int32).tobytes()
    sink.write(head + b"\0" * (-len(head) % 8))
    opts = pa.ipc.IpcWriteOptions(metadata_version=pa.ipc.MetadataVersion.V4, use_legacy_format=legacy_framing)
    with pa.ipc.new_stream(sink, batch.schema, options=opts) as w:
        w.write_batch(batch)
    for a in arrays:
        sink.write(b"\0" * (-sink.tell() % 64))
        pa.ipc.write_tensor(pa.Tensor.from_numpy(a), sink)
    return sink.getvalue().to_pybytes()


OLD_DP = [np.arange(6, dtype=np.float32).reshape(2, 3), 7, "s", b"b", (1, 2.5, np.zeros(2, np.int64)),
          {"k": [True, -3], "m": np.ones(1, np.uint8)}, []]


@pytest.mark.parametrize("layout", ["0.13-0.14", "0.15-0.17", "0.8-0.12"])
def test_pre_1_0_pyarrow_layouts_decode(layout):
    if layout == "0.8-0.12":  # two counts (tensors, buffers), legacy framing, arrays as "tensor"
        blob = old_pyarrow_blob(OLD_DP, lambda n: [n, 0], True, "tensor")
    elif layout == "0.13-0.14":  # tensors, ndarrays, buffers; legacy framing
        blob = old_pyarrow_blob(OLD_DP, lambda n: [0, n, 0], True)
    else:  # continuation-token framing
        blob = old_pyarrow_blob(OLD_DP, lambda n: [0, 0, n, 0], False)
    assert tensorpack_serialize.detect(memoryview(blob)) == "pyarrow"
    assert_same(loads(blob), OLD_DP)
