"""Fixtures of the reliability suite: run the training script in a subprocess, wait for
its marker files, and check that nothing (thread, process) is left behind."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "rel_script.py"
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # the tests import relutil (helpers shared with subprocesses)

from relutil import communicate_within, pid_alive, start_in_session, wait_for  # noqa: E402,F401
from zygote import zygote_pid  # noqa: E402  (tests/_support)


class Script:
    """One run of rel_script.py in its own directory."""

    def __init__(self, root: Path, *args: str, env: dict | None = None) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.logdir = root / "log"
        self.ready = root / "ready"
        self.marker = root / "marker"
        self.pidfile = root / "pids"
        self.finally_marker = root / "finally"
        cmd = [sys.executable, "-u", str(SCRIPT), "--logdir", str(self.logdir), "--ready", str(self.ready),
               "--marker", str(self.marker), "--pidfile", str(self.pidfile), "--finally-marker",
               str(self.finally_marker), *args]
        self.proc = start_in_session(cmd, env={"PYTHONFAULTHANDLER": "1", **(env or {})})

    def wait_ready(self, timeout: float = 240) -> None:
        wait_for(self.ready.exists, timeout, "the first training step", self.proc)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        out, err = communicate_within(self.proc, timeout, "the training process")
        return self.proc.returncode, out, err

    def marker_lines(self) -> list[str]:
        return self.marker.read_text().splitlines() if self.marker.exists() else []

    def child_pids(self) -> list[int]:
        return [int(x) for x in self.pidfile.read_text().split()] if self.pidfile.exists() else []

    def kill_group(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


@pytest.fixture()
def script(tmp_path):
    """``script(*args)`` starts rel_script.py; every started process group is killed afterwards."""
    started: list[Script] = []

    def start(*args: str, name: str = "run", env: dict | None = None) -> Script:
        s = Script(tmp_path / f"{name}{len(started)}", *args, env=env)
        started.append(s)
        return s

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.kill_group()
            s.proc.communicate()


@pytest.fixture()
def no_leaks():
    """Fails the test if it leaves a thread or a child process behind."""
    import psutil

    before_threads = set(threading.enumerate())
    before_children = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    deadline = time.monotonic() + 10
    while True:
        threads = [t for t in threading.enumerate() if t not in before_threads and t.is_alive()]
        zyg = zygote_pid()  # the worker's zygote (started by this test, perhaps) is no leak; its children are
        children = [p for p in psutil.Process().children(recursive=True)
                    if p.pid not in before_children and p.pid != zyg and p.status() != psutil.STATUS_ZOMBIE]
        if not threads and not children:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"left behind: threads {[t.name for t in threads]}, processes {[p.pid for p in children]}")
        time.sleep(0.05)
