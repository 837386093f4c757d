"""ModelSaver's rotation and bookkeeping edges: a checkpoint that cannot be deleted, the
every-n-hours schedule, checkpoints of an earlier run at the same step, the write check of the
directory, an unreadable state file (each test kills a mutant the other tests missed)."""

from __future__ import annotations

import logging
import os
import shutil

import trainbus.callbacks as C
import trainbus_saver._saver as saver_mod
from trainbus.testing import train_tiny
from trainbus.tfutils.sessinit import SaverRestore


def _indexes(d) -> list[str]:
    return sorted(p.name for p in d.glob("*.index"))


def _state(d, paths) -> None:
    text = f'model_checkpoint_path: "{paths[-1]}"\n' + "".join(f'all_model_checkpoint_paths: "{p}"\n' for p in paths)
    (d / "checkpoint").write_text(text)


def test_an_old_checkpoint_that_cannot_be_deleted_is_a_warning_naming_it(logdir, tb_log, monkeypatch):
    real = os.remove

    def remove(path, *a, **k):
        if os.path.basename(path).startswith("model-1."):
            raise PermissionError(13, "Permission denied", path)
        return real(path, *a, **k)

    monkeypatch.setattr(os, "remove", remove)
    train_tiny([C.ModelSaver(max_to_keep=1)], max_epoch=3, steps_per_epoch=1)
    errors = [r.getMessage() for r in tb_log if r.levelno == logging.ERROR]
    assert [e for e in errors if e.startswith(f"ModelSaver: cannot delete {logdir / 'model-1.'}")
            and "Permission denied (EACCES); it stays on disk; training goes on" in e], errors
    # training and the other rotations went on
    assert _indexes(logdir) == ["model-1.index", "model-3.index"]


def test_keep_every_n_hours_moves_on_by_exactly_n_hours(logdir, monkeypatch):
    """One hour, one step per 3600.5 s (a fake clock), max_to_keep=1: model-2 (saved 3600.5 s
    after the start) is kept; the next is due 7200 s after the start, so model-3 (7201 s) is kept
    too; model-1 is not."""
    clock = {"now": 1_000_000.0}
    monkeypatch.setattr(saver_mod, "time", type("FakeTime", (), {"time": staticmethod(lambda: clock["now"])}))

    class Tick(C.Callback):
        def _trigger_step(self):
            clock["now"] = 1_000_000.0 + 3600.5 * (self.global_step - 1)

    train_tiny([Tick(), C.ModelSaver(max_to_keep=1, keep_checkpoint_every_n_hours=1)], max_epoch=4,
               steps_per_epoch=1)
    assert _indexes(logdir) == ["model-2.index", "model-3.index", "model-4.index"]


def test_an_earlier_checkpoint_at_the_same_step_under_another_name_is_rotated_away(tmp_path, tb_log):
    """Only checkpoints from LATER steps than the new one stay on disk when rotated out; one of
    the same step (here ``other-4``, listed by an earlier run) is deleted like any older one."""
    d = tmp_path / "ck"
    train_tiny([C.ModelSaver(checkpoint_dir=str(d))], max_epoch=2, steps_per_epoch=2)
    for f in os.listdir(d):
        if f.startswith("model-4."):
            shutil.copy(d / f, d / f.replace("model-4", "other-4"))
    _state(d, ["other-4"])
    tb_log.clear()
    train_tiny([C.ModelSaver(max_to_keep=2, checkpoint_dir=str(d))], max_epoch=2, steps_per_epoch=2)
    assert not (d / "other-4.index").exists()
    assert (d / "model-2.index").is_file() and (d / "model-4.index").is_file()
    said = [r.getMessage() for r in tb_log]
    assert not [m for m in said if "is from a later global step" in m], said


def test_the_new_checkpoint_listed_under_another_path_is_not_deleted(tmp_path):
    """An earlier list names ``model-4`` by an absolute path through the real directory; this run
    writes to the same directory through a symbolic link and saves step 4 again: rotating out
    the old entry must not delete the files it just wrote."""
    real = tmp_path / "real"
    link = tmp_path / "link"
    train_tiny([C.ModelSaver(checkpoint_dir=str(real))], max_epoch=2, steps_per_epoch=2)
    link.symlink_to(real, target_is_directory=True)
    _state(real, [str(real / "model-4")])
    train_tiny([C.ModelSaver(max_to_keep=2, checkpoint_dir=str(link))], max_epoch=2, steps_per_epoch=2)
    assert (real / "model-4.index").is_file()
    SaverRestore(str(link / "model-4")).verify()
    import tensorflow as tf

    state = tf.compat.v1.train.get_checkpoint_state(str(link))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["model-2", "model-4"]


def test_the_write_check_leaves_no_file_and_no_descriptor(tmp_path):
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        saver_mod._check_writable(str(tmp_path))
    assert len(os.listdir("/proc/self/fd")) == before
    assert list(tmp_path.iterdir()) == []


def test_an_unreadable_state_file_is_a_warning_naming_the_directory(tmp_path, tb_log):
    """A state file that is not text (TensorFlow itself only warns about one that does not
    parse, and raises on one that does not decode): the run starts a new list."""
    d = tmp_path / "ck"
    d.mkdir()
    (d / "checkpoint").write_bytes(b"\xff\xfe\xfa not text\n")
    train_tiny([C.ModelSaver(checkpoint_dir=str(d))], max_epoch=1, steps_per_epoch=2)
    warnings = [r.getMessage() for r in tb_log if r.levelno == logging.WARNING]
    assert any(w.startswith(f"ModelSaver: checkpoint {d} is damaged: {d / 'checkpoint'} is truncated or not a "
                            "checkpoint list (") and w.endswith("It is replaced by this run's list at the first save.")
               for w in warnings), warnings
    assert _indexes(d) == ["model-2.index"]
