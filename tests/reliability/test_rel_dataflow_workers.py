"""A data worker that dies, fails or stalls ends a real ``trainbus train`` run (QueueInput over
MultiProcessRunnerZMQ, the default for a run file's dataflow) with a non-zero status and ONE
error naming the runner, the worker's pid and how it ended; no "final" checkpoint, no worker left
(not even a zombie), no pipe directory left. A SIGTERM while the input is stalled still stops
gracefully, with the final checkpoint.

Every wait is on a file or a process end, with deadlines meant for a loaded machine."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from subprocs import communicate_within, kill_group, trainbus_train, wait_for

pytestmark = pytest.mark.timeout(400)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
START_LIMIT = 240
STOP_LIMIT = 120

_RUN_FILE = """
[model]
class = "tinyrun:LinearNet"
args = {{ lr = 0.05 }}

[data]
function = "rel_df_workers:data"
args = {data_args}

[[callbacks]]
name = "ModelSaver"
args = {{ max_to_keep = 2 }}

[[callbacks]]
name = "PeriodicTrigger"
args = {{ triggerable = {{ object = "rel_df_workers:Ready", args = {{ path = "{ready}" }} }}, every_k_steps = 1 }}

[train]
steps_per_epoch = 4
max_epoch = 100000
logdir = "{logdir}"
"""


class Run:
    """One ``trainbus train`` of a run file whose data is ``rel_df_workers:data(**data_args)``."""

    def __init__(self, tmp_path: Path, data_args: str) -> None:
        self.logdir, self.ready = tmp_path / "log", tmp_path / "ready"
        run = tmp_path / "run.toml"
        run.write_text(_RUN_FILE.format(data_args=data_args, ready=self.ready, logdir=self.logdir))
        (tmp_path / "tinyrun.py").write_text((ROOT / "tests" / "ecosystem" / "runfiles" / "tinyrun.py").read_text())
        (tmp_path / "rel_df_workers.py").write_text((HERE / "rel_df_workers.py").read_text())
        self.proc = trainbus_train(run, tmp_path)

    def wait_ready(self) -> dict:
        wait_for(self.ready.exists, START_LIMIT, "the first training step", self.proc)
        return json.loads(self.ready.read_text())

    def finish(self) -> tuple[str, str]:
        try:
            return communicate_within(self.proc, STOP_LIMIT, "the training process")
        finally:
            kill_group(self.proc)

    def leftovers(self) -> dict:
        end = Path(str(self.ready) + ".end")
        assert end.exists(), "the training process did not get to its exit handlers"
        return json.loads(end.read_text())

    def checkpoints(self) -> list[str]:
        return sorted(p.name for p in self.logdir.glob("model-*.index")) if self.logdir.exists() else []


def _error_lines(err: str, pid: int) -> list[str]:
    return [ln for ln in err.splitlines() if f"pid {pid}" in ln]


def _assert_clean(run: Run, info: dict) -> None:
    left = run.leftovers()
    assert left["children"] == [], f"child processes left: {left['children']}"
    assert left["pipe_dirs"] == [], f"pipe directories left: {left['pipe_dirs']}"
    assert info["pipe_dir"] and not os.path.exists(info["pipe_dir"])
    for pid in info["pids"]:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # gone, and reaped (its parent has ended too)


def test_killed_worker_ends_training_with_one_error(tmp_path):
    run = Run(tmp_path, '{ runner = "zmq", nproc = 1 }')
    info = run.wait_ready()
    pid = info["pids"][0]
    os.kill(pid, signal.SIGKILL)
    out, err = run.finish()
    assert run.proc.returncode == 1, (run.proc.returncode, err[-3000:])
    lines = _error_lines(err, pid)
    assert lines == [f"trainbus_dataflow.parallel.WorkerDiedError: MultiProcessRunnerZMQ: worker 0 (pid {pid}) died "
                     "without reporting an error (killed by signal SIGKILL (9); killed, or out of memory?); the other "
                     "workers were stopped"], err[-3000:]
    assert err.strip().splitlines()[-1] == lines[0]  # the last word on stderr
    assert "running out of data" not in out + err
    # it failed: the saver writes no "final" checkpoint (the ones of finished epochs stay)
    assert "ModelSaver: training failed (WorkerDiedError); no final checkpoint is written." in out
    _assert_clean(run, info)


def test_stopped_worker_with_a_short_timeout_is_named(tmp_path):
    run = Run(tmp_path, '{ runner = "zmq", nproc = 1, stall_timeout = 3 }')
    info = run.wait_ready()
    pid = info["pids"][0]
    os.kill(pid, signal.SIGSTOP)
    out, err = run.finish()
    assert run.proc.returncode == 1, (run.proc.returncode, err[-3000:])
    lines = _error_lines(err, pid)
    assert len(lines) == 1 and err.strip().splitlines()[-1] == lines[0], err[-3000:]
    assert lines[0].startswith("trainbus_dataflow.parallel.WorkerStalledError: MultiProcessRunnerZMQ: no datapoint "
                               "from its worker processes for "), lines[0]
    assert f"worker 0 (pid {pid}) is stopped (SIGSTOP or SIGTSTP)" in lines[0]
    assert "ModelSaver: training failed (WorkerStalledError); no final checkpoint is written." in out
    _assert_clean(run, info)


def test_failing_worker_shows_its_exception_and_traceback_as_lines(tmp_path):
    run = Run(tmp_path, '{ runner = "zmq", nproc = 2, fail_after = 40 }')
    info = run.wait_ready()
    out, err = run.finish()
    assert run.proc.returncode == 1, (run.proc.returncode, err[-3000:])
    heads = [ln for ln in err.splitlines() if "of MultiProcessRunnerZMQ raised ValueError" in ln]
    assert len(heads) == 1, err[-3000:]
    head = heads[0]
    assert head.startswith("ValueError: worker ") and head.endswith("raised ValueError: batch 40 of the test data is "
                                                                     "broken"), head
    assert int(head.split("(pid ")[1].split(")")[0]) in info["pids"]
    tail = err[err.index(head):].splitlines()
    assert tail[1] == "second line of the message; the other workers were stopped. The worker's traceback:"
    assert tail[2] == "Traceback (most recent call last):"
    assert any(ln.startswith("  File ") and "rel_df_workers.py" in ln for ln in tail)
    assert tail[-2:] == ["ValueError: batch 40 of the test data is broken", "second line of the message"]
    assert max(len(ln) for ln in tail) < 300 and "\\n" not in "".join(tail)
    _assert_clean(run, info)


def test_sigterm_during_a_stalled_input_writes_the_final_checkpoint(tmp_path):
    run = Run(tmp_path, '{ runner = "zmq", nproc = 1, stall_timeout = 200 }')
    info = run.wait_ready()
    pid = info["pids"][0]
    os.kill(pid, signal.SIGSTOP)
    last = Path(str(run.ready) + ".last")

    def stalled():  # the step has not moved for two seconds: the queue ran dry
        a = last.read_text()
        t = time.monotonic()
        while time.monotonic() - t < 2.0:
            time.sleep(0.1)
            if last.read_text() != a:
                return False
        return True

    wait_for(stalled, START_LIMIT, "training to stall", run.proc)
    step = int(last.read_text())
    run.proc.send_signal(signal.SIGTERM)
    out, err = run.finish()
    assert run.proc.returncode == 128 + signal.SIGTERM, (run.proc.returncode, err[-3000:])
    final = err.strip().splitlines()[-1]
    assert final.startswith("trainbus: training interrupted by SIGTERM at epoch ") and \
        final.endswith(f", global step {step}; final checkpoint {run.logdir.resolve() / f'model-{step}'}"), final
    assert (run.logdir / f"model-{step}.index").is_file()
    assert "WorkerStalledError" not in err and "Traceback" not in err, err[-3000:]
    _assert_clean(run, info)
