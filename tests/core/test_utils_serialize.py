"""trainbus.utils.serialize: round trips of nested structures with arrays of many dtypes, and clear errors."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from trainbus.utils.serialize import dumps, loads

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", ">i4", "int32", "uint32", "int64", "uint64", "float16",
          "float32", ">f8", "float64", "complex64", "complex128", "S5", "U7", "M8[ns]", "m8[s]", "V3"]


def _array(dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.RandomState(len(dtype) + len(shape))
    n = int(np.prod(shape))
    dt = np.dtype(dtype)
    if dt.kind in "SUV":
        raw = rng.randint(1, 120, size=n * dt.itemsize).astype(np.uint8)
        if dt.kind == "U":
            return np.array(["".join(chr(65 + i % 26) for i in range(k % 8)) for k in range(n)], dt).reshape(shape)
        return raw.view(dt).reshape(shape)
    if dt.kind in "mM":
        return rng.randint(0, 10**9, size=shape).astype(dt)
    return np.asarray(rng.randn(*shape) * 100).astype(dt)


def _assert_same(a, b):
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_same(a[k], b[k])
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    else:
        assert a == b


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (1,), (7,), (3, 5), (2, 0, 4), (2, 3, 4, 5)])
def test_array_round_trip(dtype, shape):
    a = _array(dtype, shape)
    b = loads(dumps(a))
    _assert_same(a, b)
    if b.size:
        assert b.flags.writeable and b.flags.c_contiguous
        assert b.ctypes.data % 16 == 0 or b.dtype.itemsize < 16  # aligned for vectorized reads


def test_nested_structure_round_trip():
    arrays = {dt: _array(dt, (3, 4)) for dt in DTYPES}
    obj = [
        {"image": arrays["uint8"], "label": 3, "boxes": [arrays["float32"], arrays["float64"]]},
        [None, True, False, 0, -1, 2**63 - 1, -(2**63), 2**64 - 1, 1.5, float("inf"), "text", "ünï", b"\x00\xff"],
        {1: "int key", b"raw": "bytes key", 2.5: "float key", None: "none"},
        list(arrays.values()),
        [[[[arrays["int16"]]]]],
        {},
        [],
    ]
    back = loads(dumps(obj))
    _assert_same(obj, back)


def test_tuples_and_subclasses_come_back_as_builtins():
    Point = collections.namedtuple("Point", "x y")
    obj = (1, (2, 3), Point(4, np.arange(3)), collections.OrderedDict(a=(5,)), collections.defaultdict(int, b=6))
    back = loads(dumps(obj))
    assert type(back) is list and type(back[1]) is list and type(back[2]) is list
    assert back[:2] == [1, [2, 3]] and back[2][0] == 4 and back[2][1].tolist() == [0, 1, 2]
    assert back[3] == {"a": [5]} and type(back[3]) is dict
    assert back[4] == {"b": 6} and type(back[4]) is dict
    assert type(loads(dumps(bytearray(b"ab")))) is bytes
    assert loads(dumps(memoryview(b"cd"))) == b"cd"


@pytest.mark.parametrize("scalar", [np.float32(1.25), np.float64(-2.5), np.int8(-3), np.uint64(2**64 - 1),
                                    np.bool_(True), np.complex64(1 + 2j), np.str_("abc"), np.bytes_(b"xy"),
                                    np.datetime64("2020-01-02T03:04:05", "s")])
def test_numpy_scalars_keep_their_dtype(scalar):
    back = loads(dumps({"s": scalar}))["s"]
    assert type(back) is type(scalar)
    assert back.dtype == scalar.dtype and back == scalar


def test_non_contiguous_and_views():
    base = np.arange(60, dtype=np.int32).reshape(3, 4, 5)
    for a in (base[:, ::2, 1:], base.T, base[::-1], np.asfortranarray(base), base[1]):
        b = loads(dumps(a))
        assert b.dtype == a.dtype and b.shape == a.shape
        np.testing.assert_array_equal(a, b)
        assert b.flags.c_contiguous


def test_loaded_arrays_are_writable_and_independent_of_the_input():
    a = np.arange(10, dtype=np.float32)
    buf = bytearray(dumps([a, a * 2]))
    x, y = loads(buf)
    x[0] = 100  # writable
    buf[:] = b"\0" * len(buf)  # the input is reused: the loaded arrays keep their values
    assert x.tolist()[:3] == [100.0, 1.0, 2.0] and y.tolist()[-1] == 18.0
    assert a[0] == 0  # dumps does not alias the source
    # memoryview input, several arrays each at a 16-byte aligned offset within one new buffer
    arrs = loads(memoryview(dumps([np.ones(3, np.uint8), np.ones(5, np.float64), np.ones(1, np.int16)])))
    assert [v.tolist() for v in arrs] == [[1, 1, 1], [1.0] * 5, [1]]
    offsets = [v.ctypes.data - arrs[0].ctypes.data for v in arrs]
    assert offsets == [0, 16, 64]


def test_unsupported_objects_raise_type_error_naming_them():
    with pytest.raises(TypeError, match=r"builtins\.set"):
        dumps([1, {2}])
    with pytest.raises(TypeError, match=r"dtype\('O'\)"):
        dumps(np.array([object()]))
    with pytest.raises(TypeError, match="structured"):
        dumps(np.zeros(2, dtype=[("a", "i4"), ("b", "f4")]))

    class Thing:
        pass

    with pytest.raises(TypeError, match="Thing"):
        dumps({"x": Thing()})
    with pytest.raises(OverflowError, match="64-bit"):
        dumps(2**70)


@pytest.mark.parametrize("buf,why", [(b"", "shorter than its 4-byte header"),
                                     (b"\x10\x00\x00\x00\x90", "announces a 16-byte message"),
                                     (b"\x02\x00\x00\x00\x92\x01", "incomplete")])
def test_bad_buffers_raise_value_error(buf, why):
    with pytest.raises(ValueError, match="not the output of trainbus.utils.serialize.dumps") as e:
        loads(buf)
    assert why in str(e.value)


def test_truncated_array_data_is_detected():
    good = dumps(np.arange(100, dtype=np.int64))
    with pytest.raises(ValueError, match="runs past its end"):
        loads(good[:-8])


def test_layout_is_length_prefixed_msgpack():
    import msgpack

    out = dumps({"a": [1, 2]})
    n = int.from_bytes(out[:4], "little")
    assert n == len(out) - 4
    assert msgpack.unpackb(out[4:], raw=False) == {"a": [1, 2]}
