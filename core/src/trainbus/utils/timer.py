"""Timing: a logged timed block, a process-wide table of total times, an iteration-speed printer, a pausable timer."""

from __future__ import annotations

import atexit
from collections import defaultdict
from contextlib import contextmanager
from time import perf_counter as timer
from typing import Iterator

from trainbus.utils import logger
from trainbus.utils.stats import StatCounter

__all__ = ["timed_operation", "IterSpeedCounter", "Timer", "total_timer", "print_total_timer"]


@contextmanager
def timed_operation(msg: str, log_start: bool = False) -> Iterator[None]:
    """Context that logs ``"<Msg> finished, time:1.2345 sec."`` when it ends (and ``"Start <msg> ..."`` at the
    start if ``log_start``)."""
    if not msg:
        raise ValueError("timed_operation(msg): msg must be a non-empty description of the operation")
    if log_start:
        logger.info(f"Start {msg} ...")
    start = timer()
    yield
    logger.info(f"{msg[0].upper() + msg[1:]} finished, time:{timer() - start:.4f} sec.")


_TOTAL_TIMER_DATA: defaultdict[str, StatCounter] = defaultdict(StatCounter)


@contextmanager
def total_timer(msg: str) -> Iterator[None]:
    """Context whose duration is added to the process-wide total under ``msg`` (see :func:`print_total_timer`)."""
    start = timer()
    try:
        yield
    finally:
        _TOTAL_TIMER_DATA[msg].feed(timer() - start)


def print_total_timer() -> None:
    """Log the total, count and mean time of every :func:`total_timer` block (also done at exit, if any)."""
    for k, v in _TOTAL_TIMER_DATA.items():
        logger.info(f"Total Time: {k} -> {v.sum:.2f} sec, {v.count} times, {v.average:.3g} sec/time")


atexit.register(print_total_timer)


class IterSpeedCounter:
    """Call it once per iteration; every ``print_every`` calls it logs the time since the first call and the
    time per call."""

    def __init__(self, print_every: int, name: str | None = None) -> None:
        """
        :param print_every: log every this many calls.
        :param name: the label of the log line (``"IterSpeed"`` if None).
        """
        self.cnt = 0
        self.print_every = int(print_every)
        if self.print_every <= 0:
            raise ValueError(f"IterSpeedCounter(print_every={print_every}): must be a positive number of calls")
        self.name = name if name else "IterSpeed"
        self.start = timer()

    def reset(self) -> None:
        self.start = timer()

    def __call__(self) -> None:
        if self.cnt == 0:
            self.reset()
        self.cnt += 1
        if self.cnt % self.print_every:
            return
        t = timer() - self.start
        logger.info(f"{self.name}: {t:.2f} sec, {self.cnt} times, {t / self.cnt:.3g} sec/time")


class Timer:
    """Seconds since creation or :meth:`reset`, not counting the time spent paused."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Start again from 0, running."""
        self._start = timer()
        self._paused: float | None = None
        self._total_paused = 0.0

    def pause(self) -> None:
        """Stop counting (raises ``RuntimeError`` if already paused)."""
        if self._paused is not None:
            raise RuntimeError("Timer.pause(): the timer is already paused")
        self._paused = timer()

    def is_paused(self) -> bool:
        return self._paused is not None

    def resume(self) -> None:
        """Count again (raises ``RuntimeError`` if not paused)."""
        if self._paused is None:
            raise RuntimeError("Timer.resume(): the timer is not paused")
        self._total_paused += timer() - self._paused
        self._paused = None

    def seconds(self) -> float:
        """The counted seconds so far."""
        now = timer()
        paused = self._total_paused + (now - self._paused if self._paused is not None else 0.0)
        return now - self._start - paused
