"""JSONWriter: stats.json written by real training runs, read back with ``json``; resuming;
corrupt files; a training process killed with SIGKILL at several moments."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import zygote  # tests/_support

import trainbus.callbacks
from trainbus.callbacks import Callback
from trainbus.testing import train_tiny
from resume import SetGlobalStep  # tests/_support
from trainbus.utils.stats import CorruptStatsError

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "json_kill_child.py")


class PutStats(Callback):
    """``step_val`` at every step (value = global step), ``epoch_val`` at every epoch end."""

    def __init__(self, seen_files=None):
        self.seen_files = seen_files

    def _before_epoch(self):
        if self.seen_files is not None:
            from trainbus.utils import logger

            path = os.path.join(logger.get_logger_dir(), "stats.json")
            self.seen_files.append(json.load(open(path)) if os.path.exists(path) else None)

    def _trigger_step(self):
        self.trainer.monitors.put_scalar("step_val", float(self.trainer.global_step))

    def _trigger(self):
        self.trainer.monitors.put_scalar("epoch_val", 100.0 * self.trainer.epoch_num)


def read_stats(logdir):
    with open(os.path.join(logdir, "stats.json")) as f:
        return json.load(f)


def test_records_grouped_by_global_step_and_written_every_epoch(logdir):
    seen = []
    train_tiny(callbacks=[PutStats(seen)], monitors=[trainbus.callbacks.JSONWriter()], max_epoch=3, steps_per_epoch=2)
    stats = read_stats(logdir)
    assert [r["global_step"] for r in stats] == [1, 2, 3, 4, 5, 6]
    assert [r["epoch_num"] for r in stats] == [1, 1, 2, 2, 3, 3]
    for r in stats:
        assert r["step_val"] == float(r["global_step"])
    # the epoch-end scalar joins the record of the epoch's last step
    assert [(r["global_step"], r["epoch_val"]) for r in stats if "epoch_val" in r] == [(2, 100.0), (4, 200.0), (6, 300.0)]
    # the file on disk after each finished epoch (read at the next epoch's start)
    assert seen[0] is None
    assert [r["global_step"] for r in seen[1]] == [1, 2]
    assert [r["global_step"] for r in seen[2]] == [1, 2, 3, 4]
    # no temporary file left behind
    assert sorted(p for p in os.listdir(logdir) if "stats" in p) == ["stats.json"]


def test_static_loaders(logdir):
    JSONWriter = trainbus.callbacks.JSONWriter
    assert JSONWriter.FILENAME == "stats.json"
    assert JSONWriter.load_existing_json() is None
    assert JSONWriter.load_existing_epoch_number() is None
    train_tiny(callbacks=[PutStats()], monitors=[JSONWriter()], max_epoch=2, steps_per_epoch=2)
    assert JSONWriter.load_existing_epoch_number() == 2
    assert JSONWriter.load_existing_epoch_number(str(logdir)) == 2
    assert JSONWriter.load_existing_json(str(logdir)) == read_stats(logdir)
    assert JSONWriter.load_existing_json(str(logdir / "elsewhere")) is None


def test_resume_appends_drops_later_steps_and_fills_history(logdir):
    JSONWriter = trainbus.callbacks.JSONWriter
    # first run: 3 epochs of 2 steps, its last checkpoint was after epoch 2 (global_step 4)
    train_tiny(callbacks=[PutStats()], monitors=[JSONWriter()], max_epoch=3, steps_per_epoch=2)
    assert JSONWriter.load_existing_epoch_number() == 3
    (logdir / ".stats.json.x1y2.tmp").write_text("[{")  # left by a write that a kill interrupted
    # second run resumes from that checkpoint: epoch 3 is redone, its old records dropped
    tr = train_tiny(callbacks=[PutStats()], monitors=[JSONWriter()], max_epoch=4, steps_per_epoch=2,
                    starting_epoch=3, session_init=SetGlobalStep(4))
    stats = read_stats(logdir)
    assert [r["global_step"] for r in stats] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [r["epoch_num"] for r in stats] == [1, 1, 2, 2, 3, 3, 4, 4]
    # the hub's history covers the earlier run too
    assert tr.monitors.get_history("step_val") == [(s, float(s)) for s in range(1, 9)]
    assert tr.monitors.get_history("epoch_val") == [(2, 100.0), (4, 200.0), (6, 300.0), (8, 400.0)]
    assert tr.monitors.get_latest("epoch_val") == 400.0
    assert not [p for p in os.listdir(logdir) if p.startswith("stats.json.")]  # no backup: it was a resume
    assert not (logdir / ".stats.json.x1y2.tmp").exists()


def test_history_of_another_run_is_backed_up_not_appended(logdir):
    JSONWriter = trainbus.callbacks.JSONWriter
    train_tiny(callbacks=[PutStats()], monitors=[JSONWriter()], max_epoch=3, steps_per_epoch=2)
    old = read_stats(logdir)
    # a fresh run (starting_epoch 1, global_step 0) in the same directory
    train_tiny(callbacks=[PutStats()], monitors=[JSONWriter()], max_epoch=1, steps_per_epoch=2)
    backups = [p for p in os.listdir(logdir) if p.startswith("stats.json.")]
    assert len(backups) == 1
    assert json.load(open(logdir / backups[0])) == old
    assert [r["global_step"] for r in read_stats(logdir)] == [1, 2]


def _messages(records, level):
    return [r.getMessage() for r in records if r.levelname == level]


def test_new_run_at_a_later_epoch_without_checkpoint_appends(logdir, tb_log):
    JSONWriter = trainbus.callbacks.JSONWriter
    train_tiny(callbacks=[PutStats()], monitors=[JSONWriter()], max_epoch=2, steps_per_epoch=2)
    old = read_stats(logdir)
    # a new run (no checkpoint: global_step starts at 0 again) continuing at epoch 3
    tr = train_tiny(callbacks=[PutStats()], monitors=[JSONWriter()], max_epoch=3, steps_per_epoch=2, starting_epoch=3)
    stats = read_stats(logdir)
    assert stats[:4] == old
    assert [(r["epoch_num"], r["global_step"]) for r in stats] == [(1, 1), (1, 2), (2, 3), (2, 4), (3, 1), (3, 2)]
    assert not [p for p in os.listdir(logdir) if p.startswith("stats.json.")]
    assert any(f"Found the history of an earlier run in {logdir / 'stats.json'} (up to epoch 2)" in m
               for m in _messages(tb_log, "INFO"))
    assert not [m for m in _messages(tb_log, "WARNING") if "JSONWriter" in m]
    assert tr.monitors.get_history("epoch_val") == [(2, 100.0), (4, 200.0), (2, 300.0)]


def test_new_run_redoing_epochs_keeps_only_the_earlier_ones(logdir, tb_log):
    JSONWriter = trainbus.callbacks.JSONWriter
    train_tiny(callbacks=[PutStats()], monitors=[JSONWriter()], max_epoch=3, steps_per_epoch=2)
    old = read_stats(logdir)
    # epochs 2 and 3 are run again, without a checkpoint
    train_tiny(callbacks=[PutStats()], monitors=[JSONWriter()], max_epoch=2, steps_per_epoch=2, starting_epoch=2)
    stats = read_stats(logdir)
    assert stats[:2] == old[:2]
    assert [(r["epoch_num"], r["global_step"], r.get("epoch_val")) for r in stats] == [
        (1, 1, None), (1, 2, 100.0), (2, 1, None), (2, 2, 200.0)]
    assert "JSONWriter: dropped 4 record(s) of epochs >= starting_epoch=2." in _messages(tb_log, "INFO")


def test_gap_between_history_and_starting_epoch_backs_up(logdir, tb_log):
    JSONWriter = trainbus.callbacks.JSONWriter
    train_tiny(callbacks=[PutStats()], monitors=[JSONWriter()], max_epoch=1, steps_per_epoch=2)
    old = read_stats(logdir)
    train_tiny(callbacks=[PutStats()], monitors=[JSONWriter()], max_epoch=3, steps_per_epoch=2, starting_epoch=3)
    backups = [p for p in os.listdir(logdir) if p.startswith("stats.json.")]
    assert len(backups) == 1 and json.load(open(logdir / backups[0])) == old
    assert [r["epoch_num"] for r in read_stats(logdir)] == [3, 3]
    warning = [m for m in _messages(tb_log, "WARNING") if m.startswith("JSONWriter:")]
    assert len(warning) == 1
    assert "its last epoch before this run is 1, not the one before starting_epoch=3" in warning[0]
    assert f"moved to {logdir / backups[0]}" in warning[0]


def test_a_damaged_existing_file_is_kept_aside_and_the_run_records_a_fresh_one(logdir, tb_log):
    path = logdir / "stats.json"
    for damaged, problem in (('[{"epoch_num": 1, "global_step": 2, "cost": 0.', "is not valid JSON ("),
                             ('{"not": "a list"}', "does not hold a list of records")):
        path.write_text(damaged)
        with pytest.raises(CorruptStatsError, match=str(path)):
            trainbus.callbacks.JSONWriter.load_existing_json(str(logdir))
        train_tiny(callbacks=[PutStats()], monitors=[trainbus.callbacks.JSONWriter()], max_epoch=2, steps_per_epoch=2)
        aside = sorted(p for p in logdir.iterdir() if p.name.startswith("stats.json.damaged-"))
        assert [p.read_text() for p in aside][-1] == damaged
        for p in aside:
            p.unlink()
        assert [r["epoch_num"] for r in json.loads(path.read_text())] == [1, 1, 2, 2]
        assert any(r.getMessage().startswith(f"JSONWriter: {path} {problem}") for r in tb_log)
        path.unlink()


def test_without_logger_dir_it_warns_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    writer = trainbus.callbacks.JSONWriter()
    assert not writer.enabled
    tr = train_tiny(callbacks=[PutStats()], monitors=[writer], max_epoch=2, steps_per_epoch=2)
    assert tr.monitors.get_latest("epoch_val") == 200.0  # the hub still has the history
    assert list(tmp_path.iterdir()) == []


def test_conformance():
    from trainbus.testing import check_distribution

    check_distribution("trainbus-monitor-json")


# ---------------------------------------------------------------------------- SIGKILL
def _check_valid_history(stats, must_have_up_to):
    assert isinstance(stats, list) and stats, "stats.json must hold a non-empty list"
    steps = [r["global_step"] for r in stats]
    assert steps == sorted(set(steps)), f"global steps repeat or go back: {steps}"
    epochs = [r["epoch_num"] for r in stats]
    assert epochs == sorted(epochs)
    assert sorted(set(epochs)) == list(range(1, max(epochs) + 1)), f"an epoch is missing: {sorted(set(epochs))}"
    assert max(epochs) >= must_have_up_to, f"epoch {must_have_up_to} finished but the file ends at {max(epochs)}"
    for e in set(epochs):  # every epoch in the file is complete: 3 steps and its epoch-end record
        recs = [r for r in stats if r["epoch_num"] == e]
        assert len(recs) == 3 and "epoch_stat" in recs[-1] and recs[-1]["epoch_stat"] == float(e)


class _Child:
    def __init__(self, logdir):
        # forked from the worker's zygote (tests/_support/zygote.py); it forks each training itself
        self.proc = zygote.zygote().popen([sys.executable, CHILD, str(logdir)], stdin=subprocess.PIPE)

    def expect(self, prefix, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                raise AssertionError(f"the training process ended while waiting for {prefix!r}")
            if line.startswith(prefix):
                return line.split()[1:]
        raise AssertionError(f"timed out waiting for {prefix!r}")

    def send(self, cmd):
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()

    def close(self):
        try:
            self.send("quit")
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_sigkill_at_several_moments_leaves_a_valid_file_with_every_finished_epoch(tmp_path):
    logdir = tmp_path / "killed"
    child = _Child(logdir)
    # (epochs of this run to see finish, then seconds to wait) before SIGKILL
    moments = [(1, 0.0), (2, 0.002), (3, 0.0005), (1, 0.01), (4, 0.004)]
    last_seen = 0
    try:
        for i, (n_epochs, delay) in enumerate(moments):
            child.send("run")
            pid = int(child.expect("CHILD")[0])
            starting, _gs = map(int, child.expect("START"))
            for _ in range(n_epochs):
                last_seen = int(child.expect("EPOCH")[0])
            if delay:
                time.sleep(delay)
            os.kill(pid, signal.SIGKILL)
            status = int(child.expect("EXIT")[0])
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, f"kill {i}: status {status}"
            stats = json.loads((logdir / "stats.json").read_text())
            _check_valid_history(stats, last_seen)
            if i > 0:  # every later run resumed from the file
                assert starting > 1
    finally:
        child.close()
    leftovers = [p for p in os.listdir(logdir) if p.startswith(".stats.json")]
    # a kill during a write may leave a temporary file beside stats.json, never a torn stats.json;
    # the next run removes it, so at most the last kill's is left
    assert all(p.endswith(".tmp") for p in leftovers) and len(leftovers) <= 1
    assert not [p for p in os.listdir(logdir) if p.startswith("stats.json.")], "a resumed run must not back up"
