"""Guarantee 1: SIGINT/SIGTERM/SIGHUP stop training gracefully; a second signal kills at once.

The subprocess tests wait on marker files and process ends with generous deadlines (the
suite must hold on a loaded machine); nothing depends on how fast a step runs."""

from __future__ import annotations

import os
import signal
import time

import pytest

from trainbus.callbacks.base import Callback
from trainbus.testing import HookRecorder, train_tiny
from trainbus.train import TrainingInterrupted

pytestmark = pytest.mark.timeout(400)

#: generous bounds for a loaded machine (both cores busy): a process start, a graceful stop
START_LIMIT = 240
STOP_LIMIT = 120


def _assert_one_line_exit(err: str, signame: str) -> None:
    assert "Traceback" not in err, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert lines, "nothing on stderr"
    assert lines[-1].startswith(f"trainbus: training interrupted by {signame} at epoch "), lines[-1]


def test_sigterm_stops_gracefully_with_child_process_input(script):
    """SIGTERM: the step finishes, after_train runs, the forked input worker and the queue
    thread stop, the process exits 143 with one line on stderr."""
    from relutil import pid_alive  # noqa: PLC0415 - the suite's conftest

    s = script("--input", "childproc", "--step-sleep", "0.02")
    s.wait_ready(START_LIMIT)
    s.signal(signal.SIGTERM)
    rc, out, err = s.finish(STOP_LIMIT)
    assert rc == 128 + signal.SIGTERM, (rc, err[-2000:])
    _assert_one_line_exit(err, "SIGTERM")
    lines = s.marker_lines()
    assert len(lines) == 1 and lines[0].startswith("after_train "), lines
    assert "Training was stopped by StopTraining: signal SIGTERM" in out
    pids = s.child_pids()
    assert pids, "the dataflow did not start its worker process"
    from relutil import wait_for  # noqa: PLC0415

    wait_for(lambda: not [p for p in pids if pid_alive(p)], 30, "the input worker process to end with the trainer")


def test_second_signal_kills_during_slow_after_train(script):
    """A second signal while the callbacks finalize ends the process at once."""
    s = script("--after-train-sleep", "300", "--step-sleep", "0.02")
    s.wait_ready(START_LIMIT)
    s.signal(signal.SIGTERM)
    from relutil import wait_for  # noqa: PLC0415

    wait_for(lambda: s.marker_lines(), STOP_LIMIT, "after_train to start", s.proc)
    t0 = time.monotonic()
    s.signal(signal.SIGINT)
    rc, out, err = s.finish(timeout=STOP_LIMIT)
    assert time.monotonic() - t0 < 100  # at once: far less than the 300 s after_train would sleep
    assert rc == -signal.SIGINT, (rc, err[-2000:])
    assert "second signal (SIGINT)" in err
    assert "after_train slept" not in s.marker_lines()


def test_second_signal_kills_while_step_is_blocked_in_tensorflow(script):
    """The step is blocked inside Session.run (an input that never delivers): the first
    signal cannot finish it, the second still terminates the process at once."""
    s = script("--input", "blocking", "--ready-step", "3")
    s.wait_ready(START_LIMIT)  # step 3 done: step 4 waits in the queue's dequeue forever
    time.sleep(1.0)  # let the main thread get from trigger_step into Session.run
    assert s.proc.poll() is None
    s.signal(signal.SIGTERM)
    time.sleep(0.5)
    assert s.proc.poll() is None
    t0 = time.monotonic()
    s.signal(signal.SIGTERM)
    rc, out, err = s.finish(timeout=STOP_LIMIT)
    assert time.monotonic() - t0 < 100
    assert rc == -signal.SIGTERM, (rc, err[-2000:])
    assert "second signal (SIGTERM)" in err


class _KillSelf(Callback):
    """Sends a signal to its own process after global step ``at``."""

    def __init__(self, at: int, sig: int = signal.SIGTERM) -> None:
        self.at, self.sig = at, sig
        self.seen_handlers: list = []

    def _trigger_step(self) -> None:
        if self.global_step == self.at:
            self.seen_handlers.append(signal.getsignal(self.sig))
            os.kill(os.getpid(), self.sig)


def test_in_process_stop_after_current_step_and_handlers_restored(logdir, no_leaks):
    calls = []

    def mine(signum, frame):  # the application's own handler
        calls.append(signum)

    old_term = signal.signal(signal.SIGTERM, mine)
    old_int = signal.signal(signal.SIGINT, mine)
    try:
        rec = HookRecorder()
        killer = _KillSelf(at=3)
        with pytest.raises(TrainingInterrupted) as ei:
            train_tiny(callbacks=[killer, rec], max_epoch=5, steps_per_epoch=4)
        e = ei.value
        assert (e.signame, e.signum, e.exit_code) == ("SIGTERM", signal.SIGTERM, 128 + signal.SIGTERM)
        assert (e.epoch, e.global_step) == (1, 3)
        assert "interrupted by SIGTERM at epoch 1, global step 3" in str(e) and "\n" not in str(e)
        hooks = rec.hooks()
        assert hooks[-1] == "after_train" and hooks.count("trigger_step") == 3
        assert killer.seen_handlers and killer.seen_handlers[0] is not mine  # trainbus's during training
        assert signal.getsignal(signal.SIGTERM) is mine and signal.getsignal(signal.SIGINT) is mine
        assert calls == []  # the application's handler did not see the signal trainbus took
        assert signal.set_wakeup_fd(-1) == -1  # the wakeup fd was given back
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


def test_ignored_signal_stays_ignored(logdir, no_leaks):
    old = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        killer = _KillSelf(at=2)
        tr = train_tiny(callbacks=[killer], max_epoch=2, steps_per_epoch=3)
        assert tr.global_step == 6  # ignored: training went on to the end
        assert killer.seen_handlers == [signal.SIG_IGN]
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, old)


def test_forked_child_gets_the_previous_handlers(logdir, no_leaks):
    """A process forked during training (a dataflow worker) does not inherit trainbus's
    handler: SIGTERM terminates it as usual."""
    import multiprocessing as mp

    results = []

    class Forker(Callback):
        def _before_train(self) -> None:
            ctx = mp.get_context("fork")
            p = ctx.Process(target=time.sleep, args=(60,), daemon=True)
            p.start()
            time.sleep(0.2)
            p.terminate()  # SIGTERM
            p.join(10)
            results.append(p.exitcode)

    train_tiny(callbacks=[Forker()], max_epoch=1, steps_per_epoch=1)
    assert results == [-signal.SIGTERM]
