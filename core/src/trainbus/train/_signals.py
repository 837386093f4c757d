"""Graceful SIGINT/SIGTERM during training: finish the step, run every after_train, stop.

The first SIGINT or SIGTERM asks the trainer to stop after the current step: every
callback's ``after_train`` runs (a ``ModelSaver`` writes its final checkpoint), input threads
are stopped, the session is closed, and ``train()`` raises :class:`TrainingInterrupted`.
A second signal of either kind terminates the process at once with that signal's default
action, even while the main thread is blocked inside ``Session.run``.

How it works: Python runs signal handlers only in the main thread and only between
bytecodes, so a step blocked in TensorFlow would delay them. The handlers are therefore
paired with ``signal.set_wakeup_fd``: the C-level handler writes the signal number to a pipe
at once, and a small watcher thread reacts to it. The previous handlers and wakeup fd are
restored when training ends. Signals whose previous disposition is ``SIG_IGN`` stay ignored.

The library never exits the process nor installs an ``excepthook`` by itself. A script turns
the interruption into a one-line exit like this::

    try:
        launch_train_with_config(config, trainer)
    except TrainingInterrupted as e:
        sys.exit(f"{e}")          # one line on stderr, exit status 1

or calls :func:`install_interrupt_excepthook` once from its entry point.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any, Iterator

from trainbus.utils import logger

__all__ = ["graceful_signals", "TrainingInterrupted", "install_interrupt_excepthook"]

_SENTINEL = 0  # no signal has number 0: written to the pipe to stop the watcher


class TrainingInterrupted(Exception):
    """Training ended early because the process received SIGINT or SIGTERM; raised by
    ``Trainer.train`` after a clean stop (every ``after_train`` ran, files are closed).

    :ivar signame: ``"SIGINT"`` or ``"SIGTERM"``.
    :ivar signum: the signal number.
    :ivar epoch: the epoch during which training stopped (None in a process that does not
        train, e.g. a parameter server).
    :ivar global_step: the global step at the stop (None likewise).
    :ivar exit_code: ``128 + signum``, the conventional exit status for a script.
    :ivar origin: ``None`` when this process received the signal; in a multi-process job
        (Horovod, distributed runtime) the process that did, when it was another one.
    """

    def __init__(self, signame: str, epoch: int | None, global_step: int | None, signum: int | None = None,
                 origin: str | None = None) -> None:
        where = f" received by {origin}" if origin else ""
        at = f" at epoch {epoch}, global step {global_step}" if epoch is not None else ""
        super().__init__(f"training interrupted by {signame}{where}{at}; callbacks finalized and files closed")
        self.signame = signame
        #: None when this process received the signal; else who did (e.g. ``"rank 1"``)
        self.origin = origin
        self.signum = int(signum) if signum is not None else int(getattr(signal, signame, signal.SIGTERM))
        self.epoch = epoch
        self.global_step = global_step
        self.exit_code = 128 + self.signum


def install_interrupt_excepthook() -> None:
    """For script entry points only: print an uncaught :class:`TrainingInterrupted` as one
    line (``trainbus: training interrupted by ...``) instead of a traceback. Other exceptions
    go to the previous hook. The library itself never calls this."""
    previous = sys.excepthook

    def hook(etype: type, value: BaseException, tb: Any) -> None:
        if isinstance(value, TrainingInterrupted):
            sys.stderr.write(f"trainbus: {value}\n")
            sys.stderr.flush()
            return
        previous(etype, value, tb)

    sys.excepthook = hook


def signum_of_reason(reason: str | None) -> int | None:
    """The signal number of a stop reason given by the signal handlers (``"signal SIGTERM"``),
    else None. Multi-process trainers use it to tell the other processes which signal it was."""
    if not reason or not reason.startswith("signal "):
        return None
    sig = getattr(signal, reason[len("signal "):].strip(), None)
    return int(sig) if sig is not None else None


class _Watcher(threading.Thread):
    """Reads signal numbers from the wakeup pipe and acts on them outside the main thread."""

    def __init__(self, trainer: Any, signums: tuple[int, ...], previous: dict[int, Any]) -> None:
        super().__init__(name="trainbus-signal-watcher", daemon=True)
        self._trainer = trainer
        self._signums = set(signums)
        self._previous = previous
        self.received: list[int] = []
        self._lock = threading.Lock()
        self.rfd, self.wfd = os.pipe()
        os.set_blocking(self.wfd, False)

    def run(self) -> None:
        while True:
            try:
                data = os.read(self.rfd, 64)
            except InterruptedError:
                continue
            except OSError:
                return
            if not data:
                return
            for num in data:
                if num == _SENTINEL:
                    return
                if num in self._signums:
                    self.on_signal(num)

    def on_signal(self, signum: int) -> None:
        with self._lock:
            name = signal.Signals(signum).name
            if self.received:
                # second signal: the default action of this signal, now (no cleanup)
                try:
                    sys.stderr.write(f"trainbus: second signal ({name}) during a graceful stop; terminating now\n")
                    sys.stderr.flush()
                except Exception:  # noqa: BLE001 - stderr may be closed
                    pass
                _die_by(signum)
                return
            self.received.append(signum)
        logger.warning(f"Received {name}: stopping after the current step (send it again to stop at once).")
        self._trainer.request_stop(f"signal {name}")

    def stop(self) -> None:
        try:
            os.write(self.wfd, bytes([_SENTINEL]))
        except OSError:
            pass
        self.join(timeout=5)
        for fd in (self.rfd, self.wfd):
            try:
                os.close(fd)
            except OSError:
                pass


#: (previous handlers, previous wakeup fd) of the graceful context active in this process
_ACTIVE: list[tuple[dict[int, Any], int]] = []


def _reset_in_child() -> None:
    """In a child forked during training (a dataflow worker, a subprocess helper): give it
    back the handlers the process had before training, so SIGTERM terminates it as usual."""
    if not _ACTIVE:
        return
    previous, old_fd = _ACTIVE[-1]
    _ACTIVE.clear()
    try:
        signal.set_wakeup_fd(old_fd if old_fd is not None else -1)
    except (ValueError, OSError):
        pass
    for s, h in previous.items():
        try:
            signal.signal(s, h)
        except (TypeError, ValueError, OSError):
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_in_child)


def _die_by(signum: int) -> None:
    """Terminate the process with ``signum``'s default action, from any thread."""
    try:
        # set the disposition at C level without needing the main thread
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.signal.restype = ctypes.c_void_p
        libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
        libc.signal(signum, 0)  # 0 == SIG_DFL
        os.kill(os.getpid(), signum)
    except Exception:  # noqa: BLE001 - fall back to a hard exit with the conventional status
        pass
    os._exit(128 + signum)


@contextlib.contextmanager
def graceful_signals(trainer: Any, signals: tuple = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """Within this context, SIGINT/SIGTERM stop ``trainer`` gracefully (see the module doc);
    on exit, raise :class:`TrainingInterrupted` if a signal was received. A no-op outside
    the main thread (handlers can only be installed there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}
    for s in signals:
        h = signal.getsignal(s)
        if h is signal.SIG_IGN or h is None:
            continue  # ignored on purpose (e.g. a background job), or installed outside Python
        previous[int(s)] = h
    if not previous:
        yield
        return
    watcher = _Watcher(trainer, tuple(previous), previous)

    def handler(signum: int, frame: Any) -> None:
        # The watcher thread counts deliveries (one byte per signal in the wakeup pipe) and
        # decides first/second; here, in the main thread, only make the stop request take
        # effect before the next step even if the watcher has not run yet.
        trainer.request_stop(f"signal {signal.Signals(signum).name}")

    try:
        old_fd = signal.set_wakeup_fd(watcher.wfd, warn_on_full_buffer=False)
    except (ValueError, OSError):
        old_fd = None
    if old_fd is None:  # no wakeup fd possible: handle in the main thread only
        watcher.stop()

        def handler(signum: int, frame: Any) -> None:  # noqa: F811
            watcher.on_signal(signum)

    else:
        watcher.start()
    for s in previous:
        signal.signal(s, handler)
    _ACTIVE.append((previous, old_fd if old_fd is not None else -1))
    try:
        yield
    finally:
        _ACTIVE.clear()
        for s, h in previous.items():
            try:
                signal.signal(s, h)
            except (TypeError, ValueError, OSError):
                pass
        if old_fd is not None:
            try:
                signal.set_wakeup_fd(old_fd)
            except (ValueError, OSError):
                signal.set_wakeup_fd(-1)
            watcher.stop()
    if watcher.received:
        signum = watcher.received[0]
        raise TrainingInterrupted(signal.Signals(signum).name, trainer.epoch_num, trainer.global_step, signum)
