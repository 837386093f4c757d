"""trainbus-saver: a checkpoint's files reach the disk before the state file names it, without
leaking a file descriptor per file; the defaults (each test kills a mutant the other tests missed)."""

from __future__ import annotations

import os

import pytest

import trainbus.callbacks as C
import trainbus.checkpoint as ckpt_mod
import trainbus_saver._saver as saver_mod
from trainbus.testing import train_tiny
from trainbus.utils import logger


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_every_checkpoint_file_is_fsynced_before_the_state_file_names_it(logdir, monkeypatch):
    events: list[tuple[str, str]] = []
    real_fsync, real_write = os.fsync, ckpt_mod.atomic_write_text

    def fsync(fd):
        try:
            events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        except OSError:
            pass
        return real_fsync(fd)

    def write(path, text, *args, **kwargs):
        events.append(("write", str(path)))
        return real_write(path, text, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(ckpt_mod, "atomic_write_text", write)
    train_tiny([C.ModelSaver(max_to_keep=2)], max_epoch=2, steps_per_epoch=2)
    state = str(logdir / "checkpoint")
    state_writes = [i for i, e in enumerate(events) if e == ("write", state)]
    assert state_writes, events
    for step in (2, 4):  # the epoch-end saves
        prefix = str(logdir / f"model-{step}")
        files = saver_mod._checkpoint_files(prefix)
        assert any(f.endswith(".index") for f in files) and any(".data-" in f for f in files), files
        synced = {p: i for i, (kind, p) in enumerate(events) if kind == "fsync"}
        named = next(i for i in state_writes if i > max(synced.get(f, -1) for f in files))
        for f in files:
            assert f in synced and synced[f] < named, (f, events)
        # and the directory (the new names in it) before the state file is written
        last_file = max(synced[f] for f in files)
        assert ("fsync", str(logdir)) in events[last_file:named], events


def test_fsync_of_a_file_leaves_no_descriptor_open(tmp_path):
    f = tmp_path / "x.data-00000-of-00001"
    f.write_bytes(b"0123")
    before = _open_fds()
    for _ in range(50):
        saver_mod._fsync_file(str(f))
    assert _open_fds() == before


def test_model_saver_keeps_ten_checkpoints_by_default(logdir):
    train_tiny([C.ModelSaver()], max_epoch=12, steps_per_epoch=1)
    kept = sorted(int(p.name[len("model-"):-len(".index")]) for p in logdir.glob("model-*.index"))
    assert kept == list(range(3, 13))


@pytest.mark.parametrize("kwargs, match", [
    ({"var_collections": []}, "var_collections must be a collection name or a list of them"),
    ({"var_collections": ["variables", 3]}, "var_collections must be a collection name or a list of them"),
    ({"checkpoint_dir": 3}, "checkpoint_dir must be a directory path"),
])
def test_model_saver_argument_checks(kwargs, match):
    with pytest.raises(TypeError, match=match):
        C.ModelSaver(**kwargs)


def test_model_saver_made_before_the_log_directory_saves_into_it(tmp_path):
    saver = C.ModelSaver()
    assert saver.checkpoint_dir is None
    d = tmp_path / "later"
    logger.set_logger_dir(str(d), action="k")
    train_tiny([saver], max_epoch=1, steps_per_epoch=2)
    assert saver.checkpoint_dir == str(d)
    assert (d / "model-2.index").is_file()


def test_resolved_dir_that_cannot_be_created_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    saver = C.ModelSaver(checkpoint_dir=str(blocker / "ckpts"))
    with pytest.raises(OSError, match=f"ModelSaver: cannot write checkpoints to {blocker / 'ckpts'}"):
        saver.resolved_dir()


def test_unwritable_checkpoint_dir_is_reported_before_training(tmp_path, monkeypatch):
    """A directory where no file can be created (read-only file system, no permission; simulated
    here, since the tests may run as root) fails the setup, naming it, before any step."""
    import tempfile

    d = tmp_path / "ro"
    d.mkdir()
    real = tempfile.mkstemp

    def mkstemp(*args, **kwargs):
        if kwargs.get("dir") == str(d):
            raise PermissionError(13, "Permission denied")
        return real(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    steps = []

    class Count(C.Callback):
        def _trigger_step(self):
            steps.append(self.global_step)

    with pytest.raises(OSError, match=f"ModelSaver: cannot write checkpoints to {d}: Permission denied"):
        train_tiny([C.ModelSaver(checkpoint_dir=str(d)), Count()], max_epoch=1, steps_per_epoch=2)
    assert steps == [] and list(d.iterdir()) == []


def test_a_variable_in_several_collections_is_saved_once(logdir):
    import tensorflow as tf

    train_tiny([C.ModelSaver(var_collections=["variables", "trainable_variables"])], max_epoch=1, steps_per_epoch=2)
    names = tf.train.list_variables(str(logdir / "model-2"))
    assert sorted(n for n, _ in names if n in ("W", "b")) == ["W", "b"]


def test_collections_without_variables_are_an_error(logdir):
    with pytest.raises(ValueError, match=r"the collections \['no_such_collection'\] hold no variables"):
        train_tiny([C.ModelSaver(var_collections="no_such_collection")], max_epoch=1, steps_per_epoch=1)


def test_no_preserved_checkpoints_saves_too(logdir):
    """``keep_checkpoint_every_n_hours=None``: nothing is kept beyond ``max_to_keep``."""
    train_tiny([C.ModelSaver(max_to_keep=2, keep_checkpoint_every_n_hours=None)], max_epoch=3, steps_per_epoch=1)
    assert sorted(p.name for p in logdir.glob("model-*.index")) == ["model-2.index", "model-3.index"]


def test_resuming_from_the_newest_checkpoint_is_not_warned_about(logdir, tb_log):
    """A run restored at global step 2 from ``model-2`` in the same directory: that checkpoint is
    not "from a later global step" (only later ones are)."""
    from trainbus.tfutils.sessinit import SaverRestore

    train_tiny([C.ModelSaver()], max_epoch=1, steps_per_epoch=2)
    tb_log.clear()
    train_tiny([C.ModelSaver()], max_epoch=2, steps_per_epoch=2, starting_epoch=2,
               session_init=SaverRestore(str(logdir / "model-2")))
    assert (logdir / "model-4.index").is_file()
    assert not [r for r in tb_log if "later global steps" in r.getMessage()], [r.getMessage() for r in tb_log]


def _saved_messages(tb_log) -> list[str]:
    return [r.getMessage() for r in tb_log if r.getMessage().startswith("Model saved to ")]


def test_after_train_does_not_save_a_step_that_is_saved_and_writes_no_meta_per_checkpoint(logdir, tb_log):
    train_tiny([C.ModelSaver()], max_epoch=2, steps_per_epoch=2)
    assert _saved_messages(tb_log) == [f"Model saved to {logdir / 'model-2'}.", f"Model saved to {logdir / 'model-4'}."]
    assert not list(logdir.glob("model-*.meta"))


class _Raise(C.Callback):
    def __init__(self, exc):
        self.exc = exc

    def _trigger_step(self):
        if self.global_step == 3:
            raise self.exc


def test_a_failed_training_writes_no_final_checkpoint_and_says_so(logdir, tb_log):
    with pytest.raises(RuntimeError, match="boom"):
        train_tiny([C.ModelSaver(), _Raise(RuntimeError("boom"))], max_epoch=3, steps_per_epoch=2)
    assert not (logdir / "model-3.index").exists()
    assert "ModelSaver: training failed (RuntimeError); no final checkpoint is written." in \
        [r.getMessage() for r in tb_log]


def test_keyboard_interrupt_from_a_callback_still_writes_the_final_checkpoint(logdir):
    with pytest.raises(KeyboardInterrupt):
        train_tiny([C.ModelSaver(), _Raise(KeyboardInterrupt())], max_epoch=3, steps_per_epoch=2)
    assert (logdir / "model-3.index").is_file()


def test_keep_checkpoint_every_n_hours_keeps_the_first_one_older_than_an_hour(logdir, monkeypatch):
    """max_to_keep=1, one hour: a checkpoint saved half a second after the first hour passed is
    kept on disk when rotated out; the one before it is not (a fake clock, one step per 3600.5 s)."""
    clock = {"now": 1_000_000.0}
    monkeypatch.setattr(saver_mod, "time", type("FakeTime", (), {"time": staticmethod(lambda: clock["now"])}))

    class Tick(C.Callback):
        def _trigger_step(self):
            clock["now"] = 1_000_000.0 + 3600.5 * (self.global_step - 1)

    train_tiny([Tick(), C.ModelSaver(max_to_keep=1, keep_checkpoint_every_n_hours=1)], max_epoch=3,
               steps_per_epoch=1)
    assert sorted(p.name for p in logdir.glob("model-*.index")) == ["model-2.index", "model-3.index"]


def test_a_graph_file_that_cannot_be_written_is_a_warning_only(logdir, tb_log, monkeypatch):
    def fail(path, data, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(saver_mod, "atomic_write_bytes", fail)
    train_tiny([C.ModelSaver()], max_epoch=1, steps_per_epoch=2)
    assert (logdir / "model-2.index").is_file() and not list(logdir.glob("graph-*.meta"))
    assert any(r.levelname == "ERROR" and r.getMessage().startswith(f"ModelSaver: cannot write {logdir}/graph-")
               and r.getMessage().endswith(".meta: No space left on device (ENOSPC); checkpoints do not need it; "
                                           "training goes on.")
               for r in tb_log), [r.getMessage() for r in tb_log]


def test_the_graph_file_is_written_beside_the_steps_not_before_the_first(logdir, monkeypatch):
    """The graph file is written in its own thread once the first step is prepared: its write
    waits here until the first step has run (written before the first step, as tensorpack
    does, the wait would time out), and the file then holds the training's graph."""
    import threading

    import tensorflow as tf

    first_step = threading.Event()
    seen: dict = {}
    real = saver_mod.atomic_write_bytes

    def write(path, data, *args, **kwargs):
        if str(path).endswith(".meta"):
            seen["after the first step"] = first_step.wait(timeout=30)
            seen["thread"] = threading.current_thread().name
        return real(path, data, *args, **kwargs)

    class FirstStep(C.Callback):
        def _trigger_step(self):
            first_step.set()

    monkeypatch.setattr(saver_mod, "atomic_write_bytes", write)
    train_tiny([FirstStep(), C.ModelSaver()], max_epoch=1, steps_per_epoch=2)
    assert seen == {"after the first step": True, "thread": "ModelSaver-graph"}
    (meta,) = logdir.glob("graph-*.meta")
    with tf.Graph().as_default() as g:
        restorer = tf.compat.v1.train.import_meta_graph(str(meta))
        names = {op.name for op in g.get_operations()}
        assert {"W", "b", "global_step", "EMA/cost"} <= {v.op.name for v in tf.compat.v1.global_variables()}
        assert restorer.saver_def.restore_op_name in names


def test_a_training_that_ends_before_its_first_step_still_writes_the_graph_file(logdir):
    """No step was prepared (a later callback's before_train fails): the saver writes the graph
    file as training ends, as it did from before_train."""

    class Fails(C.Callback):
        def _before_train(self):
            raise RuntimeError("setup went wrong")

    with pytest.raises(RuntimeError, match="setup went wrong"):
        train_tiny([C.ModelSaver(), Fails()], max_epoch=1, steps_per_epoch=2)
    assert len(list(logdir.glob("graph-*.meta"))) == 1
    assert not list(logdir.glob("model-*"))


def test_no_checkpoint_when_training_never_started(logdir):
    """An earlier callback's before_train fails: every after_train still runs, but the saver,
    whose own before_train never ran, writes nothing."""

    class Fails(C.Callback):
        def _before_train(self):
            raise RuntimeError("setup went wrong")

    with pytest.raises(RuntimeError, match="setup went wrong"):
        train_tiny([Fails(), C.ModelSaver()], max_epoch=1, steps_per_epoch=2)
    assert not list(logdir.glob("model-*"))


def test_a_failed_save_removes_its_partial_files_and_keeps_the_previous_checkpoint_listed(logdir, tb_log,
                                                                                          monkeypatch):
    real = ckpt_mod.write_callback_states

    def flaky(path, states, *args, **kwargs):
        if path.endswith("model-4"):
            raise OSError(28, "No space left on device")
        return real(path, states, *args, **kwargs)

    monkeypatch.setattr(ckpt_mod, "write_callback_states", flaky)
    train_tiny([C.ModelSaver()], max_epoch=2, steps_per_epoch=2)
    assert not list(logdir.glob("model-4*"))
    assert (logdir / "model-2.index").is_file()
    import tensorflow as tf

    assert tf.compat.v1.train.get_checkpoint_state(str(logdir)).model_checkpoint_path.endswith("model-2")
    assert any(r.levelname == "ERROR" and "cannot save the checkpoint of global_step 4 to" in r.getMessage()
               and "No space left on device (ENOSPC)" in r.getMessage() for r in tb_log)
