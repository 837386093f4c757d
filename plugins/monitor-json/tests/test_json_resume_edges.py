"""JSONWriter at the edges of resuming: one record per epoch, the rewrite before the first step
when later records were dropped, and the warning without a log directory."""

from __future__ import annotations

import json
import os

import trainbus.callbacks
from trainbus.callbacks import Callback
from trainbus.testing import train_tiny
from resume import SetGlobalStep  # tests/_support


class PutPerEpoch(Callback):
    """``epoch_val`` at every epoch end only (one record per epoch); records the content of
    stats.json at the start of every epoch in ``seen``."""

    def __init__(self) -> None:
        self.seen: list = []

    def _before_epoch(self) -> None:
        from trainbus.utils import logger

        path = os.path.join(logger.get_logger_dir(), "stats.json")
        self.seen.append(json.load(open(path, encoding="utf-8")) if os.path.exists(path) else None)

    def _trigger(self) -> None:
        self.trainer.monitors.put_scalar("epoch_val", 100.0 * self.trainer.epoch_num)


def _stats(logdir):
    with open(os.path.join(logdir, "stats.json"), encoding="utf-8") as f:
        return json.load(f)


def test_one_record_per_epoch_continues_at_the_next_epoch(logdir):
    """The earlier run's LAST record decides which epoch it reached (not an earlier one)."""
    JSONWriter = trainbus.callbacks.JSONWriter
    train_tiny(callbacks=[PutPerEpoch()], monitors=[JSONWriter()], max_epoch=3, steps_per_epoch=2)
    assert [r["epoch_num"] for r in _stats(logdir)] == [1, 2, 3]
    train_tiny(callbacks=[PutPerEpoch()], monitors=[JSONWriter()], max_epoch=5, steps_per_epoch=2,
               starting_epoch=4, session_init=SetGlobalStep(6))
    assert [(r["epoch_num"], r["global_step"]) for r in _stats(logdir)] == [(1, 2), (2, 4), (3, 6), (4, 8), (5, 10)]
    assert not [p for p in os.listdir(logdir) if p.startswith("stats.json.")]  # appended, no backup


def test_dropped_records_are_gone_from_the_file_before_the_first_step(logdir):
    """Resuming from an earlier checkpoint: the records after it leave stats.json at once (a
    kill before the next epoch end must not leave the future of another timeline)."""
    JSONWriter = trainbus.callbacks.JSONWriter
    train_tiny(callbacks=[PutPerEpoch()], monitors=[JSONWriter()], max_epoch=4, steps_per_epoch=2)
    probe = PutPerEpoch()
    train_tiny(callbacks=[probe], monitors=[JSONWriter()], max_epoch=3, steps_per_epoch=2, starting_epoch=3,
               session_init=SetGlobalStep(4))
    assert [r["epoch_num"] for r in probe.seen[0]] == [1, 2]  # at the start of epoch 3, before any step
    assert [r["epoch_num"] for r in _stats(logdir)] == [1, 2, 3]


def test_without_logger_dir_the_warning_says_so_when_training_starts(tmp_path, monkeypatch, tb_log):
    monkeypatch.chdir(tmp_path)
    writer = trainbus.callbacks.JSONWriter()
    assert not writer.enabled and str(writer) == "JSONWriter(disabled: no logger directory)"
    assert not [r for r in tb_log if "JSONWriter" in r.getMessage()]  # the directory may still be set
    train_tiny(monitors=[writer], max_epoch=1, steps_per_epoch=1)
    assert [r.getMessage() for r in tb_log if "JSONWriter" in r.getMessage()] == [
        "JSONWriter: the logger directory was not set (logger.set_logger_dir); JSONWriter is ignored."]


def test_records_of_a_partial_epoch_are_written_when_training_stops(logdir):
    """Stopped in the middle of an epoch (StopTraining, a signal): the steps' records put after
    the last epoch end still reach stats.json."""
    from trainbus.train import StopTraining

    class PutAndStop(Callback):
        def _trigger_step(self) -> None:
            self.trainer.monitors.put_scalar("step_val", float(self.global_step))
            if self.global_step == 7:
                raise StopTraining("enough")

    train_tiny(callbacks=[PutAndStop()], monitors=[trainbus.callbacks.JSONWriter()], max_epoch=3, steps_per_epoch=4)
    assert [r["global_step"] for r in _stats(logdir)] == [1, 2, 3, 4, 5, 6, 7]


def test_only_its_own_stale_temporaries_are_removed(logdir):
    (logdir / ".stats.json.abc.tmp").write_text("[{")  # a write a kill interrupted
    keep = [".other.json.abc.tmp", "notes.tmp", ".stats.json.abc.bak"]
    for name in keep:
        (logdir / name).write_text("x")
    train_tiny(callbacks=[PutPerEpoch()], monitors=[trainbus.callbacks.JSONWriter()], max_epoch=1, steps_per_epoch=2)
    assert not (logdir / ".stats.json.abc.tmp").exists()
    assert all((logdir / name).read_text() == "x" for name in keep)


def test_messages_name_the_restored_step_exactly_when_there_is_one(logdir, tb_log):
    """The log lines mention the restored global_step when it is >= 1 (also exactly 1), and
    not for a run that restored nothing."""
    JSONWriter = trainbus.callbacks.JSONWriter
    train_tiny(callbacks=[PutPerEpoch()], monitors=[JSONWriter()], max_epoch=2, steps_per_epoch=1)
    tb_log.clear()
    train_tiny(callbacks=[PutPerEpoch()], monitors=[JSONWriter()], max_epoch=2, steps_per_epoch=1, starting_epoch=2,
               session_init=SetGlobalStep(1))
    assert "JSONWriter: dropped 1 record(s) of epochs >= starting_epoch=2 or steps after the restored " \
           "global_step 1." in [r.getMessage() for r in tb_log]
    tb_log.clear()
    train_tiny(callbacks=[PutPerEpoch()], monitors=[JSONWriter()], max_epoch=1, steps_per_epoch=1,
               session_init=SetGlobalStep(1))
    warned = [r.getMessage() for r in tb_log if "holds another run's history" in r.getMessage()]
    assert len(warned) == 1 and "(none of its records is before starting_epoch=1 and at or before the restored " \
                                "global_step 1)" in warned[0], warned
    tb_log.clear()
    train_tiny(callbacks=[PutPerEpoch()], monitors=[JSONWriter()], max_epoch=1, steps_per_epoch=1)
    warned = [r.getMessage() for r in tb_log if "holds another run's history" in r.getMessage()]
    assert len(warned) == 1 and "(none of its records is before starting_epoch=1); it is moved to" in warned[0], warned


def test_disk_full_keeps_the_previous_file_and_writes_everything_next_time(logdir, tb_log, monkeypatch):
    """An OSError (disk full) while writing: an error naming the file, the previous stats.json is
    untouched, and the next write has every record."""
    import errno

    import trainbus_monitor_json as mod

    real = mod.atomic_write_text
    calls = []

    def flaky(path, text, *args, **kwargs):
        calls.append(path)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device", path)
        return real(path, text, *args, **kwargs)

    monkeypatch.setattr(mod, "atomic_write_text", flaky)
    probe = PutPerEpoch()
    train_tiny(callbacks=[probe], monitors=[trainbus.callbacks.JSONWriter()], max_epoch=3, steps_per_epoch=2)
    path = os.path.join(logdir, "stats.json")
    assert [r["epoch_num"] for r in probe.seen[2]] == [1]  # epoch 2's write failed, epoch 1's file stayed
    assert [r["epoch_num"] for r in _stats(logdir)] == [1, 2, 3]
    errors = [r.getMessage() for r in tb_log if r.levelname == "ERROR"]
    assert errors == [f"JSONWriter: cannot write {path}: No space left on device (ENOSPC); the previous file stays; "
                      "its records are kept in memory and written at the next epoch."]


class PutPerStep(Callback):
    def _trigger_step(self) -> None:
        self.trainer.monitors.put_scalar("step_val", float(self.global_step))


def test_records_after_a_mid_epoch_checkpoint_are_dropped_even_in_earlier_epochs(logdir):
    """Restored global_step 1 (a checkpoint in the middle of epoch 1), resuming at epoch 2: the
    record of step 2 belongs to the abandoned timeline although its epoch precedes the run."""
    JSONWriter = trainbus.callbacks.JSONWriter
    train_tiny(callbacks=[PutPerStep()], monitors=[JSONWriter()], max_epoch=3, steps_per_epoch=2)
    train_tiny(callbacks=[PutPerStep()], monitors=[JSONWriter()], max_epoch=2, steps_per_epoch=2, starting_epoch=2,
               session_init=SetGlobalStep(1))
    assert [(r["global_step"], r["epoch_num"]) for r in _stats(logdir)] == [(1, 1), (2, 2), (3, 2)]


def test_records_that_cannot_be_placed_are_kept(logdir):
    """A record that is not an object (a note someone added) stays where it was."""
    (logdir / "stats.json").write_text(json.dumps(["a note", {"epoch_num": 1, "global_step": 2, "step_val": 2.0}]))
    train_tiny(callbacks=[PutPerStep()], monitors=[trainbus.callbacks.JSONWriter()], max_epoch=2, steps_per_epoch=2,
               starting_epoch=2, session_init=SetGlobalStep(2))
    stats = _stats(logdir)
    assert stats[0] == "a note" and [r["global_step"] for r in stats[1:]] == [2, 3, 4]
