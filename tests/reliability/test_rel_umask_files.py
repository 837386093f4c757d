"""Every file trainbus writes gets the permissions the process umask gives (``0o666`` less the
umask), also when it is written atomically through a temporary file: checkpoints and their
``checkpoint`` list, callback-state files, ``graph-*.meta``, ``stats.json``, CSV, event files,
best-model copies, the log file, images and downloads."""

from __future__ import annotations

import os
import stat

import numpy as np
import pytest

import trainbus
from trainbus.callbacks import CallbackFactory
from trainbus.testing import train_tiny
from trainbus.utils import logger
from trainbus.utils.fs import atomic_write_bytes, atomic_write_text, current_umask, default_file_mode, download

cbs = trainbus.callbacks


@pytest.fixture(params=[0o022, 0o027, 0o002], ids=["022", "027", "002"])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _modes(root):
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(dirpath, f)
            out[os.path.relpath(p, root)] = stat.S_IMODE(os.stat(p).st_mode)
    return out


def test_current_umask_is_read_without_changing_it(umask):
    assert current_umask() == umask
    assert default_file_mode() == 0o666 & ~umask
    assert os.umask(umask) == umask  # unchanged by reading it


def test_atomic_writes_and_downloads_follow_the_umask(umask, tmp_path):
    atomic_write_bytes(str(tmp_path / "a.bin"), b"x")
    atomic_write_text(str(tmp_path / "b.txt"), "y")
    atomic_write_text(str(tmp_path / "b.txt"), "replaced")  # replacing keeps the umask's mode too
    src = tmp_path / "src.dat"
    src.write_bytes(b"0123456789")
    download(src.as_uri(), str(tmp_path / "dl"), expect_size=10)
    modes = _modes(tmp_path)
    want = 0o666 & ~umask
    assert modes == {"a.bin": want, "b.txt": want, "src.dat": want, os.path.join("dl", "src.dat"): want}, \
        {k: oct(v) for k, v in modes.items()}


def test_every_file_of_a_training_run_follows_the_umask(umask, tmp_path):
    d = tmp_path / "log"
    logger.set_logger_dir(str(d), action="k")
    put = CallbackFactory(trigger=lambda cb: cb.trainer.monitors.put_scalar("val", 1.0 / cb.epoch_num))
    image = cbs.DumpTensorAsImage("W", map_func=lambda w: np.abs(w))  # a weight matrix as a gray image
    train_tiny(callbacks=[put, cbs.ModelSaver(), cbs.MinSaver("val"), image],
               monitors=[cbs.JSONWriter(), cbs.CSVWriter(), cbs.TFEventWriter()], max_epoch=2)
    modes = _modes(d)
    names = sorted(modes)
    # the run wrote every kind of file the guarantee names
    for pattern in ("checkpoint", "model-16.index", "model-16.data-00000-of-00001", "model-16.trainbus.json",
                    "stats.json", "log.log", "min-val.tfmodel.index"):
        assert pattern in names, names
    for suffix in (".meta", ".csv", ".png"):
        assert any(n.endswith(suffix) for n in names), (suffix, names)
    assert any("tfevents" in n for n in names), names
    want = 0o666 & ~umask
    wrong = {n: oct(m) for n, m in modes.items() if m != want}
    assert wrong == {}, f"expected {oct(want)} for every file"
