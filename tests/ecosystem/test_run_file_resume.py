"""Running a run file again continues the run in its log directory (``logdir_action = "k"``):
the newest checkpoint's weights and global step, the next epoch, the callbacks' state and the
monitors' history; ``stats.json`` never holds two records of one step, TensorBoard shows one
curve per tag, and no checkpoint of the earlier run is removed before a newer one exists."""

from __future__ import annotations

import json
import os
import pathlib
import sys

import pytest
import zygote  # tests/_support

from trainbus.utils import logger

HERE = pathlib.Path(__file__).resolve().parent / "runfiles"

pytestmark = pytest.mark.timeout(240)

# a callback that stops the run after a given step, as a signal handler does (the trainer's
# request_stop: the loop ends, after_train writes the final checkpoint)
HELPERS = '''
from trainbus.callbacks import Callback


class StopAfterStep(Callback):
    def __init__(self, step: int) -> None:
        self.step = step

    def _trigger_step(self) -> None:
        if self.trainer.global_step == self.step:
            self.trainer.request_stop(f"stopped after step {self.step}")


class CountTriggers(Callback):
    """Counts how often it was triggered; the count is its saved state."""

    def __init__(self) -> None:
        self.count = 0

    def _trigger(self) -> None:
        self.count += 1

    def _state_dict(self) -> dict:
        return {"count": self.count}

    def _load_state_dict(self, state: dict) -> None:
        self.count = state["count"]


class SlowSteps(Callback):
    """Sleeps after every step, so that a signal arrives in the middle of an epoch; writes
    the global step to ``marker`` (for the test to wait on)."""

    def __init__(self, seconds: float, marker: str) -> None:
        self.seconds = seconds
        self.marker = marker

    def _trigger_step(self) -> None:
        import time

        from trainbus.utils.fs import atomic_write_text

        atomic_write_text(self.marker, str(self.trainer.global_step))  # never seen empty or half written
        time.sleep(self.seconds)
'''

RUN = """
[model]
class = "tinyrun:LinearNet"
args = {{ lr = 0.05 }}

[data]
function = "tinyrun:make_data"
args = {{ n = 32, batch = 8 }}

[[callbacks]]
name = "ModelSaver"
args = {{ max_to_keep = {keep} }}

[[callbacks]]
name = "MinSaver"
args = {{ monitor_stat = "cost" }}
{extra}
[[monitors]]
name = "JSONWriter"

[[monitors]]
name = "TFEventWriter"

[train]
steps_per_epoch = 4
max_epoch = {epochs}
logdir = "{logdir}"
logdir_action = "k"
"""

STOP = """
[[callbacks]]
name = "PeriodicTrigger"
args = {{ triggerable = {{ object = "runhelpers:StopAfterStep", args = {{ step = {step} }} }}, every_k_steps = 1 }}
"""


@pytest.fixture()
def rundir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tinyrun.py").write_text((HERE / "tinyrun.py").read_text())
    (tmp_path / "runhelpers.py").write_text(HELPERS)
    yield tmp_path
    logger._reset_for_tests()


def _write(rundir: pathlib.Path, epochs: int, keep: int = 2, stop_at: int | None = None) -> pathlib.Path:
    extra = STOP.format(step=stop_at) if stop_at else ""
    p = rundir / "run.toml"
    p.write_text(RUN.format(keep=keep, epochs=epochs, logdir=rundir / "log", extra=extra))
    return p


def _train_here(path: pathlib.Path) -> str:
    """``train_from_file`` in this process (what ``trainbus train`` calls); returns the run's
    ``log.log``."""
    from trainbus.runfile import train_from_file

    train_from_file(path)
    text = (path.parent / "log" / "log.log").read_text()
    logger._reset_for_tests()
    return text


def _stats(log: pathlib.Path) -> list[tuple[int, int]]:
    return [(r["epoch_num"], r["global_step"]) for r in json.loads((log / "stats.json").read_text())]


def _steps(log: pathlib.Path) -> list[int]:
    return sorted(int(p.name[len("model-"):-len(".index")]) for p in log.glob("model-*.index"))


def test_rerun_after_a_stop_mid_epoch_continues_from_its_final_checkpoint(rundir) -> None:
    """The scenario of a SIGTERM in the middle of an epoch: the final checkpoint (step 6)
    is where the same file, run again, continues: step 6's weights, epoch 2, MinSaver's state,
    stats.json's history; the checkpoints that follow are newer than 6."""
    import tensorflow as tf

    log = rundir / "log"
    first = _train_here(_write(rundir, epochs=3, keep=1, stop_at=6))
    assert "stopped after step 6" in first
    assert _steps(log) == [6]
    w6 = tf.train.load_variable(str(log / "model-6"), "w")
    assert _stats(log) == [(1, 4)]

    out = _train_here(_write(rundir, epochs=3, keep=1, stop_at=6))
    assert f"Restoring checkpoint from {log / 'model-6'}" in out, out[-3000:]
    assert "Setting starting_epoch to 2" in out
    assert "Start Epoch 1 " not in out and "Start Epoch 2 " in out
    assert "Restored the state of callback" in out  # MinSaver's best value came back
    # the run continued at step 7 and finished epoch 2 on its boundary: epochs 2 and 3 end at
    # steps 8 and 12, as in an uninterrupted run
    assert _stats(log) == [(1, 4), (2, 8), (3, 12)]
    assert _steps(log) == [12]  # max_to_keep = 1: model-6 went only when a newer one existed
    assert tf.train.load_variable(str(log / "model-12"), "global_step") == 12
    # the weights continued from model-6 (a fresh start would have 8 steps from zero)
    assert not (tf.train.load_variable(str(log / "model-12"), "w") == w6).all()
    state = json.loads((log / "model-12.trainbus.json").read_text())
    assert any("MinSaver" in k for k in state), state


def test_rerun_from_an_older_checkpoint_leaves_no_overlapping_steps(rundir) -> None:
    """A crash after the events and statistics of step 12 but before its checkpoint: the
    rerun continues from model-8; stats.json and TensorBoard hold each step once, with the
    values of the continued run."""
    from google.protobuf import text_format
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorflow.python.checkpoint.checkpoint_management import CheckpointState

    log = rundir / "log"
    _train_here(_write(rundir, epochs=3))
    assert _steps(log) == [8, 12]
    for f in log.glob("model-12.*"):
        f.unlink()
    state = CheckpointState(model_checkpoint_path="model-8", all_model_checkpoint_paths=["model-8"])
    (log / "checkpoint").write_text(text_format.MessageToString(state))
    assert _stats(log)[-1] == (3, 12)  # the lost epoch's statistics are there

    again = _train_here(_write(rundir, epochs=4))
    assert "Setting starting_epoch to 3" in again
    assert _stats(log) == [(1, 4), (2, 8), (3, 12), (4, 16)]
    events = sorted(log.glob("events.out.tfevents.*"))
    assert len(events) == 2
    acc = ea.EventAccumulator(str(log), size_guidance={ea.SCALARS: 0})
    acc.Reload()
    tags = [t for t in acc.Tags()["scalars"] if "cost" in t]
    assert tags, acc.Tags()
    for tag in tags:
        steps = [e.step for e in acc.Scalars(tag)]
        assert steps == sorted(set(steps)) and steps[-2:] == [12, 16], (tag, steps)
        # step 12's value is the continued run's, not the lost one's
        import tensorflow as tf

        new = {e.step: v.simple_value for e in tf.compat.v1.train.summary_iterator(str(events[1]))
               for v in e.summary.value if v.tag == tag}
        assert acc.Scalars(tag)[-2].value == pytest.approx(new[12])


def test_resume_false_starts_over(rundir, monkeypatch) -> None:
    """``resume = false`` in [train]: the same file trains from step 0 again (the choice is
    the user's; the default is to continue). In process, through ``train_from_file``."""
    from trainbus.runfile import train_from_file

    monkeypatch.chdir(rundir)
    log = rundir / "log"
    p = _write(rundir, epochs=1)
    train_from_file(p)
    assert _stats(log) == [(1, 4)] and _steps(log) == [4]
    p.write_text(p.read_text().replace('logdir_action = "k"', 'logdir_action = "k"\nresume = false'))
    train_from_file(p)
    text = (log / "log.log").read_text()
    assert "Restoring checkpoint" not in text and "Start Epoch 1 " in text
    assert _stats(log) == [(1, 4)] and _steps(log) == [4]
    # and the default (resume = true) continues, in process as well
    p.write_text(p.read_text().replace("resume = false", "").replace("max_epoch = 1", "max_epoch = 2"))
    train_from_file(p)
    assert "Setting starting_epoch to 2" in (log / "log.log").read_text()
    assert _stats(log) == [(1, 4), (2, 8)] and _steps(log) == [4, 8]


SLOW = """
[[callbacks]]
name = "PeriodicTrigger"
args = { triggerable = { object = "runhelpers:SlowSteps", args = { seconds = 0.2, marker = "steps.txt" } }, every_k_steps = 1 }
"""


def test_sigterm_then_the_same_command_continues(rundir) -> None:
    """The issue's scenario: ``trainbus train run.toml`` is sent SIGTERM in the middle of a
    run, writes its final checkpoint, and the same command continues from it."""
    import signal
    import time

    import tensorflow as tf

    log = rundir / "log"
    p = _write(rundir, epochs=3, keep=2)
    p.write_text(p.read_text().replace("[[monitors]]", SLOW + "\n[[monitors]]", 1))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    # forked from the worker's zygote (tests/_support/zygote.py): a process of its own, TensorFlow imported
    proc = zygote.zygote().popen([sys.executable, "-m", "trainbus", "train", str(p)], cwd=rundir, env=env)
    try:
        deadline = time.monotonic() + 150
        marker = rundir / "steps.txt"
        # in epoch 2, after its first step: the final checkpoint will be in the middle of an epoch
        while True:
            text = marker.read_text().strip() if marker.exists() else ""  # read once: the step it says
            if text.isdigit() and int(text) >= 5:
                break
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run did not reach step 5 in time"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode != 0, "the run finished before the signal"
    final = tf.train.latest_checkpoint(str(log))
    step = int(final.rsplit("-", 1)[1])
    assert 4 < step < 12, (step, err[-2000:])
    assert int(tf.train.load_variable(final, "global_step")) == step

    again = _train_here(p)  # what `trainbus train` runs, in this process (saves starting TensorFlow again)
    assert f"Restoring checkpoint from {final}" in again, again[-3000:]
    assert f"Setting starting_epoch to {step // 4 + 1}" in again
    stats = _stats(log)
    steps = [s for _, s in stats]
    assert steps == sorted(set(steps)) and [e for e, _ in stats] == [1, 2, 3], stats
    last = 3 * 4  # epoch 3 ends on its boundary, whatever step the interrupted run stopped at
    assert steps[-1] == last and _steps(log)[-1] == last
    assert all(s >= step for s in _steps(log))  # the interrupted run's checkpoint went only for newer ones


@pytest.mark.parametrize("action", ["d", "b"])
def test_delete_or_backup_starts_over_instead_of_resuming(rundir, action) -> None:
    """``logdir_action = "d"``/``"b"``: the old checkpoints are about to go away, so the run
    must not restore them (it would restore weights of files it then deletes)."""
    log = rundir / "log"
    _train_here(_write(rundir, epochs=2))
    assert _steps(log) == [4, 8]
    p = _write(rundir, epochs=1)
    p.write_text(p.read_text().replace('logdir_action = "k"', f'logdir_action = "{action}"'))
    text = _train_here(p)
    assert "Restoring checkpoint" not in text and "Start Epoch 1 " in text
    assert "will be emptied" in text
    assert _stats(log) == [(1, 4)] and _steps(log) == [4]
    backups = [x for x in rundir.iterdir() if x.name.startswith("log") and x.name != "log"]
    assert len(backups) == (1 if action == "b" else 0)
    if backups:
        assert _steps(backups[0]) == [4, 8]


def test_checkpoints_in_a_model_savers_own_directory_are_found(rundir) -> None:
    """``ModelSaver(checkpoint_dir=...)`` elsewhere than the log directory: running the file
    again restores from there."""
    log, ckpt = rundir / "log", rundir / "ckpt"
    p = _write(rundir, epochs=1)
    saver_args = f'args = {{ max_to_keep = 2, checkpoint_dir = "{ckpt}" }}'
    text = p.read_text().replace("args = { max_to_keep = 2 }", saver_args)
    p.write_text(text.replace('monitor_stat = "cost"', f'monitor_stat = "cost", checkpoint_dir = "{ckpt}"'))
    _train_here(p)
    assert _steps(ckpt) == [4] and _steps(log) == []
    p.write_text(p.read_text().replace("max_epoch = 1", "max_epoch = 2"))
    text = _train_here(p)
    assert f"Restoring checkpoint from {ckpt / 'model-4'}" in text
    assert _steps(ckpt) == [4, 8] and _stats(log) == [(1, 4), (2, 8)]


def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(rundir) -> None:
    """The newest checkpoint's data file is truncated (a crash while it was copied, a full
    disk): running the file again resumes from the newest one that reads completely, and the
    log says which and why."""
    log = rundir / "log"
    _train_here(_write(rundir, epochs=2))
    data = log / "model-8.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:5])
    text = _train_here(_write(rundir, epochs=3))
    assert f"Restoring checkpoint from {log / 'model-4'}" in text, text[-3000:]
    assert "model-8" in text and "Setting starting_epoch to 2" in text
    assert _stats(log) == [(1, 4), (2, 8), (3, 12)]


def test_nothing_to_resume_from_is_reported_as_a_problem_of_the_run(rundir) -> None:
    """Every checkpoint of the log directory is damaged: the run reports it (with what to do)
    like the file's other problems, starts nothing and leaves the directory as it was."""
    from trainbus.runfile import RunConfigError, train_from_file

    log = rundir / "log"
    _train_here(_write(rundir, epochs=1))
    data = log / "model-4.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:5])
    before = sorted((x.name, x.stat().st_size) for x in log.iterdir())
    p = _write(rundir, epochs=2)
    with pytest.raises(RunConfigError) as err:
        train_from_file(p)
    (problem,) = err.value.problems
    assert problem.where == "train.logdir" and problem.line == p.read_text().splitlines().index(f'logdir = "{log}"') + 1
    assert "cannot resume from the log directory" in problem.message and "model-4" in problem.message
    assert "resume = false" in problem.message
    assert sorted((x.name, x.stat().st_size) for x in log.iterdir()) == before


COUNTERS = """
[[callbacks]]
name = "PeriodicTrigger"
state_key = "count-every-step"
args = { triggerable = { object = "runhelpers:CountTriggers", args = {} }, every_k_steps = 1 }

[[callbacks]]
name = "PeriodicTrigger"
state_key = "count-every-other-step"
args = { triggerable = { object = "runhelpers:CountTriggers", args = {} }, every_k_steps = 2 }
"""


def test_state_key_tells_two_callbacks_of_one_class_apart_on_resume(rundir) -> None:
    """Two stateful callbacks of one class (their default keys are equal) with a ``state_key``
    each in the run file: the run trains, the dry run shows the keys, the checkpoint holds
    both states under their keys, and running the file again gives each its own count back
    (swapped states would give 6 and 6 after the second epoch, not 8 and 4)."""
    from trainbus.runfile import train_from_file

    log = rundir / "log"
    p = _write(rundir, epochs=1)
    p.write_text(p.read_text().replace("[[monitors]]", COUNTERS + "\n[[monitors]]", 1))
    plan = train_from_file(p, dry_run=True)
    assert "state_key='count-every-step'" in plan and "state_key='count-every-other-step'" in plan, plan
    assert not log.exists()
    _train_here(p)
    state = json.loads((log / "model-4.trainbus.json").read_text())
    assert state["count-every-step"] == {"count": 4} and state["count-every-other-step"] == {"count": 2}, state

    p.write_text(p.read_text().replace("max_epoch = 1", "max_epoch = 2"))
    out = _train_here(p)
    assert "Setting starting_epoch to 2" in out
    state = json.loads((log / "model-8.trainbus.json").read_text())
    assert state["count-every-step"] == {"count": 8} and state["count-every-other-step"] == {"count": 4}, state
