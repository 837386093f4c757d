"""Serialization of datapoints for the hop between processes (ZMQ, pipes): ``dumps(obj) -> bytes``, ``loads(buf)``.

The format is msgpack with NumPy arrays carried out of band:

* a 4-byte little-endian length, then a msgpack message of that length, then the raw bytes of every array;
* an array inside the message is a msgpack extension (code 72) holding its offset in the trailing bytes
  (uint64), its ndim (one byte), its dims (int64 each) and its dtype string; the array bytes follow the
  message, each aligned to 16 bytes;
* a NumPy scalar (``np.float32(1.5)``, ``np.int64(3)``, ``np.bool_(True)``) is an extension (code 73)
  holding its dtype string and raw bytes, and comes back as a NumPy scalar of the same dtype.

``dumps`` copies each array's bytes once (into the returned ``bytes``); ``loads`` copies the trailing array bytes
once into a new ``bytearray`` and makes every array a zero-copy ``np.frombuffer`` view of it. So loaded arrays
are **writable** and independent of ``buf`` (unlike msgpack-numpy, whose arrays are read-only views).

What comes back:

* ``None``, ``bool``, ``int`` (64-bit range), ``float``, ``str``, ``bytes``: the same value and type;
  ``bytearray`` and ``memoryview`` come back as ``bytes``;
* ``list`` and ``tuple`` both come back as ``list`` (as with tensorpack's msgpack serializer); so do
  subclasses such as named tuples;
* ``dict`` (and subclasses) come back as ``dict``; keys may be ``str``, ``bytes``, ``int``, ``float``, ``bool``
  or ``None`` (a tuple key comes back as a list and cannot be a key: it raises);
* ``np.ndarray`` of any bool, integer, float, complex, datetime64/timedelta64, fixed-width bytes (``S``) or
  str (``U``) dtype, of any shape (0-d included) and memory layout: a C-contiguous array of the same
  dtype, shape and values.

Object arrays, structured dtypes, sets and other objects raise ``TypeError`` naming the object's type.

``loads`` also reads what tensorpack 0.11's ``dumps`` wrote (pickle, msgpack + msgpack-numpy,
``pyarrow.serialize``): a buffer whose header does not describe a trainbus message exactly (its
message length, and array bytes after it only when an array refers to them) is handed to :mod:`trainbus.utils.tensorpack_serialize`. Trainbus
buffers pay one length comparison for this. :func:`dumps_tensorpack` writes tensorpack's encodings.
"""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import numpy as np

__all__ = ["dumps", "loads", "dumps_tensorpack"]

_EXT_ARRAY = 72
_EXT_SCALAR = 73
_ALIGN = 16

_LEN = struct.Struct("<I")
_OFFSET = struct.Struct("<Q")
_PADS = [b"\0" * i for i in range(_ALIGN)]
_CACHE_MAX = 4096
# (dtype, shape) -> the array extension's bytes after the offset: ndim (1 byte), ndim int64 dims, the dtype string
_ENC_CACHE: dict[tuple[np.dtype, tuple[int, ...]], bytes] = {}
# those bytes -> (shape, dtype, element count)
_DEC_CACHE: dict[bytes, tuple[tuple[int, ...], np.dtype, int]] = {}


def _dtype_check(dtype: np.dtype, what: str) -> str:
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None:
        raise TypeError(f"trainbus.utils.serialize.dumps: cannot serialize a NumPy {what} of dtype {dtype!r} "
                        "(object and structured dtypes are not supported); convert it to a plain numeric, bytes "
                        "or str dtype, or to a list, first")
    return dtype.str


def _array_tail(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    tail = _ENC_CACHE.get((dtype, shape))
    if tail is None:
        dims = bytes((len(shape),)) + struct.pack(f"<{len(shape)}q", *shape)
        tail = dims + _dtype_check(dtype, "array").encode("ascii")
        if len(_ENC_CACHE) >= _CACHE_MAX:
            _ENC_CACHE.clear()
        _ENC_CACHE[(dtype, shape)] = tail
    return tail


def _parse_tail(tail: bytes) -> tuple[tuple[int, ...], np.dtype, int]:
    got = _DEC_CACHE.get(tail)
    if got is None:
        ndim = tail[0]
        shape = struct.unpack_from(f"<{ndim}q", tail, 1)
        dtype = np.dtype(tail[1 + 8 * ndim:].decode("ascii"))
        count = 1
        for d in shape:
            count *= d
        got = (shape, dtype, count)
        if len(_DEC_CACHE) >= _CACHE_MAX:
            _DEC_CACHE.clear()
        _DEC_CACHE[tail] = got
    return got


def dumps(obj: Any) -> bytes:
    """Serialize ``obj`` (nested lists/tuples/dicts of Python scalars, bytes, str and NumPy arrays) to bytes.

    :returns: ``bytes`` for :func:`loads`. Raises ``TypeError`` for an object it cannot carry.
    """
    buffers: list[Any] = []
    pos = 0

    def default(o: Any) -> Any:
        nonlocal pos
        if isinstance(o, np.ndarray):
            tail = _array_tail(o.dtype, o.shape)
            if not o.flags.c_contiguous:
                o = np.ascontiguousarray(o)
            pad = -pos % _ALIGN
            if pad:
                buffers.append(_PADS[pad])
                pos += pad
            head = _OFFSET.pack(pos)
            n = o.nbytes
            if n:
                # datetime64/timedelta64 arrays export no buffer; their flat uint8 view (of a C-contiguous
                # array: never a copy) does
                buffers.append(o if o.dtype.kind not in "mM" else o.reshape(-1).view(np.uint8))
                pos += n
            return msgpack.ExtType(_EXT_ARRAY, head + tail)
        if isinstance(o, np.generic):
            d = _dtype_check(o.dtype, "scalar").encode("ascii")
            return msgpack.ExtType(_EXT_SCALAR, bytes((len(d),)) + d + o.tobytes())
        # with strict_types, subclasses of the built-in types arrive here: give msgpack the base type
        if isinstance(o, (list, tuple)):
            return list(o)
        if isinstance(o, dict):
            return dict(o)
        if isinstance(o, bool):
            return bool(o)
        if isinstance(o, int):
            return int(o)
        if isinstance(o, float):
            return float(o)
        if isinstance(o, str):
            return str(o)
        if isinstance(o, (bytes, bytearray, memoryview)):
            return bytes(o)
        raise TypeError(f"trainbus.utils.serialize.dumps: cannot serialize an object of type "
                        f"{type(o).__module__}.{type(o).__qualname__} ({o!r:.80}); send None, bool, int, float, str, "
                        "bytes, lists/tuples, dicts and NumPy arrays/scalars only")

    try:
        body = msgpack.packb(obj, default=default, use_bin_type=True, strict_types=True)
    except OverflowError as e:
        raise OverflowError(f"trainbus.utils.serialize.dumps: an integer is outside the 64-bit range ({e}); "
                            "send it as a str") from None
    if not buffers:
        return _LEN.pack(len(body)) + body
    return b"".join([_LEN.pack(len(body)), body, *buffers])


def _bad(buf: Any, why: str) -> ValueError:
    return ValueError(f"trainbus.utils.serialize.loads: the {len(buf)}-byte buffer is not the output of "
                      f"trainbus.utils.serialize.dumps ({why}); both ends of a connection must use "
                      "trainbus.utils.serialize")


class _NotTrainbus(Exception):
    pass


def loads(buf: bytes | bytearray | memoryview, *, trust_pickle: bool = False) -> Any:
    """The object serialized into ``buf`` by :func:`dumps`, or by tensorpack 0.11.

    Arrays come back C-contiguous and writable, sharing one new buffer (nothing of ``buf`` is kept).

    A buffer that is not trainbus's encoding is tried as one of tensorpack's (pickle, msgpack with
    msgpack-numpy, ``pyarrow.serialize``; see :mod:`trainbus.utils.tensorpack_serialize`); a pickle
    is unpickled with a restricted unpickler (NumPy and built-in types only) unless ``trust_pickle``.
    Raises ``ValueError`` naming what is wrong when it is neither.
    """
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    nbuf = len(mv)
    if nbuf < _LEN.size:
        return _loads_other(mv, "shorter than its 4-byte header", trust_pickle)
    (n,) = _LEN.unpack_from(mv, 0)
    start = _LEN.size + n
    if start > nbuf or n == 0:
        return _loads_other(mv, f"its header announces a {n}-byte message", trust_pickle)
    trailer: bytearray | None = None
    ntrail = nbuf - start

    def ext_hook(code: int, data: bytes) -> Any:
        nonlocal trailer
        if code == _EXT_ARRAY:
            (offset,) = _OFFSET.unpack_from(data, 0)
            shape, dtype, count = _parse_tail(data[8:])
            if count == 0:
                return np.empty(shape, dtype)
            if offset + count * dtype.itemsize > ntrail:
                raise _NotTrainbus("an array runs past its end")
            if trailer is None:
                trailer = bytearray(mv[start:])
            return np.frombuffer(trailer, dtype, count, offset).reshape(shape)
        if code == _EXT_SCALAR:
            k = data[0]
            return np.frombuffer(data, np.dtype(data[1:1 + k].decode("ascii")), 1, 1 + k)[0]
        return msgpack.ExtType(code, data)

    try:
        out = msgpack.unpackb(mv[_LEN.size:start], ext_hook=ext_hook, raw=False, strict_map_key=False)
    except _NotTrainbus as e:
        return _loads_other(mv, str(e), trust_pickle)
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError, ValueError, struct.error, UnicodeDecodeError,
            TypeError, IndexError) as e:
        return _loads_other(mv, f"{type(e).__name__}: {e}", trust_pickle)
    if ntrail and trailer is None:
        # dumps writes bytes after the message only for a non-empty array: this is another encoding
        return _loads_other(mv, f"{ntrail} bytes after its message belong to no array", trust_pickle)
    return out


def _loads_other(mv: memoryview, why: str, trust_pickle: bool) -> Any:
    """``mv`` is not trainbus's encoding (``why``): decode it as one of tensorpack's, or raise."""
    from trainbus.utils import tensorpack_serialize as tp

    fmt = tp.detect(mv)
    if fmt is None:
        raise _bad(mv, why)
    try:
        return tp.loads(mv, trust_pickle=trust_pickle)
    except ImportError:
        raise
    except Exception as e:  # noqa: BLE001  (any decoder failure means: not this encoding either)
        raise ValueError(f"trainbus.utils.serialize.loads: the {len(mv)}-byte buffer is not the output of "
                         f"trainbus.utils.serialize.dumps ({why}) nor a datapoint tensorpack wrote with its {fmt} "
                         f"serializer ({type(e).__name__}: {e}); the data is damaged or in another format") from None


def dumps_tensorpack(obj: Any, fmt: str = "pickle") -> bytes:
    """Serialize ``obj`` the way tensorpack 0.11 did, for files tensorpack itself must read.

    ``fmt``: ``"pickle"`` (tensorpack's default) or ``"msgpack"`` (msgpack with msgpack-numpy's
    array encoding; read by tensorpack run with ``TENSORPACK_SERIALIZE=msgpack``). :func:`loads`
    reads both back. Slower than :func:`dumps`; use it only for that purpose.
    """
    from trainbus.utils import tensorpack_serialize as tp

    return tp.dumps(obj, fmt)
