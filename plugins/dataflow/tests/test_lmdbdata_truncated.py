"""A truncated LMDB file read by ``LMDBData``, ``LMDBDataDecoder`` and ``CaffeLMDB``: one
``ValueError`` naming the file and how to fix it, raised before the file is memory-mapped (reading
the missing pages would kill the process with SIGBUS), when constructed and by ``reset_state()``
after the file was cut meanwhile. Real LMDB files written with the ``lmdb`` package, cut with
``os.truncate``; everything runs in this process, which a SIGBUS would end."""

from __future__ import annotations

import os

import lmdb
import numpy as np
import pytest

from trainbus.dataflow import CaffeLMDB, LMDBData, LMDBDataDecoder

N, SIZE = 60, 4000  # 60 values of 4000 bytes: about 60 pages of 4 KiB


def _write(path: str, subdir: bool) -> dict[bytes, bytes]:
    """An LMDB database as Caffe's tools write one (keys ``'{:0>8d}'``), values random bytes."""
    rng = np.random.RandomState(3)
    items = {f"{i:08d}".encode(): rng.bytes(SIZE) for i in range(N)}
    env = lmdb.open(path, subdir=subdir, map_size=1 << 26)
    with env.begin(write=True) as txn:
        for k, v in items.items():
            txn.put(k, v)
    env.close()
    return items


def _assert_truncated(err: pytest.ExceptionInfo, fname: str, size: int, full: int) -> None:
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"LMDBData: the LMDB file {fname} is truncated: it has {size} bytes"), msg
    assert f"({full} bytes)" in msg  # what its meta page declares: the whole file as written
    assert msg.endswith("copy it again from its source, or write it again (LMDBSerializer.save)"), msg


@pytest.mark.parametrize("subdir", [True, False], ids=["directory", "file"])
def test_truncated_lmdb_is_named_when_constructed(tmp_path, subdir):
    path = str(tmp_path / ("db" if subdir else "db.lmdb"))
    items = _write(path, subdir)
    fname = os.path.join(path, "data.mdb") if subdir else path
    full = os.path.getsize(fname)
    assert full >= N * SIZE
    # intact, it reads back what was written
    ds = LMDBData(path, shuffle=False)
    ds.reset_state()
    assert [(bytes(k), bytes(v)) for k, v in ds] == sorted(items.items())
    del ds

    os.truncate(fname, full // 2)
    for make in (lambda: LMDBData(path, shuffle=False),
                 lambda: LMDBData(path, shuffle=True, keys="{:0>8d}"),
                 lambda: LMDBDataDecoder(LMDBData(path, shuffle=False), lambda k, v: [k, len(v)]),
                 lambda: CaffeLMDB(path, shuffle=False)):
        with pytest.raises(ValueError) as err:
            make()
        _assert_truncated(err, fname, full // 2, full)


def test_truncated_after_construction_is_caught_by_reset_state(tmp_path):
    path = str(tmp_path / "late.lmdb")
    _write(path, subdir=False)
    full = os.path.getsize(path)
    plain = LMDBData(path, shuffle=True, keys="{:0>8d}")
    decoded = LMDBDataDecoder(LMDBData(path, shuffle=False), lambda k, v: [k, len(v)])
    decoded.reset_state()
    assert sum(1 for _ in decoded) == N

    os.truncate(path, full - 3 * 4096)  # the last pages, where the B-tree's newest pages are
    with pytest.raises(ValueError) as err:
        plain.reset_state()
    _assert_truncated(err, path, full - 3 * 4096, full)
    with pytest.raises(ValueError) as err:
        decoded.reset_state()  # reopened: checked again
    _assert_truncated(err, path, full - 3 * 4096, full)
