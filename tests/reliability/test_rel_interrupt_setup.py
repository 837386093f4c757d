"""Interrupts before the first training step end like interrupts during training: SIGINT,
SIGTERM or SIGHUP while ``launch_train_with_config`` (or ``trainbus train RUN.toml``) builds the
graph, sets up the callbacks or initializes the session ends the process with ONE line on stderr
(what stopped, that nothing was trained, the checkpoint a resumed run would start from) and the
status 128+signal; no traceback unless ``TRAINBUS_DEBUG=1``; the script's own ``finally`` runs;
a second signal ends the process at once even while the main thread is blocked in TensorFlow.

The processes write a file when they start to wait at the chosen place; the tests wait on it
and on the process end, with deadlines meant for a loaded machine.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from subprocs import (communicate_within, default_signal_dispositions, kill_group, signal_when, start_in_session,
                      trainbus_train, wait_for)

pytestmark = pytest.mark.timeout(400)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SCRIPT = HERE / "rel_setup_script.py"
START_LIMIT = 240
STOP_LIMIT = 120
NOTHING = "nothing was trained, no checkpoint was written"


class Run:
    def __init__(self, root: Path, *args: str, env: dict | None = None, logdir: Path | None = None) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.logdir, self.waiting, self.finally_marker = logdir or root / "log", root / "waiting", root / "finally"
        cmd = [sys.executable, "-u", str(SCRIPT), "--logdir", str(self.logdir), "--waiting", str(self.waiting),
               "--finally-marker", str(self.finally_marker), *args]
        self.proc = start_in_session(cmd, env=env)

    def wait_waiting(self) -> str:
        # the file is created, then written: wait for its whole line, not only for it to exist
        wait_for(lambda: self.waiting.exists() and self.waiting.read_text().endswith("\n"), START_LIMIT,
                 "the run to start waiting", self.proc)
        return self.waiting.read_text().strip()

    def finish(self) -> tuple[int, str]:
        _, err = communicate_within(self.proc, STOP_LIMIT, "the process signalled")
        return self.proc.returncode, err


@pytest.fixture()
def run(tmp_path):
    started: list[Run] = []

    def start(*args: str, name: str = "run", env: dict | None = None, logdir: Path | None = None) -> Run:
        r = Run(tmp_path / f"{name}{len(started)}", *args, env=env, logdir=logdir)
        started.append(r)
        return r

    yield start
    for r in started:
        kill_group(r.proc)


def _checkpoint_files(d: Path) -> list[tuple[str, int]]:
    return sorted((p.name, p.stat().st_mtime_ns) for p in d.iterdir() if p.name.startswith(("model-", "checkpoint")))


def _last_line(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert lines, "nothing on stderr"
    return lines[-1]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["INT", "TERM", "HUP"])
def test_signal_while_the_graph_is_built(run, sig):
    """A script that catches nothing, signalled inside ``build_graph``: status 128+signal, no
    traceback, one line saying what stopped and that nothing was trained; its ``finally`` ran;
    the log directory's pending action (delete) was not carried out."""
    r = run("--wait", "graph", "--logdir-action", "d")
    r.logdir.mkdir()
    (r.logdir / "keep.txt").write_text("earlier run\n")
    assert r.wait_waiting() == "build_graph"
    r.proc.send_signal(sig)
    rc, err = r.finish()
    assert rc == 128 + int(sig), (rc, err[-3000:])
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert _last_line(err) == (f"trainbus: interrupted by {signal.Signals(sig).name} before training started "
                               f"(while building the graph); {NOTHING}")
    assert r.finally_marker.read_text() == "finally\n"
    assert sorted(p.name for p in r.logdir.iterdir()) == ["keep.txt"]


def test_debug_switch_traceback_then_the_line_while_the_session_is_initialized(run):
    """``TRAINBUS_DEBUG=1``, SIGINT inside the session initializer: the traceback (through the
    script's own frame) comes before the same kind of line, which names that phase."""
    r = run("--wait", "sessinit", env={"TRAINBUS_DEBUG": "1"})
    assert r.wait_waiting() == "sessinit"
    r.proc.send_signal(signal.SIGINT)
    rc, err = r.finish()
    assert rc == 130, (rc, err[-3000:])
    assert _last_line(err) == f"trainbus: interrupted by SIGINT before training started (while initializing the " \
                              f"session); {NOTHING}"
    tb = err[err.index("Traceback"):]
    assert "rel_setup_script.py" in tb and "InterruptedBeforeTraining" in tb, tb[-3000:]
    assert "KeyboardInterrupt" not in err
    assert r.finally_marker.read_text() == "finally\n"


def test_resuming_run_names_the_checkpoint_it_resumes_from(run):
    """A run that resumes from ``model-4``, signalled while its callbacks are set up: the line
    names that checkpoint and its step; the checkpoint state of the directory is unchanged."""
    first = run("--wait", "none", "--epochs", "1")
    rc, err = first.finish()
    assert rc == 0, err[-3000:]
    before = (first.logdir / "checkpoint").read_text()
    files = _checkpoint_files(first.logdir)
    assert "model-4.index" in [n for n, _ in files], files

    r = run("--wait", "callback", "--resume", "--epochs", "3", logdir=first.logdir)
    assert r.wait_waiting() == "callback"
    r.proc.send_signal(signal.SIGTERM)
    rc, err = r.finish()
    assert rc == 143, (rc, err[-3000:])
    assert "Traceback" not in err, err[-3000:]
    assert _last_line(err) == (f"trainbus: interrupted by SIGTERM before training started (while setting up the "
                               f"callbacks); {NOTHING}; the run resumes from {first.logdir.resolve() / 'model-4'} "
                               f"(global step 4) when started again")
    assert (first.logdir / "checkpoint").read_text() == before
    assert _checkpoint_files(first.logdir) == files


def test_a_script_that_catches_it_prints_its_own_line_only(run):
    """The exception is a ``TrainingInterrupted``: a script catching that decides what is printed."""
    r = run("--wait", "graph", "--catch")
    r.wait_waiting()
    r.proc.send_signal(signal.SIGHUP)
    rc, err = r.finish()
    assert rc == 3, (rc, err[-3000:])
    assert _last_line(err) == "script: caught InterruptedBeforeTraining SIGHUP 129"
    assert "trainbus: interrupted" not in err and "Traceback" not in err, err[-3000:]


def test_second_signal_ends_at_once_while_blocked_in_tensorflow(run):
    """The main thread blocked inside ``Session.run`` cannot run the Python handler: the first
    signal waits for it, a second one ends the process at once by that signal."""
    r = run("--wait", "graph-blocked")
    assert r.wait_waiting() == "graph-blocked"
    r.proc.send_signal(signal.SIGTERM)
    r.proc.send_signal(signal.SIGINT)
    rc, err = r.finish()
    assert rc in (-signal.SIGINT, -signal.SIGTERM), (rc, err[-3000:])
    assert "before training started; terminating now" in _last_line(err), err[-3000:]
    assert not r.finally_marker.exists()


_SECOND_WHILE_UNWINDING = """
import os, signal, sys, time
from trainbus.train import _signals
from trainbus.train._signals import InterruptedBeforeTraining, interrupts_before_training

if sys.argv[1:] == ["watcher-late"]:  # the watcher thread is not scheduled before the end (a loaded machine)
    _signals._SetupWatcher.on_signal = lambda self, signum: None

with interrupts_before_training():
    try:
        os.kill(os.getpid(), signal.SIGTERM)  # handled by the main thread: it is not blocked
        time.sleep(60)
    except InterruptedBeforeTraining:
        # still inside the context, unwinding the first signal's exception: a second one arrives
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(60)
print("the second signal did not end the process")
"""


@pytest.mark.parametrize("watcher", ["watcher-runs", "watcher-late"])
def test_second_signal_while_the_first_ones_exception_unwinds_says_so_once(watcher):
    """The first signal reached the main thread's handler (the main thread was not blocked);
    the second arrives while its exception unwinds, seen by that handler and by the watcher
    thread alike: one line says it, then the process ends by that signal (the race the blocked
    case above can also run into when its first signal comes just before TensorFlow blocks)."""
    import subprocess

    # SIGINT with its default disposition even where the suite runs as a background job (SIGINT ignored)
    proc = subprocess.run([sys.executable, "-c", _SECOND_WHILE_UNWINDING, watcher], capture_output=True, text=True,
                          timeout=STOP_LIMIT, preexec_fn=default_signal_dispositions)
    assert proc.returncode == -signal.SIGINT, (proc.returncode, proc.stdout, proc.stderr[-3000:])
    lines = [ln for ln in proc.stderr.splitlines() if "terminating now" in ln]
    assert lines == ["trainbus: second signal (SIGINT) before training started; terminating now"], proc.stderr[-3000:]
    assert "did not end" not in proc.stdout


_RUN_FILE = """
[model]
class = "rel_setup_probe:WaitingNet"
args = {{ waiting = "{waiting}" }}

[data]
function = "tinyrun:make_data"
args = {{ n = 64, batch = 8 }}

[trainer]
name = "SimpleTrainer"

[[callbacks]]
name = "ModelSaver"

[train]
steps_per_epoch = 4
max_epoch = 3
logdir = "{logdir}"
"""


def test_trainbus_train_sigint_while_the_graph_is_built(tmp_path):
    """``trainbus train RUN.toml`` signalled inside the model's ``build_graph``: status 130, the
    one line, no traceback, nothing written in the log directory."""
    logdir, waiting = tmp_path / "log", tmp_path / "waiting"
    run_file = tmp_path / "run.toml"
    run_file.write_text(_RUN_FILE.format(waiting=waiting, logdir=logdir))
    (tmp_path / "tinyrun.py").write_text((ROOT / "tests" / "ecosystem" / "runfiles" / "tinyrun.py").read_text())
    (tmp_path / "rel_setup_probe.py").write_text((HERE / "rel_setup_probe.py").read_text())
    proc = trainbus_train(run_file, tmp_path)
    _, err = signal_when(proc, waiting.exists, "build_graph to start waiting", signal.SIGINT, START_LIMIT, STOP_LIMIT)
    assert proc.returncode == 130, (proc.returncode, err[-3000:])
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert _last_line(err) == f"trainbus: interrupted by SIGINT before training started (while building the " \
                              f"graph); {NOTHING}"
    assert not logdir.exists() or not any(p.name.startswith("model-") for p in logdir.iterdir())
