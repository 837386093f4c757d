"""Processes the tests start and signal: each in a session of its own (so that its whole group
can be killed), with the default dispositions of the stop signals, and never left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any, Callable


def wait_for(pred: Callable[[], Any], timeout: float, what: str, proc: subprocess.Popen | None = None) -> Any:
    """``pred()``'s first true value, polled until ``timeout`` seconds; fails at once, with the
    process's output, when ``proc`` ends first."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the process ended (rc={proc.returncode}) before {what}\n--- stderr\n{err[-3000:]}\n--- stdout\n{out[-3000:]}")
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def pid_alive(pid: int) -> bool:
    import psutil

    try:
        p = psutil.Process(pid)
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def default_signal_dispositions() -> None:
    """``preexec_fn`` of the processes the tests signal: SIGINT, SIGTERM and SIGHUP with their
    default disposition, whatever the test runner inherited. A shell without job control starts
    a background command (``pytest ... &`` in a script, a CI step) with SIGINT ignored; a child
    inherits that, Python then keeps SIGINT ignored, and so does trainbus (on purpose: a
    background job must not react to the terminal's Ctrl-C) - a test sending SIGINT to such a
    child would wait for a stop that never comes."""
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


def start_in_session(cmd: list[str], cwd: Any = None, env: dict | None = None, fresh: bool = False) -> subprocess.Popen:
    """Start ``cmd`` (text pipes for stdout and stderr) in a new session, TensorFlow's C++ log
    quiet, ``env`` added to this process's environment.

    A Python command of this interpreter is forked from the worker's zygote (see ``zygote.py``:
    a real process that skips TensorFlow's import) unless ``fresh`` asks for a new interpreter,
    which a test about import-time behaviour needs."""
    if not fresh and cmd and cmd[0] == sys.executable:
        import zygote

        try:
            return zygote.zygote().popen(cmd, cwd=cwd, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})})
        except ValueError:  # not a script or -m module: a new interpreter
            pass
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})},
                            start_new_session=True, preexec_fn=default_signal_dispositions)


def trainbus_train(run_file: Any, cwd: Any, env: dict | None = None, fresh: bool = False) -> subprocess.Popen:
    """``python -m trainbus train RUN_FILE`` started with :func:`start_in_session`."""
    return start_in_session([sys.executable, "-m", "trainbus", "train", str(run_file)], cwd=cwd, env=env, fresh=fresh)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group of ``proc`` (still running) and reap it."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def communicate_within(proc: subprocess.Popen, timeout: float, what: str) -> tuple[str, str]:
    """``(stdout, stderr)`` of ``proc`` once it ended; if it has not ended within ``timeout``
    seconds, its group is killed and the test fails naming ``what`` it was doing."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        raise AssertionError(f"{what} did not end within {timeout} s\n{err[-3000:]}") from None


def signal_when(proc: subprocess.Popen, ready: Callable[[], Any], what: str, sig: int, start_limit: float,
                stop_limit: float) -> tuple[str, str]:
    """Wait until ``ready()`` (``what`` names it), send ``sig``, and return the process's
    ``(stdout, stderr)`` once it ended; its group is killed if anything fails on the way."""
    try:
        wait_for(ready, start_limit, what, proc)
        proc.send_signal(sig)
        return proc.communicate(timeout=stop_limit)
    finally:
        kill_group(proc)
