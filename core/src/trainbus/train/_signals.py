"""Graceful SIGINT/SIGTERM during training: finish the step, run every after_train, stop.

The first signal asks the trainer to stop after the current step (callbacks' ``after_train``
run, a ``ModelSaver`` writes its final checkpoint). A second signal of either kind raises
``KeyboardInterrupt`` at once. The previous handlers are restored when training ends.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator

from trainbus.utils import logger

__all__ = ["graceful_signals", "TrainingInterrupted"]


class TrainingInterrupted(Exception):
    """Training ended early because the process received a signal (after a clean stop)."""

    def __init__(self, signame: str, epoch: int, global_step: int) -> None:
        super().__init__(f"training interrupted by {signame} at epoch {epoch}, global step {global_step}; "
                         "callbacks finalized and files closed")
        self.signame = signame
        self.epoch = epoch
        self.global_step = global_step


@contextlib.contextmanager
def graceful_signals(trainer: Any, signals: tuple = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # handlers can only be installed from the main thread
        return
    previous = {s: signal.getsignal(s) for s in signals}
    received: list[str] = []

    def handler(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if received:  # second signal: stop now
            for s, h in previous.items():
                signal.signal(s, h)
            raise KeyboardInterrupt(f"second signal ({name}) during graceful stop")
        received.append(name)
        logger.warning(f"Received {name}: stopping after the current step (send it again to stop at once).")
        trainer.request_stop(f"signal {name}")

    for s in signals:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    if received:
        raise TrainingInterrupted(received[0], trainer.epoch_num, trainer.global_step)
