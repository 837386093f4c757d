"""Readers of storage formats (``trainbus.dataflow.format``): LMDB databases, HDF5 files, Caffe's
LMDB datums and SVMlight text files."""

from __future__ import annotations

import os
import struct
import threading
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from trainbus.utils import logger
from trainbus.utils.serialize import loads
from trainbus_dataflow._proto import iter_fields
from trainbus_dataflow.base import DataFlowReentrantGuard, RNGDataFlow
from trainbus_dataflow.common import MapData

__all__ = ["HDF5Data", "LMDBData", "LMDBDataDecoder", "CaffeLMDB", "SVMLightData"]

_KEYS = b"__keys__"
_MAP_SIZE = 1099511627776 * 2  # only address space: LMDB files grow as they are written


class HDF5Data(RNGDataFlow):
    """Zip the datasets ``data_paths`` of an HDF5 file: produces ``[f[p][k] for p in data_paths]``
    for every index ``k``. Everything is read into memory when constructed."""

    def __init__(self, filename: str, data_paths: Sequence[str], shuffle: bool = True) -> None:
        """
        Args:
            filename: the ``.h5`` file.
            data_paths: the HDF5 dataset paths to zip, e.g. ``['images', 'labels']``; all must
                have the same length.
            shuffle: shuffle every pass.
        """
        import h5py

        if not os.path.isfile(filename):
            raise FileNotFoundError(f"HDF5Data: the file {filename} does not exist")
        if isinstance(data_paths, str) or not data_paths:
            raise ValueError(f"HDF5Data({filename!r}): data_paths must be a non-empty list of dataset paths, "
                             f"got {data_paths!r}")
        logger.info(f"Loading {filename} to memory...")
        with h5py.File(filename, "r") as f:
            missing = [k for k in data_paths if k not in f]
            if missing:
                raise KeyError(f"HDF5Data: {filename} has no dataset {missing}; it has {sorted(_h5_paths(f))}")
            self.dps = [f[k][...] for k in data_paths]
        lens = [len(k) for k in self.dps]
        if any(n != lens[0] for n in lens):
            raise ValueError(f"HDF5Data: the datasets {list(data_paths)} of {filename} have different lengths {lens}")
        self._size = lens[0]
        self.shuffle = shuffle

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[list]:
        idxs = np.arange(self._size)
        if self.shuffle:
            self.rng.shuffle(idxs)
        for k in idxs:
            yield [dp[k] for dp in self.dps]


def _h5_paths(f: Any) -> list[str]:
    out: list[str] = []
    f.visit(lambda name: out.append(name) if hasattr(f[name], "shape") else None)
    return out


# LMDB's meta pages (pages 0 and 1, 64-bit build): a 16-byte page header, then magic, version,
# address, map size, the free and main DB records (48 bytes each; the free DB's first field holds
# the page size), the last used page number and the transaction id.
_MDB_MAGIC = 0xBEEFC0DE
_MDB_META = struct.Struct("<IIQQ96xQQ")
_PAGE_HDR = 16


def _lmdb_file(path: str) -> str:
    """The database file of an LMDB path: ``path/data.mdb`` for a directory, else ``path``."""
    return os.path.join(path, "data.mdb") if os.path.isdir(path) else path


def _check_lmdb_file(path: str, who: str) -> int:
    """Check that the LMDB file of ``path`` holds every page its newest meta page declares (a shorter
    file would make reading it die of SIGBUS). Returns the file size; raises ``ValueError`` naming
    the file otherwise."""
    fname = _lmdb_file(path)
    try:
        with open(fname, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(_PAGE_HDR + _MDB_META.size)
            metas = []
            if len(head) == _PAGE_HDR + _MDB_META.size:
                metas.append(_MDB_META.unpack_from(head, _PAGE_HDR))
                psize = struct.unpack_from("<I", head, _PAGE_HDR + 24)[0]
                if metas[0][0] == _MDB_MAGIC and psize >= 512 and psize & (psize - 1) == 0:
                    f.seek(psize)
                    second = f.read(_PAGE_HDR + _MDB_META.size)
                    if len(second) == len(head):
                        metas.append(_MDB_META.unpack_from(second, _PAGE_HDR))
    except OSError as e:
        raise ValueError(f"{who}: cannot read the LMDB file {fname}: {e}") from None
    valid = [m for m in metas if m[0] == _MDB_MAGIC]
    if not valid:
        raise ValueError(f"{who}: {fname} ({size} bytes) is not an LMDB file (no LMDB meta page at its start); the "
                         "file is damaged or of another format")
    psize = struct.unpack_from("<I", head, _PAGE_HDR + 24)[0]
    newest = max(valid, key=lambda m: m[5])
    need = (newest[4] + 1) * psize
    if size < need:
        raise ValueError(f"{who}: the LMDB file {fname} is truncated: it has {size} bytes but its meta page declares "
                         f"{newest[4] + 1} pages of {psize} bytes ({need} bytes); copy it again from its source, "
                         "or write it again (LMDBSerializer.save)")
    return size


# py-lmdb refuses to open one environment twice in a process: readers of the same database share one
# read-only environment, closed when its last reader closes.
_ENVS: dict[str, list] = {}
_ENVS_LOCK = threading.Lock()


def _acquire_env(path: str) -> Any:
    import lmdb

    key = os.path.realpath(path)
    with _ENVS_LOCK:
        entry = _ENVS.get(key)
        if entry is None:
            env = lmdb.open(path, subdir=os.path.isdir(path), readonly=True, lock=False, readahead=True,
                            map_size=_MAP_SIZE, max_readers=100)
            entry = _ENVS[key] = [env, 0]
        entry[1] += 1
        return entry[0]


def _release_env(path: str) -> None:
    key = os.path.realpath(path)
    with _ENVS_LOCK:
        entry = _ENVS.get(key)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] <= 0:
            del _ENVS[key]
            entry[0].close()


class LMDBData(RNGDataFlow):
    """Read an LMDB database and produce ``[key, value]`` raw bytes pairs (decode them with
    :class:`LMDBDataDecoder` or a mapper).

    Without shuffling, the records come in key order through a cursor. With shuffling, the keys
    (``keys=``, or the ``__keys__`` record that :meth:`LMDBSerializer.save` writes, or else every
    key of the database) are shuffled every pass and the values looked up in batches. The
    ``__keys__`` record itself is never produced and not counted in ``len()``.

    The file is checked against truncation whenever it is opened (here and by every
    ``reset_state()``): a file shorter than its LMDB header declares raises ``ValueError`` naming
    it, where reading it would kill the process with SIGBUS.
    """

    #: the name that errors about the file start with
    _WHO = "LMDBData"

    def __init__(self, lmdb_path: str, shuffle: bool = True, keys: Sequence[bytes] | str | None = None) -> None:
        """
        Args:
            lmdb_path: a directory holding ``data.mdb``, or an LMDB file.
            shuffle: shuffle every pass.
            keys: the keys to read when shuffling: a list, or a format string such as
                ``'{:0>8d}'`` formatted with 0 .. len-1. Defaults to the ``__keys__`` record, or to
                all keys of the database (slow to collect on large databases).
        """
        self._lmdb_path = lmdb_path
        self._shuffle = shuffle
        if not (os.path.isfile(lmdb_path) or os.path.isfile(os.path.join(lmdb_path, "data.mdb"))):
            raise FileNotFoundError(
                f"LMDBData: no LMDB database at {lmdb_path} (neither a file nor a directory holding data.mdb); "
                "write one with LMDBSerializer.save(df, path)")
        self._open_lmdb()
        try:
            self._size = self._txn.stat()["entries"]
            self._set_keys(keys)
        finally:
            # do not carry an open environment into forked workers: reset_state() reopens it
            self._close_lmdb()
        logger.info(f"Found {self._size} entries in {self._lmdb_path}")

    def _set_keys(self, keys: Sequence[bytes] | str | None) -> None:
        stored = self._txn.get(_KEYS)
        self.keys: list[bytes] | None = None
        if stored is not None:
            self.keys = list(loads(stored))
            self._size -= 1
        if self._shuffle:
            if keys is None:
                if self.keys is None:
                    logger.warn(f"LMDBData: {self._lmdb_path} has no __keys__ record; reading every key (slow on "
                                "large databases; pass keys= to avoid it).")
                    self.keys = [k for k in self._txn.cursor().iternext(keys=True, values=False) if k != _KEYS]
            elif isinstance(keys, str):
                self.keys = [keys.format(x).encode("ascii") for x in range(self._size)]
            else:
                self.keys = [k.encode("ascii") if isinstance(k, str) else bytes(k) for k in keys]

    def _open_lmdb(self) -> None:
        # every time the file is opened: one truncated meanwhile would kill the process with SIGBUS
        self._file_size = _check_lmdb_file(self._lmdb_path, self._WHO)
        self._lmdb = _acquire_env(self._lmdb_path)
        self._txn = self._lmdb.begin()

    def _close_lmdb(self) -> None:
        self._txn.abort()
        _release_env(self._lmdb_path)
        del self._lmdb
        del self._txn

    def reset_state(self) -> None:
        """Seed the RNG and open the database in the calling process."""
        self._guard = DataFlowReentrantGuard()
        super().reset_state()
        if hasattr(self, "_lmdb"):
            self._close_lmdb()
        self._open_lmdb()

    def __len__(self) -> int:
        return self._size

    def _check_open(self) -> None:
        if not hasattr(self, "_txn"):
            raise RuntimeError(f"{type(self).__name__}({self._lmdb_path!r}): call reset_state() before iterating")

    def _records(self, txn: Any = None) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` pairs of one pass, in key order or shuffled, read through ``txn`` (the
        reader's own transaction when ``None``)."""
        if txn is None:
            txn = self._txn
        if not self._shuffle:
            for k, v in txn.cursor().iternext(keys=True, values=True):
                if k != _KEYS:
                    yield k, v
            return
        keys = self.keys
        self.rng.shuffle(keys)
        get = txn.get
        for k in keys:
            v = get(k)
            if v is None:
                raise self._missing_key(k)
            yield k, v

    def _missing_key(self, key: bytes) -> KeyError:
        return KeyError(f"{type(self).__name__}: the key {key!r} is not in {self._lmdb_path}; the keys given "
                        "(keys= or the __keys__ record) do not match the database")

    def __iter__(self) -> Iterator[list]:
        self._check_open()
        with self._guard:
            for k, v in self._records():
                yield [k, v]


class LMDBDataDecoder(MapData):
    """An :class:`LMDBData` whose ``(key, value)`` pairs go through ``decoder(key, value)``; a
    ``None`` result is dropped."""

    def __init__(self, lmdb_data: LMDBData, decoder: Callable[[bytes, bytes], Any]) -> None:
        """
        Args:
            lmdb_data: the :class:`LMDBData` to decode.
            decoder: ``(key, value) -> datapoint or None``.
        """
        if not callable(decoder):
            raise TypeError(f"LMDBDataDecoder: decoder must be callable, got {decoder!r}")
        self.decoder = decoder
        super().__init__(lmdb_data, lambda dp: decoder(dp[0], dp[1]))


def _parse_datum(buf: bytes) -> tuple[np.ndarray, int]:
    """Decode a Caffe ``Datum`` (channels=1, height=2, width=3, data=4, label=5, float_data=6,
    encoded=7) into a CHW array and its label."""
    ints = {1: 0, 2: 0, 3: 0, 5: 0, 7: 0}
    data = b""
    floats: list[np.ndarray] = []
    for field, wire, value in iter_fields(buf):
        if wire == 0:
            if value >= 1 << 63:
                value -= 1 << 64
            ints[field] = value
        elif field == 4 and wire == 2:
            data = value
        elif field == 6 and wire in (2, 5):
            floats.append(np.frombuffer(value, "<f4"))
    if ints[7]:
        raise ValueError("encoded (compressed) datums are not supported")
    shape = (ints[1], ints[2], ints[3])
    arr = np.frombuffer(data, np.uint8) if data else (np.concatenate(floats) if floats else np.zeros(0, np.uint8))
    return arr.reshape(shape), int(ints[5])


def CaffeLMDB(lmdb_path: str, shuffle: bool = True, keys: Sequence[bytes] | str | None = None) -> LMDBDataDecoder:
    """Read a Caffe LMDB whose values are ``caffe.Datum`` messages: produces ``[HWC image, label]``.

    Datums that cannot be decoded are skipped with a warning. (Caffe's LMDBs store raw pixels,
    which makes them large and slow; prefer JPEG bytes in an :class:`LMDBSerializer` database.)

    Args:
        lmdb_path, shuffle, keys: as in :class:`LMDBData`; Caffe's tools write keys such as
            ``'{:0>8d}'``.
    """
    lmdb_data = LMDBData(lmdb_path, shuffle, keys)
    warned: set[bytes] = set()

    def decoder(k: bytes, v: bytes) -> list | None:
        try:
            img, label = _parse_datum(v)
        except ValueError as e:
            if not warned:
                logger.warn(f"CaffeLMDB: cannot read the record {k!r} of {lmdb_path} ({e}); skipping such records")
            warned.add(k)
            return None
        return [img.transpose(1, 2, 0), label]

    return LMDBDataDecoder(lmdb_data, decoder)


class SVMLightData(RNGDataFlow):
    """Read ``X, y`` from an SVMlight/libsvm text file (with scikit-learn's reader) and produce
    ``[X_i, y_i]``, ``X_i`` a dense float64 row."""

    def __init__(self, filename: str, shuffle: bool = True) -> None:
        """
        Args:
            filename: the SVMlight file.
            shuffle: shuffle every pass.
        """
        try:
            import sklearn.datasets
        except ImportError as e:
            raise ImportError("SVMLightData reads files with scikit-learn: pip install scikit-learn") from e
        if not os.path.isfile(filename):
            raise FileNotFoundError(f"SVMLightData: the file {filename} does not exist")
        X, self.y = sklearn.datasets.load_svmlight_file(filename)
        self.X = np.asarray(X.todense())
        self.shuffle = shuffle

    def __len__(self) -> int:
        return len(self.y)

    def __iter__(self) -> Iterator[list]:
        idxs = np.arange(len(self))
        if self.shuffle:
            self.rng.shuffle(idxs)
        for i in idxs:
            yield [self.X[i, :], self.y[i]]
