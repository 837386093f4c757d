"""Helpers of the reliability tests; they live in ``tests/_support/subprocs.py``, shared with
the other suites that start and signal processes."""

from __future__ import annotations

from subprocs import communicate_within, default_signal_dispositions, kill_group, pid_alive, signal_when, start_in_session, wait_for

__all__ = ["communicate_within", "default_signal_dispositions", "kill_group", "pid_alive", "signal_when", "start_in_session", "wait_for"]
