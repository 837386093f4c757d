"""Helpers of the reliability tests (importable from tests and from their subprocesses)."""

from __future__ import annotations

import signal
import subprocess
import time


def wait_for(pred, timeout: float, what: str, proc: subprocess.Popen | None = None):
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
