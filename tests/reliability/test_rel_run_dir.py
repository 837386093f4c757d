"""The run directory with real processes and real file systems: one training at a time (an OS lock
that SIGKILL releases), a disk that fills up mid-run (a small tmpfs), a disk that turns read-only
mid-run (a read-only bind mount). Nothing is lost and every fault is one line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import tensorflow as tf
import zygote  # tests/_support

from relutil import communicate_within, kill_group, start_in_session, wait_for

HERE = Path(__file__).resolve().parent
WORKER = HERE / "rel_dir_worker.py"
RUNFILES = HERE.parent / "ecosystem" / "runfiles"
ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONFAULTHANDLER": "1"}
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _worker(logdir, mode, arg=None):
    cmd = [sys.executable, "-u", str(WORKER), str(logdir), mode] + ([str(arg)] if arg else [])
    return start_in_session(cmd, env=ENV)


def _snapshot(d: Path) -> dict:
    return {p.name: (p.stat().st_mtime_ns, p.stat().st_size) for p in d.iterdir()}


def _trainbus_lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("trainbus")]


def test_a_second_training_in_the_same_directory_is_refused_and_sigkill_releases_the_lock(tmp_path):
    d = tmp_path / "log"
    go = tmp_path / "go"
    first = _worker(d, "hold", go)
    try:
        wait_for((tmp_path / "started").exists, 240, "the first training to hold at step 3", first)
        before = _snapshot(d)
        holder = (d / ".trainbus.lock").read_text()
        assert holder.startswith(f"pid {first.pid} on ")

        # a second script: refused at once, one line, status 75, nothing touched
        go2 = tmp_path / "go2"
        go2.write_text("")  # (were it not refused, it would train 2 epochs and exit 0)
        # forked from the worker's zygote (tests/_support/zygote.py), as _worker's processes are
        second = zygote.run([sys.executable, str(WORKER), str(d), "hold", str(go2)], timeout=240,
                            env={**os.environ, **ENV})
        assert second.returncode == 75, second.stderr[-3000:]
        assert "Traceback" not in second.stderr and "TRAINED" not in second.stdout
        assert _trainbus_lines(second.stderr) == [
            f"trainbus: the run directory {d} is in use by another training ({holder.strip()}); wait for it to end, "
            "or give this run another directory (logger.set_logger_dir / logdir = ...). Nothing in it was changed"]
        assert _snapshot(d) == before

        # trainbus train with a run file naming the same directory: the same refusal
        run = tmp_path / "run.toml"
        run.write_text((RUNFILES / "valid.toml").read_text().replace("LOGDIR", str(d)))
        cli = zygote.run([sys.executable, "-m", "trainbus", "train", str(run)], timeout=240, cwd=str(RUNFILES),
                         env={**os.environ, **ENV, "PYTHONPATH": str(RUNFILES)})
        assert cli.returncode == 75, cli.stderr[-3000:]
        assert _trainbus_lines(cli.stderr) == _trainbus_lines(second.stderr)
        assert _snapshot(d) == before
    finally:
        kill_group(first)
    first.wait(60)
    assert first.returncode == -signal.SIGKILL
    # the kernel released the lock with the process: the next training runs
    third = zygote.run([sys.executable, str(WORKER), str(d), "hold", str(go2)], timeout=300, env={**os.environ, **ENV})
    assert third.returncode == 0 and "TRAINED" in third.stdout, third.stderr[-3000:]
    assert not (d / ".trainbus.lock").exists()  # the killed holder's description was replaced, then removed


def test_two_trainings_in_one_process_in_one_directory_are_refused(tmp_path):
    """The lock belongs to the open directory, not to the process: a second lock in the same
    process is refused as well, and released locks can be taken again."""
    from trainbus.checkpoint import RunDirBusyError, RunDirLock

    a = RunDirLock(str(tmp_path)).acquire()
    a.describe_holder()
    with pytest.raises(RunDirBusyError) as e:
        RunDirLock(str(tmp_path)).acquire()
    assert e.value.exit_code == 75 and f"pid {os.getpid()} on " in str(e.value)
    a.release()
    b = RunDirLock(str(tmp_path)).acquire()
    assert b.held
    b.release()


def _mount(*args):
    subprocess.run(["mount", *args], check=True, capture_output=True)


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if ".tmp" in p.name)


@pytest.mark.skipif(not IS_ROOT, reason="mounting a tmpfs needs root; the write-failing file object tests in "
                    "plugins/saver cover the same policy without it")
def test_a_disk_that_fills_up_mid_run_loses_nothing_and_training_goes_on(tmp_path):
    d = tmp_path / "log"
    d.mkdir()
    _mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(d))
    try:
        proc = _worker(d, "fill")
        out, err = communicate_within(proc, 400, "the training")
        assert proc.returncode == 0 and "TRAINED" in out, err[-3000:] + out[-3000:]
        assert "--- Logging error ---" not in err and "Traceback" not in err, err[-3000:]
        full = [ln for ln in (out + err).splitlines() if "No space left on device (ENOSPC)" in ln]
        assert any("ModelSaver: cannot save the checkpoint of global_step 4 to" in ln for ln in full), full
        # log.log fails only once its last page is used up: then one warning, never a traceback per record
        assert [ln for ln in err.splitlines() if "cannot write the log file" in ln] in ([], [
            f"[trainbus] WRN cannot write the log file {d / 'log.log'}: No space left on device (ENOSPC); messages "
            "go on on the console only until it can be written again."])
        # after the disk was freed: the newest checkpoints are there, listed and readable
        assert tf.train.latest_checkpoint(str(d)) == str(d / "model-12")
        assert int(tf.train.load_checkpoint(str(d / "model-12")).get_tensor("global_step")) == 12
        assert int(tf.train.load_checkpoint(str(d / "min-err.tfmodel")).get_tensor("global_step")) == 12
        stats = json.loads((d / "stats.json").read_text())
        assert [r["epoch_num"] for r in stats] == [1, 2, 3, 4, 5, 6]  # records kept in memory while full
        assert _leftovers(d) == []
        assert "writing" in out and "works again" in out
    finally:
        subprocess.run(["umount", str(d)], check=False)


@pytest.mark.skipif(not IS_ROOT, reason="a read-only bind mount needs root; the write-failing file object tests in "
                    "plugins/saver cover the same policy without it")
def test_a_disk_that_turns_read_only_mid_run_keeps_the_last_good_files(tmp_path):
    d = tmp_path / "log"
    d.mkdir()
    try:
        proc = _worker(d, "readonly")
        out, err = communicate_within(proc, 400, "the training")
        assert proc.returncode == 0 and "TRAINED" in out, err[-3000:] + out[-3000:]
        assert "--- Logging error ---" not in err and "Traceback" not in err, err[-3000:]
        ro = [ln for ln in (out + err).splitlines() if "Read-only file system (EROFS)" in ln]
        assert any("ModelSaver: cannot save the checkpoint of global_step 4 to" in ln for ln in ro), ro
        assert any(f"JSONWriter: cannot write {d / 'stats.json'}" in ln for ln in ro), ro
        assert any(f"CSVWriter: cannot write {d / 'stats.csv'}" in ln for ln in ro), ro
        # the same failure of the same file is said once, not every epoch
        assert len([ln for ln in ro if f"JSONWriter: cannot write {d / 'stats.json'}" in ln]) == 1, ro
        assert tf.train.latest_checkpoint(str(d)) == str(d / "model-2")
        assert int(tf.train.load_checkpoint(str(d / "min-err.tfmodel")).get_tensor("global_step")) == 2
        assert [r["epoch_num"] for r in json.loads((d / "stats.json").read_text())] == [1]
        assert _leftovers(d) == []
    finally:
        while subprocess.run(["umount", str(d)], capture_output=True).returncode == 0:
            pass  # the worker's read-only bind mount
