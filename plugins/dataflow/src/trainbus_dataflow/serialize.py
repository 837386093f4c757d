"""Save a dataflow to a file and load it back (``trainbus.dataflow.serialize``).

Every ``save`` writes to a temporary name next to the destination and renames it into place once
complete, so a crash never leaves a file that loads as a whole dataset. Datapoints are encoded
with :mod:`trainbus.utils.serialize` (msgpack, NumPy arrays as raw bytes) for LMDB and TFRecord,
unless ``save`` is given ``format="tensorpack-pickle"`` or ``"tensorpack-msgpack"`` (files that
tensorpack 0.11 itself must read).

``load`` reads files that tensorpack 0.11 wrote as well: every value is decoded by
:func:`trainbus.utils.serialize.loads`, which recognises tensorpack's pickle, msgpack(-numpy) and
``pyarrow.serialize`` encodings. A damaged LMDB file (truncated, not an LMDB, a value that decodes
as nothing) raises one ``ValueError`` naming the file and, where known, the key.
"""

from __future__ import annotations

import functools
import os
import tempfile
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from trainbus.dataflow import is_dataflow
from trainbus.utils import logger
from trainbus.utils.fs import fsync_dir
from trainbus.utils.serialize import dumps, dumps_tensorpack, loads
from trainbus_dataflow.common import FixedSizeData
from trainbus_dataflow.format import _KEYS, _MAP_SIZE, HDF5Data, LMDBData, _lmdb_file
from trainbus_dataflow.raw import DataFromGenerator, DataFromList

__all__ = ["LMDBSerializer", "NumpySerializer", "TFRecordSerializer", "HDF5Serializer"]


def _check_df(df: Any, who: str) -> None:
    if not is_dataflow(df):
        raise TypeError(f"{who}: expected a DataFlow (an object with __iter__ and reset_state), got "
                        f"{type(df).__name__}; wrap a list with DataFromList(lst, shuffle=False)")


def _reset_df_and_get_size(df: Any) -> int:
    df.reset_state()
    try:
        return len(df)
    except (NotImplementedError, TypeError):
        return 0


def _progress(total: int, desc: str) -> Any:
    from tqdm import tqdm

    return tqdm(total=total or None, desc=desc, unit="dp", disable=None, leave=False)


def _temp_name(path: str) -> str:
    d, base = os.path.split(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + base + ".", suffix=".part", dir=d)
    os.close(fd)
    return tmp


def _commit(tmp: str, path: str) -> None:
    os.replace(tmp, path)
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def _discard(*paths: str) -> None:
    for p in paths:
        try:
            os.unlink(p)
        except OSError:
            pass


#: the encodings ``save(..., format=...)`` writes: trainbus's own, or tensorpack 0.11's
WRITE_FORMATS = ("trainbus", "tensorpack-pickle", "tensorpack-msgpack")


def _encoder(fmt: str, who: str) -> Callable[[Any], bytes]:
    if fmt == "trainbus":
        return dumps
    if fmt in ("tensorpack-pickle", "tensorpack-msgpack"):
        return functools.partial(dumps_tensorpack, fmt=fmt.split("-", 1)[1])
    raise ValueError(f"{who}: unknown format {fmt!r}; choose one of {list(WRITE_FORMATS)} ('trainbus' is the "
                     "fastest; the tensorpack ones are for files tensorpack itself reads)")


def _decoder(trust_pickle: bool) -> Callable[[Any], Any]:
    return functools.partial(loads, trust_pickle=True) if trust_pickle else loads


class _LMDBDeserialized(LMDBData):
    """An :class:`LMDBData` that produces the decoded datapoints directly (one loop, no mapper).

    Values are read as buffers into LMDB's memory map rather than copied to ``bytes`` first: each is
    decoded before the next read, and ``loads`` copies everything it returns out of its argument.
    The file is checked against truncation every time it is opened (reading pages past its end
    would kill the process with SIGBUS), and a value that does not decode raises naming its key.
    """

    _WHO = "LMDBSerializer.load"

    def __init__(self, lmdb_path: str, shuffle: bool = True, trust_pickle: bool = False) -> None:
        import lmdb

        self._decode = _decoder(trust_pickle)
        try:
            super().__init__(lmdb_path, shuffle=shuffle)
        except lmdb.Error as e:
            raise ValueError(f"{self._WHO}: the LMDB file {_lmdb_file(lmdb_path)} is damaged: "
                             f"{type(e).__name__}: {e}") from None

    def _open_lmdb(self) -> None:
        import lmdb

        try:
            super()._open_lmdb()  # checks the file against truncation first
        except lmdb.Error as e:
            raise ValueError(f"{self._WHO}: cannot open the LMDB file {_lmdb_file(self._lmdb_path)}: "
                             f"{type(e).__name__}: {e}") from None

    def _set_keys(self, keys: Any) -> None:
        try:
            super()._set_keys(keys)
        except ValueError as e:
            raise self._damaged(b"__keys__", e) from None

    def _damaged(self, key: bytes, why: Any) -> ValueError:
        return ValueError(f"{self._WHO}: the value of key {bytes(key)!r} in the LMDB file "
                          f"{_lmdb_file(self._lmdb_path)} is damaged or in an unknown format: {why}")

    def __iter__(self) -> Iterator[Any]:
        import lmdb

        self._check_open()
        decode = self._decode
        limit = self._file_size
        with self._guard:
            txn = self._lmdb.begin(buffers=True)
            try:
                for k, v in self._records(txn):
                    if len(v) > limit:
                        raise self._damaged(k, f"its length {len(v)} exceeds the file's size {limit}")
                    try:
                        dp = decode(v)
                    except ValueError as e:
                        raise self._damaged(k, e) from None
                    yield dp
            except lmdb.Error as e:
                raise ValueError(f"{self._WHO}: the LMDB file {_lmdb_file(self._lmdb_path)} is damaged: "
                                 f"{type(e).__name__}: {e}") from None
            finally:
                txn.abort()


class LMDBSerializer:
    """Serialize a dataflow into an LMDB database: keys ``b'00000000'``, ``b'00000001'`` ..., values
    the encoded datapoints, plus a ``__keys__`` record listing the keys.

    ::

        LMDBSerializer.save(df, "/data/train.lmdb")
        df = LMDBSerializer.load("/data/train.lmdb", shuffle=True)
    """

    @staticmethod
    def save(df: Any, path: str, write_frequency: int = 5000, format: str = "trainbus") -> None:
        """
        Args:
            df: the dataflow to serialize (``reset_state()`` is called here).
            path: an existing directory (the database becomes ``path/data.mdb``) or a file path.
            write_frequency: commit a transaction every this many datapoints.
            format: how values are encoded: ``"trainbus"`` (the default and fastest),
                ``"tensorpack-pickle"`` (what tensorpack 0.11 reads by default) or
                ``"tensorpack-msgpack"`` (tensorpack with ``TENSORPACK_SERIALIZE=msgpack``).

        Raises:
            FileExistsError: when the database already exists.
        """
        import lmdb

        _check_df(df, "LMDBSerializer.save")
        encode = _encoder(format, "LMDBSerializer.save")
        if write_frequency < 1:
            raise ValueError(f"LMDBSerializer.save: write_frequency must be >= 1, got {write_frequency}")
        final = os.path.join(path, "data.mdb") if os.path.isdir(path) else path
        if os.path.exists(final):
            raise FileExistsError(f"LMDBSerializer.save: the LMDB file {final} exists; delete it or choose "
                                  "another path")
        size = _reset_df_and_get_size(df)
        tmp = _temp_name(final)
        lock = tmp + "-lock"
        try:
            db = lmdb.open(tmp, subdir=False, map_size=_MAP_SIZE, readonly=False, meminit=False, map_async=True)
            try:
                idx = -1
                txn = db.begin(write=True)
                try:
                    with _progress(size, "LMDBSerializer") as bar:
                        for idx, dp in enumerate(df):
                            txn.put(b"%08d" % idx, encode(dp))
                            bar.update()
                            if (idx + 1) % write_frequency == 0:
                                txn.commit()
                                txn = db.begin(write=True)
                    keys = [b"%08d" % k for k in range(idx + 1)]
                    txn.put(_KEYS, encode(keys))
                    txn.commit()
                except BaseException:
                    txn.abort()
                    raise
                logger.info(f"Flushing database {final} ...")
                db.sync(True)
            finally:
                db.close()
            _commit(tmp, final)
        except BaseException:
            _discard(tmp)
            raise
        finally:
            _discard(lock)
        logger.info(f"LMDBSerializer: wrote {idx + 1} datapoints to {final}")

    @staticmethod
    def load(path: str, shuffle: bool = True, trust_pickle: bool = False) -> LMDBData:
        """A dataflow of the datapoints saved in ``path``, in order or shuffled every pass.

        Reads databases written by trainbus and by tensorpack 0.11 (any of its encodings, detected
        per value). Reading and decoding happen in one loop. To decode in parallel workers instead,
        read with :class:`LMDBData` and map ``lambda dp: loads(dp[1])``.

        Args:
            trust_pickle: unpickle tensorpack's pickled values without restriction. By default only
                NumPy, built-in and standard container types are rebuilt from a pickle (anything
                else could run code from the file) and other types raise.

        Raises:
            ValueError: the file is truncated, is not an LMDB file, or a value does not decode (the
                message names the file and the key).
        """
        return _LMDBDeserialized(path, shuffle=shuffle, trust_pickle=trust_pickle)


class NumpySerializer:
    """Serialize a whole dataflow into one ``.npz`` file (an object array, pickled). It holds the
    whole dataflow in memory and is much slower than :class:`LMDBSerializer`."""

    @staticmethod
    def save(df: Any, path: str) -> None:
        """
        Args:
            df: the dataflow to serialize.
            path: the output file (written exactly there; no ``.npz`` is appended).
        """
        _check_df(df, "NumpySerializer.save")
        size = _reset_df_and_get_size(df)
        buffer = []
        with _progress(size, "NumpySerializer") as bar:
            for dp in df:
                buffer.append(dp)
                bar.update()
        arr = np.empty(len(buffer), dtype=object)
        for i, dp in enumerate(buffer):
            arr[i] = dp
        tmp = _temp_name(path)
        try:
            with open(tmp, "wb") as f:
                np.savez_compressed(f, buffer=arr)
                f.flush()
                os.fsync(f.fileno())
            _commit(tmp, path)
        except BaseException:
            _discard(tmp)
            raise

    @staticmethod
    def load(path: str, shuffle: bool = True) -> DataFromList:
        """A :class:`DataFromList` of the saved datapoints.

        Also reads tensorpack's files: tensorpack stored ``np.asarray(datapoints, dtype=object)``,
        which NumPy turns into a 2-D object array when all datapoints have the same length; each
        row then comes back as a list of its components.
        """
        if not os.path.isfile(path):
            raise FileNotFoundError(f"NumpySerializer.load: the file {path} does not exist")
        import zipfile

        # np.load would unpickle a file that is no .npz at all: only zip archives are opened
        if not zipfile.is_zipfile(path):
            raise ValueError(f"NumpySerializer.load: {path} is not an .npz file (no zip archive); it is damaged or "
                             "of another format")
        try:
            with np.load(path, allow_pickle=True) as npz:
                arr = npz["buffer"]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
            raise ValueError(f"NumpySerializer.load: {path} is not a readable NumpySerializer file "
                             f"({type(e).__name__}: {e})") from None
        if arr.ndim >= 2:
            buffer = [list(row) for row in arr]
        else:
            buffer = list(arr)
        return DataFromList(buffer, shuffle=shuffle)


class TFRecordSerializer:
    """Serialize datapoints (encoded with :mod:`trainbus.utils.serialize`) as the records of a
    TFRecord file, readable by ``tf.data.TFRecordDataset``. TFRecord has no random access, so
    loading never shuffles; :class:`LMDBSerializer` is usually the better choice."""

    @staticmethod
    def save(df: Any, path: str, format: str = "trainbus") -> None:
        """
        Args:
            df: the dataflow to serialize.
            path: the output ``.tfrecord`` file.
            format: how records are encoded, as in :meth:`LMDBSerializer.save`.
        """
        import tensorflow as tf

        _check_df(df, "TFRecordSerializer.save")
        encode = _encoder(format, "TFRecordSerializer.save")
        size = _reset_df_and_get_size(df)
        tmp = _temp_name(path)
        try:
            with tf.io.TFRecordWriter(tmp) as writer, _progress(size, "TFRecordSerializer") as bar:
                for dp in df:
                    writer.write(encode(dp))
                    bar.update()
            _commit(tmp, path)
        except BaseException:
            _discard(tmp)
            raise

    @staticmethod
    def load(path: str, size: int | None = None, trust_pickle: bool = False) -> Any:
        """A dataflow of the saved datapoints, in file order (trainbus's or tensorpack's records).

        Args:
            size: the number of records. TFRecord files do not store it: without it the dataflow
                has no ``len()``.
            trust_pickle: as in :meth:`LMDBSerializer.load`.
        """
        if not os.path.isfile(path):
            raise FileNotFoundError(f"TFRecordSerializer.load: the file {path} does not exist")
        decode = _decoder(trust_pickle)

        def gen() -> Iterator[Any]:
            import tensorflow as tf

            i = -1
            try:
                for i, rec in enumerate(tf.compat.v1.io.tf_record_iterator(path)):
                    try:
                        dp = decode(rec)
                    except ValueError as e:
                        raise ValueError(f"TFRecordSerializer.load: record {i} of {path} is damaged or in an unknown "
                                         f"format: {e}") from None
                    yield dp
            except tf.errors.DataLossError as e:
                raise ValueError(f"TFRecordSerializer.load: {path} is damaged after record {i}: {e.message}") from None

        ds: Any = DataFromGenerator(gen)
        if size is not None:
            ds = FixedSizeData(ds, size)
        return ds


class HDF5Serializer:
    """Write the components of the datapoints as the datasets of an HDF5 file (one dataset per
    component, so every component must stack into one array)."""

    @staticmethod
    def save(df: Any, path: str, data_paths: Sequence[str]) -> None:
        """
        Args:
            df: the dataflow to serialize.
            path: the output ``.h5`` file.
            data_paths: one HDF5 dataset path per datapoint component, e.g. ``['image', 'label']``.
        """
        import h5py

        _check_df(df, "HDF5Serializer.save")
        if isinstance(data_paths, str) or not data_paths:
            raise ValueError(f"HDF5Serializer.save: data_paths must be a non-empty list of dataset paths, "
                             f"got {data_paths!r}")
        size = _reset_df_and_get_size(df)
        buffer: dict[str, list] = {k: [] for k in data_paths}
        with _progress(size, "HDF5Serializer") as bar:
            for i, dp in enumerate(df):
                if len(dp) != len(data_paths):
                    raise ValueError(f"HDF5Serializer.save: datapoint {i} has {len(dp)} components but data_paths "
                                     f"names {len(data_paths)}: {list(data_paths)}")
                for k, el in zip(data_paths, dp):
                    buffer[k].append(el)
                bar.update()
        tmp = _temp_name(path)
        try:
            with h5py.File(tmp, "w") as hf:
                for k in data_paths:
                    hf.create_dataset(k, data=np.asarray(buffer[k]))
            _commit(tmp, path)
        except BaseException:
            _discard(tmp)
            raise

    @staticmethod
    def load(path: str, data_paths: Sequence[str], shuffle: bool = True) -> HDF5Data:
        """An :class:`HDF5Data` zipping ``data_paths`` of ``path``."""
        return HDF5Data(path, data_paths, shuffle)
