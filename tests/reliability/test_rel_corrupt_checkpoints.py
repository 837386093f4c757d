"""Damaged checkpoints: every restore path reports one ``DamagedCheckpointError`` naming the file and
what is wrong with it; ``AutoResumeTrainConfig`` falls back to the newest checkpoint that reads
completely and says so; a failed save (disk full) leaves the previous checkpoint usable."""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil

import numpy as np
import pytest

import trainbus
from trainbus.testing import TinyModel, tiny_dataflow, train_tiny
from trainbus.tfutils.sessinit import SaverRestore, SaverRestoreRelaxed, SmartInit, get_model_loader
from trainbus.utils import logger
from trainbus.checkpoint import DamagedCheckpointError
from trainbus.utils.stats import CorruptStatsError

from damage import flip_byte, truncate

cbs = trainbus.callbacks
DATA = ".data-00000-of-00001"


class Counter(trainbus.callbacks.Callback):
    """Counts steps; its count is saved with every checkpoint."""

    def __init__(self) -> None:
        self.steps = 0

    def _trigger_step(self) -> None:
        self.steps += 1

    def _state_dict(self) -> dict:
        return {"steps": self.steps}

    def _load_state_dict(self, state: dict) -> None:
        self.steps = int(state["steps"])


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """A directory with the checkpoints model-8, model-16 and model-24 of a 3-epoch run."""
    d = tmp_path_factory.mktemp("pristine")
    train_tiny(callbacks=[Counter(), cbs.ModelSaver(max_to_keep=3, checkpoint_dir=str(d))], max_epoch=3)
    assert sorted(f for f in os.listdir(d) if f.endswith(".index")) == ["model-16.index", "model-24.index",
                                                                       "model-8.index"]
    return d


@pytest.fixture()
def ckdir(pristine, tmp_path):
    d = tmp_path / "ck"
    shutil.copytree(pristine, d)
    return d


# each: how to damage model-24 (or the list), the damaged file, words of the problem
DAMAGES = {
    "index truncated": (lambda d: truncate(d / "model-24.index"), "model-24.index", "is truncated"),
    "index emptied": (lambda d: truncate(d / "model-24.index", 0), "model-24.index", "is empty (truncated)"),
    "index missing": (lambda d: os.remove(d / "model-24.index"), "model-24.index", "is missing"),
    "data truncated": (lambda d: truncate(d / f"model-24{DATA}"), f"model-24{DATA}", "is truncated"),
    "data checksum": (lambda d: flip_byte(d / f"model-24{DATA}"), f"model-24{DATA}", "fails its checksum"),
    "data missing": (lambda d: os.remove(d / f"model-24{DATA}"), f"model-24{DATA}", "is missing"),
    "state file truncated": (lambda d: truncate(d / "model-24.trainbus.json"), "model-24.trainbus.json",
                             "is truncated or not valid JSON"),
    "state file emptied": (lambda d: truncate(d / "model-24.trainbus.json", 0), "model-24.trainbus.json",
                           "is empty (truncated)"),
}


def _restore(init):
    return train_tiny(max_epoch=4, starting_epoch=4, session_init=init)


def _assert_clear(err, file, problem):
    msg = str(err)
    assert file in msg and problem in msg, msg
    advice = ("Resume from an older checkpoint", "restore the file from a backup", "Give an existing checkpoint prefix")
    assert any(a in msg for a in advice), msg  # says what to do
    assert "\n" not in msg  # one line, not TensorFlow's trace
    assert err.__cause__ is None and err.__suppress_context__ or err.__context__ is None


@pytest.mark.parametrize("kind", sorted(DAMAGES))
def test_saver_restore_names_the_damaged_file_and_the_problem(ckdir, kind):
    damage, file, problem = DAMAGES[kind]
    damage(ckdir)
    with pytest.raises(DamagedCheckpointError) as info:
        _restore(SaverRestore(str(ckdir / "model-24")))
    _assert_clear(info.value, file, problem)
    assert info.value.file.endswith(file) and info.value.checkpoint == str(ckdir / "model-24")


@pytest.mark.parametrize("kind", ["data checksum", "data truncated", "index truncated", "index missing",
                                  "state file truncated"])
@pytest.mark.parametrize("loader", ["SaverRestoreRelaxed", "SmartInit", "get_model_loader", "SmartInit-dir"])
def test_every_restore_helper_reports_the_same_error(ckdir, kind, loader):
    damage, file, problem = DAMAGES[kind]
    damage(ckdir)
    with pytest.raises(DamagedCheckpointError) as info:
        if loader == "SaverRestoreRelaxed":
            _restore(SaverRestoreRelaxed(str(ckdir / "model-24")))
        elif loader == "SmartInit":
            _restore(SmartInit(str(ckdir / "model-24"), ignore_mismatch=True))
        elif loader == "get_model_loader":
            _restore(get_model_loader(str(ckdir / f"model-24{DATA}")))
        else:
            _restore(SmartInit(str(ckdir)))  # the directory's latest checkpoint
    _assert_clear(info.value, file, problem)


def test_damaged_checkpoint_list(ckdir):
    truncate(ckdir / "checkpoint", 0.3)
    with pytest.raises(DamagedCheckpointError, match=r"checkpoint is truncated or not a checkpoint list"):
        SmartInit(str(ckdir))
    (ckdir / "checkpoint").write_text('model_checkpoint_path: "model-99"\nall_model_checkpoint_paths: "model-99"\n')
    with pytest.raises(DamagedCheckpointError) as info:
        SaverRestore(str(ckdir / "checkpoint"))
    assert "names model-99 as the latest checkpoint" in str(info.value)
    assert str(ckdir / "model-99.index") in str(info.value)
    # an explicit intact prefix still restores
    tr = _restore(SaverRestore(str(ckdir / "model-16")))
    assert tr.global_step == 16 + 8


def test_truncated_graph_meta_file_does_not_matter(ckdir):
    for f in os.listdir(ckdir):
        if f.endswith(".meta"):
            truncate(ckdir / f, 0.1)
    assert _restore(SaverRestore(str(ckdir))).global_step == 32


# ---------------------------------------------------------------------------------- AutoResumeTrainConfig
def _auto_resume(d, max_epoch=4, restored=None):
    logger.set_logger_dir(str(d), action="k")
    counter = Counter()

    def grab(cb):  # the weights right after the restore
        if restored is not None:
            variables = cb.graph.get_collection("variables")
            restored.update(zip((v.op.name for v in variables), cb.trainer.sess.run(variables)))

    cfg = trainbus.AutoResumeTrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), max_epoch=max_epoch,
                                         callbacks=[counter, trainbus.callbacks.CallbackFactory(before_train=grab)],
                                         extra_callbacks=[], monitors=[])
    trainer = trainbus.SimpleTrainer()
    trainbus.launch_train_with_config(cfg, trainer)
    return cfg, trainer, counter


def _weights(prefix):
    import tensorflow as tf

    r = tf.train.load_checkpoint(prefix)
    return {n: r.get_tensor(n) for n in sorted(r.get_variable_to_shape_map())}


@pytest.mark.parametrize("kind", ["data checksum", "data truncated", "index missing", "state file truncated"])
def test_auto_resume_falls_back_to_the_newest_intact_checkpoint(ckdir, kind, tb_log):
    damage, file, problem = DAMAGES[kind]
    damage(ckdir)
    at_16 = _weights(str(ckdir / "model-16"))
    restored = {}
    cfg, trainer, counter = _auto_resume(ckdir, restored=restored)
    assert cfg.starting_epoch == 3 and cfg.session_init.path == str(ckdir / "model-16")
    assert trainer.global_step == 32 and counter.steps == 16 + 16  # resumed at step 16 with its state
    warnings = [r.getMessage() for r in tb_log if r.levelno == logging.WARNING]
    assert any(file in w and problem in w and "Not resuming from" in w for w in warnings), warnings
    assert sum(f"Resuming from {ckdir / 'model-16'}, the newest checkpoint that reads completely" in w
               for w in warnings) == 1
    assert sorted(restored) == sorted(at_16)
    for name, value in at_16.items():  # the weights are model-16's
        np.testing.assert_array_equal(restored[name], value, err_msg=name)


def test_auto_resume_with_a_damaged_list_finds_checkpoints_by_name(ckdir, tb_log):
    truncate(ckdir / "checkpoint", 0.3)
    cfg, trainer, _ = _auto_resume(ckdir)
    assert cfg.session_init.path == str(ckdir / "model-24") and trainer.global_step == 32
    assert any("Looking for checkpoints by their file names" in r.getMessage() for r in tb_log)


def test_auto_resume_skips_a_listed_checkpoint_that_is_gone(ckdir):
    (ckdir / "checkpoint").write_text('model_checkpoint_path: "model-99"\nall_model_checkpoint_paths: "model-16"\n'
                                      'all_model_checkpoint_paths: "model-99"\n')
    cfg, trainer, _ = _auto_resume(ckdir)
    assert cfg.session_init.path == str(ckdir / "model-16") and trainer.global_step == 32


def test_auto_resume_when_no_checkpoint_reads_completely(ckdir):
    for step in (8, 16, 24):
        flip_byte(ckdir / f"model-{step}{DATA}")
    before = sorted(os.listdir(ckdir))
    with pytest.raises(DamagedCheckpointError) as info:
        _auto_resume(ckdir)
    msg = str(info.value)
    assert all(f"model-{s}: fails its checksum" in msg for s in (8, 16, 24)), msg
    assert "start training afresh" in msg
    assert sorted(os.listdir(ckdir)) == before  # nothing written or removed


def test_auto_resume_with_a_truncated_stats_file_names_it_and_resumes_from_the_checkpoint(ckdir, tb_log):
    """A damaged stats.json does not stop the run: the epoch comes from the checkpoint, the
    damaged file is kept aside (named in one warning) and the run writes a fresh, valid one."""
    damaged = json.dumps([{"epoch_num": 1, "global_step": 8}])[:20]
    (ckdir / "stats.json").write_text(damaged)
    logger.set_logger_dir(str(ckdir), action="k")
    put = trainbus.callbacks.CallbackFactory(trigger=lambda cb: cb.trainer.monitors.put_scalar("x", 1.0))
    cfg = trainbus.AutoResumeTrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), max_epoch=4, callbacks=[put],
                                         extra_callbacks=[], monitors=[trainbus.callbacks.JSONWriter()])
    assert cfg.starting_epoch == 4
    trainbus.launch_train_with_config(cfg, trainbus.SimpleTrainer())
    warnings = [r.getMessage() for r in tb_log if r.levelname == "WARNING"]
    assert any(w.startswith(f"{ckdir / 'stats.json'} is not valid JSON (") and
               w.endswith("the epoch to resume from is taken from the checkpoint instead.") for w in warnings), warnings
    aside = [p for p in ckdir.iterdir() if p.name.startswith("stats.json.damaged-")]
    assert len(aside) == 1 and aside[0].read_text() == damaged
    assert any(w.startswith(f"JSONWriter: {ckdir / 'stats.json'} is not valid JSON (") and
               w.endswith(f"it is kept as {aside[0]} and this run writes a fresh stats.json.") for w in warnings), warnings
    fresh = json.loads((ckdir / "stats.json").read_text())
    assert [r["epoch_num"] for r in fresh] == [4]


# ---------------------------------------------------------------------------------- disk full while saving
def test_disk_full_while_saving_keeps_the_previous_checkpoint(tmp_path, monkeypatch, tb_log):
    import trainbus_saver._saver as saver_mod

    real_fsync = saver_mod._fsync_file

    def full_disk(path):
        if "model-16" in path:  # the second checkpoint: its data file was cut short, then the disk was full
            if path.endswith(DATA):
                truncate(path, 0.5)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        real_fsync(path)

    monkeypatch.setattr(saver_mod, "_fsync_file", full_disk)
    d = tmp_path / "ck"
    seen = {}

    def after_epoch_2(cb):
        if cb.epoch_num == 2:
            seen["files"] = sorted(os.listdir(d))
            seen["list"] = (d / "checkpoint").read_text()

    train_tiny(callbacks=[cbs.ModelSaver(checkpoint_dir=str(d)),
                          trainbus.callbacks.CallbackFactory(trigger=after_epoch_2)], max_epoch=3)
    assert not any(f.startswith("model-16") for f in seen["files"]), seen["files"]
    assert 'model_checkpoint_path: "model-8"' in seen["list"]
    errors = [r.getMessage() for r in tb_log if r.levelno == logging.ERROR]
    assert len(errors) == 1, errors
    assert "global_step 16" in errors[0] and "No space left on device" in errors[0]
    assert "names model-8 as the latest, which stays usable" in errors[0]
    SaverRestore(str(d / "model-8")).verify()
    # the next save worked and the list names both intact checkpoints
    text = (d / "checkpoint").read_text()
    assert 'model_checkpoint_path: "model-24"' in text and '"model-8"' in text and "model-16" not in text
    SaverRestore(str(d)).verify()


# ---------------------------------------------------------------------------------- read-only directory
READ_ONLY_SCRIPT = """
import sys
import trainbus
from trainbus.testing import train_tiny
from trainbus.tfutils.sessinit import SaverRestore
d = sys.argv[1]
tr = train_tiny(session_init=SaverRestore(d), max_epoch=4, starting_epoch=4)  # reading works
print("RESTORED", tr.global_step, flush=True)
try:
    train_tiny(callbacks=[trainbus.callbacks.ModelSaver(checkpoint_dir=d)], max_epoch=1)
except OSError as e:
    print("ERROR", e, flush=True)
"""


def _can_mount_read_only(tmp_path):
    import subprocess

    probe = tmp_path / "probe"
    probe.mkdir()
    r = subprocess.run(["unshare", "-m", "sh", "-c", 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1"',
                        "sh", str(probe)], capture_output=True, timeout=60)
    return r.returncode == 0


def test_read_only_checkpoint_dir_restores_and_refuses_to_save_clearly(ckdir, tmp_path):
    """A real read-only bind mount (a private mount namespace): restoring from it works, a
    ModelSaver writing to it stops at setup with one error naming the directory."""
    import subprocess
    import sys

    if shutil.which("unshare") is None or not _can_mount_read_only(tmp_path):
        pytest.skip("this machine does not allow a private read-only mount (unshare -m); "
                    "test_unwritable_checkpoint_dir_is_reported_at_setup covers the error")
    before = sorted(os.listdir(ckdir))
    r = subprocess.run(
        ["unshare", "-m", "sh", "-c",
         'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" "$1" && exec "$2" -c "$3" "$1"',
         "sh", str(ckdir), sys.executable, READ_ONLY_SCRIPT], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "RESTORED 32" in r.stdout
    assert f"ERROR [Errno 30] ModelSaver: cannot write checkpoints to {ckdir}: Read-only file system" in r.stdout
    assert sorted(os.listdir(ckdir)) == before


def test_unwritable_checkpoint_dir_is_reported_at_setup(ckdir, monkeypatch):
    import tempfile

    real = tempfile.mkstemp

    def read_only(*args, **kwargs):
        if str(kwargs.get("dir")) == str(ckdir):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", read_only)
    steps = []
    with pytest.raises(OSError) as info:
        train_tiny(callbacks=[trainbus.callbacks.CallbackFactory(before_train=lambda cb: steps.append(1)),
                              cbs.ModelSaver(checkpoint_dir=str(ckdir))], max_epoch=1)
    assert info.value.errno == errno.EROFS
    assert str(info.value) == (f"[Errno 30] ModelSaver: cannot write checkpoints to {ckdir}: Read-only file system. "
                               "Give a writable checkpoint_dir= (or log directory); nothing in that directory was "
                               "changed")
    assert steps == []  # refused before training started


# ---------------------------------------------------------------------------------- run files
RUN_FILE = """
[model]
class = "tinyrun:LinearNet"
args = {{ lr = 0.05 }}

[data]
function = "tinyrun:make_data"
args = {{ n = 32, batch = 8 }}

[[callbacks]]
name = "ModelSaver"
args = {{ max_to_keep = 3 }}

[train]
steps_per_epoch = 4
max_epoch = {epochs}
logdir = "{logdir}"
logdir_action = "k"
"""


def test_run_file_resumes_from_the_newest_intact_checkpoint(tmp_path, tb_log):
    import pathlib

    import tensorflow as tf

    from trainbus.runfile import train_from_file

    runfiles = pathlib.Path(__file__).resolve().parent.parent / "ecosystem" / "runfiles"
    (tmp_path / "tinyrun.py").write_text((runfiles / "tinyrun.py").read_text())
    log = tmp_path / "log"

    def train(epochs):
        path = tmp_path / "run.toml"
        path.write_text(RUN_FILE.format(epochs=epochs, logdir=log))
        try:
            return train_from_file(path)
        finally:
            logger._reset_for_tests()

    train(3)
    assert sorted(p.name for p in log.glob("model-*.index")) == ["model-12.index", "model-4.index", "model-8.index"]
    flip_byte(log / f"model-12{DATA}")
    del tb_log[:]
    trainer = train(4)
    out = "\n".join(r.getMessage() for r in tb_log)
    assert f"Not resuming from {log / 'model-12'}: checkpoint {log / 'model-12'} is damaged: " \
           f"{log / 'model-12'}{DATA} fails its checksum" in out, out[-3000:]
    assert f"Resuming from {log / 'model-8'}, the newest checkpoint that reads completely" in out
    assert "Setting starting_epoch to 3" in out
    assert trainer.global_step == 16
    assert tf.train.load_variable(str(log / "model-16"), "global_step") == 16
