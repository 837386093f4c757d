"""Interrupts end cleanly everywhere: SIGINT/SIGTERM/SIGHUP to a script using
``launch_train_with_config``, to ``examples/digits_convnet.py`` and to ``trainbus train RUN.toml``
write the final checkpoint and end with ONE line on stderr (what stopped, at which step, where
the checkpoint is) and the status 128+signal; no traceback unless ``TRAINBUS_DEBUG=1``; the
script's own ``try/finally`` runs. A second signal while the final checkpoint is being written
ends the process at once and leaves the previous checkpoint listed and readable.

Every wait is on a file or a process end, with deadlines meant for a loaded machine.
"""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

import pytest

from subprocs import signal_when, start_in_session, trainbus_train, wait_for

pytestmark = pytest.mark.timeout(400)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
START_LIMIT = 240
STOP_LIMIT = 120

_LINE = re.compile(r"^trainbus: training interrupted by (SIG[A-Z]+) at epoch (\d+), global step (\d+); (.*)$")


def _last_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert lines, "nothing on stderr"
    return lines[-1]


def _check_final(err: str, signame: str, logdir: Path) -> int:
    """The last stderr line names the signal, the step and the final checkpoint, which exists
    at that step and is the one the state file lists; returns the step."""
    assert "Traceback" not in err, err[-3000:]
    line = _last_line(err)
    m = _LINE.match(line)
    assert m, line
    assert m.group(1) == signame, line
    step = int(m.group(3))
    assert step >= 1
    expected = f"final checkpoint {logdir.resolve() / f'model-{step}'}"
    assert m.group(4) == expected, line
    assert (logdir / f"model-{step}.index").is_file()
    import tensorflow as tf

    state = tf.compat.v1.train.get_checkpoint_state(str(logdir))
    assert state is not None and os.path.basename(state.model_checkpoint_path) == f"model-{step}"
    assert tf.train.load_variable(str(logdir / f"model-{step}"), "global_step") == step
    return step


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["INT", "TERM", "HUP"])
def test_uncaught_interrupt_one_line_status_and_finally(script, sig):
    """A script that neither catches ``TrainingInterrupted`` nor installs anything: the final
    checkpoint, one line naming it, status 128+signal, and its own ``finally`` ran after the stop."""
    s = script("--uncaught", "--saver", "--step-sleep", "0.02")
    s.wait_ready(START_LIMIT)
    s.signal(sig)
    rc, out, err = s.finish(STOP_LIMIT)
    assert rc == 128 + int(sig), (rc, err[-3000:])
    step = _check_final(err, signal.Signals(sig).name, s.logdir)
    assert s.marker_lines() == [f"after_train {s.marker_lines()[0].split()[1]} {step}"]
    assert s.finally_marker.read_text() == f"finally {step}\n"


def test_debug_switch_prints_the_traceback_then_the_line(script):
    """``TRAINBUS_DEBUG=1``: the traceback (down to the training call) comes before the same one
    line; without a ModelSaver the line says no checkpoint was written."""
    s = script("--uncaught", "--step-sleep", "0.02", env={"TRAINBUS_DEBUG": "1"})
    s.wait_ready(START_LIMIT)
    s.signal(signal.SIGTERM)
    rc, out, err = s.finish(STOP_LIMIT)
    assert rc == 128 + signal.SIGTERM, (rc, err[-3000:])
    assert "Traceback (most recent call last):" in err
    assert "launch_train_with_config(cfg, trainer)" in err  # the script's own frame is in it
    assert "TrainingInterrupted: training interrupted by SIGTERM" in err
    line = _last_line(err)
    assert _LINE.match(line) and line.endswith("; no checkpoint was written (the callbacks have no ModelSaver, "
                                               "or saving failed: see the log)"), line


def test_signal_before_the_first_step_says_no_step_had_finished(script):
    """With a ModelSaver, a signal that stops the run before its first step finished: no checkpoint
    of untrained weights is written, and the line says why (not that the callbacks lack a saver)."""
    s = script("--uncaught", "--saver", "--hold-before-first-step")
    s.wait_ready(START_LIMIT)
    s.signal(signal.SIGTERM)
    rc, out, err = s.finish(STOP_LIMIT)
    assert rc == 128 + signal.SIGTERM, (rc, err[-3000:])
    assert "Traceback" not in err, err[-3000:]
    assert _last_line(err) == ("trainbus: training interrupted by SIGTERM at epoch 1, global step 0; "
                               "no checkpoint was written (no training step had finished)"), err[-3000:]
    assert not list(s.logdir.glob("model-*")) and not (s.logdir / "checkpoint").exists()
    assert s.marker_lines() == ["after_train 1 0"]


def test_a_script_that_catches_it_prints_its_own_line_only(script):
    """Caught, the exception prints nothing by itself: the script's own message is the only one."""
    s = script("--saver", "--step-sleep", "0.02")
    s.wait_ready(START_LIMIT)
    s.signal(signal.SIGTERM)
    rc, out, err = s.finish(STOP_LIMIT)
    assert rc == 128 + signal.SIGTERM, (rc, err[-3000:])
    assert err.count("training interrupted by SIGTERM") == 1, err[-3000:]
    _check_final(err, "SIGTERM", s.logdir)


def test_second_signal_while_the_final_checkpoint_is_written(script):
    """SIGTERM, then SIGINT while the final checkpoint's files are being written: the process
    dies by SIGINT at once; the state file still lists the previous checkpoint, which reads."""
    # held at step 5, after epoch 1's checkpoint (step 4): the stop's final save is a new checkpoint
    # (a signal that reached the run at step 4 found that step saved already, and wrote none)
    s = script("--saver", "--step-sleep", "0.02", "--slow-final-save", "300", "--ready-step", "5", "--hold-at-ready")
    s.wait_ready(START_LIMIT)
    assert (s.logdir / "checkpoint").exists()
    s.signal(signal.SIGTERM)
    save_marker = Path(str(s.marker) + ".save")
    wait_for(save_marker.exists, STOP_LIMIT, "the final save to start", s.proc)
    s.signal(signal.SIGINT)
    rc, out, err = s.finish(STOP_LIMIT)
    assert rc == -signal.SIGINT, (rc, err[-3000:])
    assert "second signal (SIGINT)" in err
    final = Path(save_marker.read_text().strip())
    final_step = int(final.name.split("-")[1])
    import tensorflow as tf

    state = tf.compat.v1.train.get_checkpoint_state(str(s.logdir))
    listed = Path(state.model_checkpoint_path)
    listed = listed if listed.is_absolute() else s.logdir / listed
    listed_step = int(listed.name.split("-")[1])
    assert listed_step < final_step, (listed, final)
    reader = tf.train.load_checkpoint(str(listed))
    assert reader.get_tensor("global_step") == listed_step
    assert "W" in reader.get_variable_to_shape_map()


def test_example_script_sigterm_143_with_final_checkpoint(tmp_path):
    """``examples/digits_convnet.py``: SIGTERM during training exits 143 (was 130), one line."""
    logdir = tmp_path / "digits"
    proc = start_in_session([sys.executable, str(ROOT / "examples" / "digits_convnet.py"), "--logdir", str(logdir),
                             "--max-epoch", "1000"], cwd=tmp_path)
    log = logdir / "log.log"
    # once epoch 2 started, steps have run whenever the signal lands (at epoch 1's start it may come
    # before the first step: then no checkpoint is written, see the test above)
    _, err = signal_when(proc, lambda: log.exists() and "Start Epoch 2 " in log.read_text(), "epoch 2 to start",
                         signal.SIGTERM, START_LIMIT, STOP_LIMIT)
    assert proc.returncode == 128 + signal.SIGTERM, (proc.returncode, err[-3000:])
    _check_final(err, "SIGTERM", logdir)


_RUN_FILE = """
[model]
class = "tinyrun:LinearNet"
args = {{ lr = 0.05 }}

[data]
function = "tinyrun:make_data"
args = {{ n = 64, batch = 8 }}

[trainer]
name = "SimpleTrainer"

[[callbacks]]
name = "ModelSaver"
args = {{ max_to_keep = 2 }}

[[callbacks]]
name = "PeriodicTrigger"
args = {{ triggerable = {{ object = "rel_interrupt_probe:Ready", args = {{ path = "{ready}" }} }}, every_k_steps = 1 }}

[train]
steps_per_epoch = 4
max_epoch = 100000
logdir = "{logdir}"
"""


def test_trainbus_train_sigint_130_one_line(tmp_path):
    """``trainbus train RUN.toml`` interrupted: no traceback (it was 20-28 lines and status 1)."""
    logdir, ready = tmp_path / "log", tmp_path / "ready"
    run = tmp_path / "run.toml"
    run.write_text(_RUN_FILE.format(ready=ready, logdir=logdir))
    (tmp_path / "tinyrun.py").write_text((ROOT / "tests" / "ecosystem" / "runfiles" / "tinyrun.py").read_text())
    (tmp_path / "rel_interrupt_probe.py").write_text((HERE / "rel_interrupt_probe.py").read_text())
    proc = trainbus_train(run, tmp_path)
    _, err = signal_when(proc, ready.exists, "the first step", signal.SIGINT, START_LIMIT, STOP_LIMIT)
    assert proc.returncode == 128 + signal.SIGINT, (proc.returncode, err[-3000:])
    _check_final(err, "SIGINT", logdir)
