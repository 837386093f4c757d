"""Read (and, on request, write) the datapoint encodings of tensorpack 0.11.

tensorpack's ``tensorpack.utils.serialize.dumps`` produced one of three encodings, chosen by its
``TENSORPACK_SERIALIZE`` environment variable; every LMDB value, ``__keys__`` record and TFRecord
payload that tensorpack wrote is one of them:

``"pickle"`` (tensorpack 0.11's default)
    ``pickle.dumps(dp, protocol=-1)``. Read here with a restricted unpickler that only builds
    NumPy arrays, scalars and dtypes, the built-in containers and a few standard-library types
    (``collections``, ``datetime``): unpickling anything else could run code, so it raises unless
    the caller passes ``trust_pickle=True``.
``"msgpack"``
    ``msgpack.dumps(dp, use_bin_type=True)`` with msgpack-numpy's encoder: an array is the map
    ``{b"nd": True, b"type": dtype.str, b"kind": b"", b"shape": shape, b"data": raw bytes}``, a NumPy
    scalar ``{b"nd": False, b"type": ..., b"data": ...}``, a Python complex
    ``{b"complex": True, b"data": repr}``. Tuples come back as lists, as they did in tensorpack.
``"pyarrow"``
    ``pyarrow.serialize(dp).to_buffer()``: four int32 counts (tensors, sparse tensors, ndarrays,
    buffers), an Arrow IPC stream holding one dense-union column that describes the object, then
    the arrays as Arrow tensor messages (64-byte aligned) and the raw buffers. Current pyarrow no
    longer has ``deserialize``; its IPC reader still reads the stream and the tensor messages, and
    :func:`loads_pyarrow` rebuilds the Python object from the union the way pyarrow 0.15-11 did.
    pyarrow is imported only when such a blob is met (``pip install pyarrow``).

:func:`detect` tells the three apart from the first bytes; :func:`trainbus.utils.serialize.loads`
calls it only for a buffer that is not trainbus's own encoding.
"""

from __future__ import annotations

import _compat_pickle
import collections
import datetime
import importlib
import io
import pickle
import struct
from typing import Any, Callable

import msgpack
import numpy as np

__all__ = ["detect", "loads", "loads_msgpack", "loads_pickle", "loads_pyarrow", "dumps", "FORMATS"]

#: the encodings :func:`dumps` can write
FORMATS = ("pickle", "msgpack")

_MAX_LEN = 2**31 - 1


def detect(buf: memoryview) -> str | None:
    """``"pickle"``, ``"pyarrow"`` or ``"msgpack"``: which tensorpack encoding ``buf`` starts like
    (``None`` for an empty buffer)."""
    n = len(buf)
    if n == 0:
        return None
    b0 = buf[0]
    if b0 == 0x80 and n > 2 and 2 <= buf[1] <= 5:
        return "pickle"
    if b0 < 0x80 and n >= 24 and buf[1] == 0 and buf[2] == 0 and buf[3] == 0:
        # pyarrow: a small int32 tensor count first. A msgpack message starting with a byte below
        # 0x80 is a one-byte integer, and tensorpack's pickles start with 0x80
        return "pyarrow"
    return "msgpack"


# ---------------------------------------------------------------- msgpack (+ msgpack-numpy)

def _mn_get(d: dict, key: str) -> Any:
    v = d.get(key.encode())
    return d.get(key) if v is None else v


def _mn_dtype(descr: Any) -> np.dtype:
    if isinstance(descr, (list, tuple)):
        fields = []
        for f in descr:
            f = [x.decode() if isinstance(x, bytes) else x for x in f]
            fields.append((f[0], _mn_dtype(f[1]), *f[2:]))
        return np.dtype(fields)
    return np.dtype(descr.decode() if isinstance(descr, bytes) else descr)


def _mn_hook(d: dict) -> Any:
    nd = _mn_get(d, "nd")
    if nd is True:
        kind = _mn_get(d, "kind")
        data = _mn_get(d, "data")
        if kind in (b"O", "O"):
            return _restricted_loads(data)
        dtype = _mn_dtype(_mn_get(d, "type"))
        shape = tuple(_mn_get(d, "shape"))
        # one copy: writable and independent of the input, like trainbus's own arrays
        arr = np.empty(shape, dtype)
        if arr.nbytes != len(data):
            raise ValueError(f"a msgpack-numpy array of shape {shape} and dtype {dtype} carries {len(data)} bytes, "
                             f"not {arr.nbytes}")
        if arr.nbytes:
            arr.reshape(-1).view(np.uint8)[:] = np.frombuffer(data, np.uint8)
        return arr
    if nd is False:
        return np.frombuffer(_mn_get(d, "data"), _mn_dtype(_mn_get(d, "type")))[0]
    if _mn_get(d, "complex") is True:
        s = _mn_get(d, "data")
        return complex(s.decode() if isinstance(s, bytes) else s)
    return d


def loads_msgpack(buf: Any) -> Any:
    """Decode what tensorpack's ``MsgpackSerializer.dumps`` (msgpack + msgpack-numpy) wrote."""
    return msgpack.unpackb(buf, raw=False, object_hook=_mn_hook, strict_map_key=False,
                           max_bin_len=_MAX_LEN, max_str_len=_MAX_LEN, max_array_len=_MAX_LEN,
                           max_map_len=_MAX_LEN, max_ext_len=_MAX_LEN)


def _mn_default(o: Any) -> Any:
    if isinstance(o, np.ndarray):
        if o.dtype.hasobject:
            raise TypeError("an object array cannot be written in tensorpack's msgpack format; use format "
                            "'tensorpack-pickle'")
        if o.dtype.kind == "V":
            descr: Any = o.dtype.descr
            kind = b"V"
        else:
            descr, kind = o.dtype.str, b""
        return {b"nd": True, b"type": descr, b"kind": kind, b"shape": list(o.shape),
                b"data": np.ascontiguousarray(o).tobytes()}
    if isinstance(o, (np.bool_, np.number)):
        return {b"nd": False, b"type": o.dtype.str, b"data": o.tobytes()}
    if isinstance(o, complex):
        return {b"complex": True, b"data": repr(o)}
    raise TypeError(f"cannot write an object of type {type(o).__module__}.{type(o).__qualname__} in tensorpack's "
                    "msgpack format")


# ---------------------------------------------------------------- pickle

def _np_attr(module: str, name: str) -> Any:
    # pickles from NumPy 1 name numpy.core.*, those from NumPy 2 numpy._core.*; both map to what is here
    for mod in (module, module.replace("numpy.core", "numpy._core", 1), module.replace("numpy._core", "numpy.core", 1)):
        try:
            return getattr(importlib.import_module(mod), name)
        except (ImportError, AttributeError):
            continue
    raise AttributeError(f"{module}.{name}")


_SAFE_GLOBALS: dict[tuple[str, str], Callable[[], Any]] = {}
for _mod in ("numpy.core.multiarray", "numpy._core.multiarray"):
    for _name in ("_reconstruct", "scalar"):
        _SAFE_GLOBALS[(_mod, _name)] = (lambda m=_mod, n=_name: _np_attr(m, n))
for _mod in ("numpy.core.numeric", "numpy._core.numeric"):
    _SAFE_GLOBALS[(_mod, "_frombuffer")] = (lambda m=_mod: _np_attr(m, "_frombuffer"))
_SAFE_GLOBALS[("numpy", "ndarray")] = lambda: np.ndarray
_SAFE_GLOBALS[("numpy", "dtype")] = lambda: np.dtype
_SAFE_GLOBALS[("_codecs", "encode")] = lambda: importlib.import_module("_codecs").encode
for _name in ("complex", "set", "frozenset", "bytearray", "slice", "range", "list", "dict", "tuple", "int",
              "float", "str", "bytes", "bool"):
    _SAFE_GLOBALS[("builtins", _name)] = (lambda n=_name: getattr(importlib.import_module("builtins"), n))
for _name in ("OrderedDict", "defaultdict", "deque", "Counter"):
    _SAFE_GLOBALS[("collections", _name)] = (lambda n=_name: getattr(collections, n))
for _name in ("datetime", "date", "time", "timedelta", "timezone"):
    _SAFE_GLOBALS[("datetime", _name)] = (lambda n=_name: getattr(datetime, n))


class _RestrictedUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _SAFE_GLOBALS:  # Python 2 names, which protocol 0-2 pickles use
            if (module, name) in _compat_pickle.NAME_MAPPING:
                module, name = _compat_pickle.NAME_MAPPING[(module, name)]
            elif module in _compat_pickle.IMPORT_MAPPING:
                module = _compat_pickle.IMPORT_MAPPING[module]
        get = _SAFE_GLOBALS.get((module, name))
        if get is None and module.startswith("numpy.dtypes") and name.endswith("DType"):
            get = lambda: _np_attr(module, name)  # NumPy 2 dtype classes
        if get is None:
            raise pickle.UnpicklingError(
                f"the pickled datapoint refers to {module}.{name}, which is not a NumPy, built-in or standard "
                "container type; unpickling it could run code from the file, so it is refused: pass "
                "trust_pickle=True if you trust the file")
        return get()


def _restricted_loads(data: Any) -> Any:
    return _RestrictedUnpickler(io.BytesIO(data)).load()


def loads_pickle(buf: Any, trust_pickle: bool = False) -> Any:
    """Decode what tensorpack's ``PickleSerializer.dumps`` wrote (restricted unless ``trust_pickle``)."""
    if trust_pickle:
        return pickle.loads(buf)
    return _restricted_loads(buf)


# ---------------------------------------------------------------- pyarrow

# pyarrow's PythonType numbers: the name of each child of the serialized dense union
_NONE, _BOOL, _INT, _PY2INT, _BYTES, _STRING, _HALF, _FLOAT, _DOUBLE, _DATE64 = range(10)
_LIST, _DICT, _TUPLE, _SET, _TENSOR, _NDARRAY, _BUFFER = range(10, 17)
_EPOCH = datetime.datetime(1970, 1, 1)


# before pyarrow 1.0 the children were named by role only where the Arrow type did not tell it
_OLD_NAMES = {"tensor": _TENSOR, "ndarray": _NDARRAY, "buffer": _BUFFER, "py2_int": _INT}
_OLD_SEQS = {"list": _LIST, "tuple": _TUPLE, "dict": _DICT, "set": _SET}


def _kind_and_child(field: Any, child: Any) -> tuple[int, Any]:
    """The PythonType of one child of a serialized union, and the array holding its values."""
    import pyarrow as pa

    name = field.name
    if name.isdigit():  # pyarrow >= 1.0: the PythonType number itself
        return int(name), child
    if name in _OLD_NAMES:
        return _OLD_NAMES[name], child
    t = field.type
    if pa.types.is_struct(t) and t.num_fields == 1 and t.field(0).name in _OLD_SEQS:
        return _OLD_SEQS[t.field(0).name], child.field(0)
    for test, kind in ((pa.types.is_null, _NONE), (pa.types.is_boolean, _BOOL), (pa.types.is_int64, _INT),
                       (pa.types.is_binary, _BYTES), (pa.types.is_string, _STRING), (pa.types.is_float16, _HALF),
                       (pa.types.is_float32, _FLOAT), (pa.types.is_float64, _DOUBLE), (pa.types.is_date64, _DATE64)):
        if test(t):
            return kind, child
    raise ValueError(f"the serialized union has a child {name!r} of type {t}, which no pyarrow.serialize wrote")


class _PyarrowBlob:
    def __init__(self, tensors: list, ndarrays: list, buffers: list) -> None:
        self.tensors = tensors
        self.ndarrays = ndarrays
        self.buffers = buffers

    def seq(self, arr: Any) -> list:
        """Every element of the dense union array ``arr``, as Python objects."""
        n = len(arr)
        if n == 0:
            return []
        utype = arr.type
        columns = [self.child(*_kind_and_child(utype.field(j), arr.field(j))) for j in range(utype.num_fields)]
        index = {code: j for j, code in enumerate(utype.type_codes)}
        codes = arr.type_codes.to_numpy(zero_copy_only=False).tolist()
        offsets = arr.offsets.to_numpy(zero_copy_only=False).tolist()
        return [columns[index[c]][o] for c, o in zip(codes, offsets)]

    def sublists(self, child: Any, convert: Callable[[list], Any]) -> list:
        values = self.seq(child.values)
        offs = child.offsets.to_numpy(zero_copy_only=False).tolist()
        return [convert(values[offs[i]:offs[i + 1]]) for i in range(len(child))]

    def child(self, kind: int, child: Any) -> list:
        if kind == _NONE:
            return [None] * len(child)
        if kind in (_BOOL, _INT, _PY2INT, _BYTES, _STRING, _DOUBLE, _FLOAT):
            return child.to_pylist()
        if kind == _HALF:
            return list(child.to_numpy(zero_copy_only=False).astype(np.float16))
        if kind == _DATE64:
            # pyarrow stored microseconds since the epoch in the date64 slot
            return [_EPOCH + datetime.timedelta(microseconds=v)
                    for v in child.cast("int64").to_numpy(zero_copy_only=False).tolist()]
        if kind == _LIST:
            return self.sublists(child, lambda v: v)
        if kind == _TUPLE:
            return self.sublists(child, tuple)
        if kind == _SET:
            return self.sublists(child, set)
        if kind == _DICT:
            entries = child.values
            keys = self.seq(entries.field("keys"))
            vals = self.seq(entries.field("vals"))
            offs = child.offsets.to_numpy(zero_copy_only=False).tolist()
            out = []
            for i in range(len(child)):
                d = dict(zip(keys[offs[i]:offs[i + 1]], vals[offs[i]:offs[i + 1]]))
                out.append(_custom(d) if "_pytype_" in d else d)
            return out
        idx = child.to_numpy(zero_copy_only=False).tolist()
        if kind == _NDARRAY:
            return [self.ndarrays[i] for i in idx]
        if kind == _TENSOR:
            return [self.tensors[i] for i in idx]
        if kind == _BUFFER:
            return [self.buffers[i] for i in idx]
        raise ValueError(f"pyarrow PythonType {kind} (a sparse tensor or a newer type) is not supported")


def _custom(d: dict) -> Any:
    """An object pyarrow's default serialization context stored as a ``_pytype_`` dict."""
    t = d["_pytype_"]
    if isinstance(t, bytes):
        t = t.decode()
    data = d.get("data")
    if "pickle" in d:
        raise ValueError(f"a {t} object was pickled inside the pyarrow blob; trainbus does not run pickled code "
                         "from a data file")
    if t == "np.array":
        arr, descr = data
        if isinstance(descr, str) and descr == "|O":
            raise ValueError("an object array inside the pyarrow blob is not supported")
        dtype = np.lib.format.descr_to_dtype(descr)
        return arr.view(dtype) if arr.dtype == np.uint8 else np.array(arr, dtype=dtype)
    if t == "int":
        return int(data)
    if t == "collections.OrderedDict":
        return collections.OrderedDict(zip(data[0], data[1]))
    if t == "collections.Counter":
        return collections.Counter(dict(zip(data[0], data[1])))
    if t == "collections.deque":
        return collections.deque(data)
    raise ValueError(f"pyarrow stored a {t!r} object through a custom serializer; trainbus reads NumPy arrays, "
                     "scalars, Python built-ins, OrderedDict, Counter and deque from pyarrow blobs")


def _pa() -> Any:
    try:
        import pyarrow
    except ImportError:
        raise ImportError("this datapoint was written by tensorpack with TENSORPACK_SERIALIZE=pyarrow; reading it "
                          "needs pyarrow: pip install 'trainbus-dataflow[tensorpack]' (or pip install pyarrow)") from None
    return pyarrow


def _read_stream(pa: Any, reader: Any, pos: int) -> Any:
    """The record batch of the Arrow IPC stream at ``pos``, or ``None`` if there is none there."""
    try:
        reader.seek(pos)
        msg = pa.ipc.read_message(reader)
        if msg.type != "schema":
            return None
        schema = pa.ipc.read_schema(msg)
        if len(schema) != 1 or not pa.types.is_union(schema.field(0).type):
            return None
    except (pa.ArrowException, EOFError, ValueError, OSError):
        return None
    try:
        return pa.ipc.read_record_batch(pa.ipc.read_message(reader), schema)
    except pa.ArrowException as e:
        if "validity bitmap" in str(e):
            raise ValueError("the blob was written by pyarrow < 1.0 and holds None values, which it stored as "
                             "nulls of the union; current pyarrow refuses to read those (re-write the data "
                             "with tensorpack's pickle or msgpack serializer)") from None
        raise ValueError(f"its Arrow record batch does not read: {e}") from None


def _count_refs(arr: Any, counts: dict) -> None:
    """Add up how many tensors, ndarrays and buffers the union ``arr`` (and those nested in it) refer to."""
    for j in range(arr.type.num_fields):
        kind, child = _kind_and_child(arr.type.field(j), arr.field(j))
        if kind in (_TENSOR, _NDARRAY, _BUFFER):
            counts[kind] += len(child)
        elif kind in (_LIST, _TUPLE, _SET):
            _count_refs(child.values, counts)
        elif kind == _DICT:
            _count_refs(child.values.field("keys"), counts)
            _count_refs(child.values.field("vals"), counts)


def _message_starts(mv: memoryview, pos: int) -> list[int]:
    """Where the next IPC message after ``pos`` may start. Writers padded with zero bytes to an 8- or
    64-byte boundary, or not at all; a message in the current framing starts with 0xFFFFFFFF."""
    p = pos
    while p < len(mv) and mv[p] == 0:
        p += 1
    cands = [p] if p < len(mv) and mv[p] == 0xFF else []
    return list(dict.fromkeys(cands + [pos, pos + (-pos % 8), pos + (-pos % 64)]))


def loads_pyarrow(buf: Any) -> Any:
    """Decode what ``pyarrow.serialize(obj).to_buffer()`` wrote, pyarrow 0.13 to 11: the layouts differ
    in the header (two to four int32 counts), the stream framing and metadata version, and the
    names of the union's children; each is recognised."""
    pa = _pa()
    if len(buf) < 24:
        raise ValueError(f"{len(buf)} bytes are too short for a pyarrow.serialize blob")
    # the blob is copied once so that arrays made from it are writable and outlive ``buf``
    raw = bytearray(buf)
    mv = memoryview(raw)
    data = pa.py_buffer(raw)
    base = data.address
    reader = pa.BufferReader(data)
    # the stream follows the int32 counts (and padding to 8 bytes): at 16, or at 8 for two counts
    batch = _read_stream(pa, reader, 16)
    if batch is None:
        batch = _read_stream(pa, reader, 8)
    if batch is None:
        raise ValueError("no Arrow IPC stream describing the object after its header")
    try:
        pa.ipc.read_message(reader)  # the end-of-stream marker
    except (EOFError, pa.ArrowException):
        pass
    col = batch.column(0)
    counts = {_TENSOR: 0, _NDARRAY: 0, _BUFFER: 0}
    _count_refs(col, counts)

    def tensors(n: int) -> list:
        out = []
        for _ in range(n):
            starts, err = _message_starts(mv, reader.tell()), None
            for start in starts:
                reader.seek(start)
                try:
                    view = pa.ipc.read_tensor(reader).to_numpy()  # read-only, inside ``raw``
                    break
                except (pa.ArrowException, EOFError, ValueError, OSError) as e:
                    err = e
            else:
                raise ValueError(f"no tensor message at offset {starts[0]}: {err}")
            if view.size == 0:
                out.append(np.empty(view.shape, view.dtype))
                continue
            # the same array as a writable view of ``raw``; a C-contiguous copy when strided
            arr = np.ndarray(view.shape, view.dtype, buffer=raw, offset=view.ctypes.data - base,
                             strides=view.strides)
            out.append(arr if arr.flags.c_contiguous else np.ascontiguousarray(arr))
        return out

    tens = tensors(counts[_TENSOR])
    nds = tensors(counts[_NDARRAY])
    bufs = _read_buffers(mv, reader.tell(), counts[_BUFFER])
    top = _PyarrowBlob(tens, nds, bufs).seq(col)
    if len(top) != 1:
        raise ValueError(f"the pyarrow blob's top-level sequence has {len(top)} elements, not 1")
    return top[0]


def _read_buffers(mv: memoryview, pos: int, n: int) -> list:
    """``n`` buffers (int64 size, then the bytes) ending the blob, starting at ``pos`` or at the next
    8- or 64-byte boundary (the padding after the last tensor differs between pyarrow versions)."""
    if n == 0:
        return []
    for start in dict.fromkeys((pos, pos + (-pos % 8), pos + (-pos % 64))):
        out, p = [], start
        try:
            for _ in range(n):
                (size,) = struct.unpack_from("<q", mv, p)
                if size < 0 or p + 8 + size > len(mv):
                    raise ValueError
                out.append(bytes(mv[p + 8:p + 8 + size]))
                p += 8 + size
        except (ValueError, struct.error):
            continue
        if p == len(mv):
            return out
    raise ValueError(f"the {n} raw buffers announced do not fill the end of the pyarrow blob")


# ---------------------------------------------------------------- entry points

def loads(buf: Any, trust_pickle: bool = False) -> Any:
    """Decode a datapoint in any of tensorpack's encodings (see the module docstring)."""
    mv = memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    fmt = detect(mv)
    if fmt == "pickle":
        return loads_pickle(mv, trust_pickle)
    if fmt == "pyarrow":
        return loads_pyarrow(mv)
    if fmt == "msgpack":
        return loads_msgpack(mv)
    raise ValueError("an empty buffer is no datapoint")


def dumps(obj: Any, fmt: str = "pickle") -> bytes:
    """Encode ``obj`` the way tensorpack 0.11 did: ``"pickle"`` (its default, protocol 4 so that
    Python 3.4+ reads it) or ``"msgpack"`` (read by tensorpack run with ``TENSORPACK_SERIALIZE=msgpack``)."""
    if fmt == "pickle":
        return pickle.dumps(obj, protocol=4)
    if fmt == "msgpack":
        return msgpack.packb(obj, use_bin_type=True, default=_mn_default)
    raise ValueError(f"unknown tensorpack encoding {fmt!r}; choose one of {FORMATS}")
