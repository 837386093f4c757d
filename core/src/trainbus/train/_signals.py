"""Graceful SIGINT/SIGTERM/SIGHUP during training: finish the step, run every after_train, stop.

The first SIGINT, SIGTERM or SIGHUP asks the trainer to stop after the current step: every
callback's ``after_train`` runs (a ``ModelSaver`` writes its final checkpoint), input threads
are stopped, the session is closed, and ``train()`` raises :class:`TrainingInterrupted`.
A second signal of any of these kinds terminates the process at once with that signal's
default action, even while the main thread is blocked inside ``Session.run``.

How it works: Python runs signal handlers only in the main thread and only between
bytecodes, so a step blocked in TensorFlow would delay them. The handlers are therefore
paired with ``signal.set_wakeup_fd``: the C-level handler writes the signal number to a pipe
at once, and a small watcher thread reacts to it. The previous handlers and wakeup fd are
restored when training ends. Signals whose previous disposition is ``SIG_IGN`` stay ignored
(e.g. SIGHUP under ``nohup``).

How the process ends: :class:`TrainingInterrupted` is a ``SystemExit`` (like
``KeyboardInterrupt``, it is not an ``Exception``) whose exit status is ``128 + signum``
(130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP). A script that does not catch it runs its
own ``try/finally`` blocks and ``atexit`` handlers and then ends with that status and ONE line
on stderr, e.g.::

    trainbus: training interrupted by SIGTERM at epoch 3, global step 96; final checkpoint /runs/a/model-96

With ``TRAINBUS_DEBUG=1`` in the environment the full traceback is printed before that line.
A script that catches the exception decides itself what to print and how to exit::

    try:
        launch_train_with_config(config, trainer)
    except TrainingInterrupted as e:
        print(f"stopped early: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any, Iterator

from trainbus.utils import logger

__all__ = ["graceful_signals", "TrainingInterrupted", "InterruptedBeforeTraining", "interrupts_before_training",
           "newest_checkpoint", "DEFAULT_SIGNALS"]

_SENTINEL = 0  # no signal has number 0: written to the pipe to stop the watcher


#: the signals that stop training gracefully (SIGHUP where the platform has it)
DEFAULT_SIGNALS: tuple[int, ...] = tuple(
    s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)

#: ``checkpoint=`` value of a :class:`TrainingInterrupted` raised where nobody looked for checkpoints
UNKNOWN = "unknown"


def debug_enabled() -> bool:
    """Whether ``TRAINBUS_DEBUG`` asks for tracebacks (any value but empty, ``0``, ``false``, ``no``)."""
    return os.environ.get("TRAINBUS_DEBUG", "").strip().lower() not in ("", "0", "false", "no", "off")


class TrainingInterrupted(SystemExit):
    """Training ended early because the process received SIGINT, SIGTERM or SIGHUP; raised by
    ``Trainer.train`` after a clean stop (every ``after_train`` ran, files are closed).

    A ``SystemExit`` with ``code == 128 + signum``: uncaught, it ends the script with that
    status after its ``finally`` blocks, printing one line on stderr (see the module doc).

    :ivar signame: ``"SIGINT"``, ``"SIGTERM"`` or ``"SIGHUP"``.
    :ivar signum: the signal number.
    :ivar epoch: the epoch during which training stopped (None in a process that does not
        train, e.g. a parameter server).
    :ivar global_step: the global step at the stop (None likewise).
    :ivar checkpoint: the newest checkpoint prefix in the ``ModelSaver``'s directory after the
        stop (None if the run has no saver or none was written; :data:`UNKNOWN` if not looked up).
    :ivar checkpoint_step: the global step of ``checkpoint`` (None if unknown).
    :ivar start_step: the global step this run's training started at (None if unknown): equal to
        ``global_step``, no step of this run had finished when it stopped.
    :ivar exit_code: ``128 + signum``, the conventional exit status for a script.
    :ivar origin: ``None`` when this process received the signal; in a multi-process job
        (Horovod, distributed runtime) the process that did, when it was another one.
    """

    def __init__(self, signame: str, epoch: int | None, global_step: int | None, signum: int | None = None,
                 origin: str | None = None, checkpoint: str | None = UNKNOWN,
                 checkpoint_step: int | None = None, start_step: int | None = None) -> None:
        self.signame = signame
        #: None when this process received the signal; else who did (e.g. ``"rank 1"``)
        self.origin = origin
        self.signum = int(signum) if signum is not None else int(getattr(signal, signame, signal.SIGTERM))
        self.epoch = epoch
        self.global_step = global_step
        self.checkpoint = checkpoint
        self.checkpoint_step = checkpoint_step
        self.start_step = start_step
        self.exit_code = 128 + self.signum
        self._reported = False
        super().__init__(self.exit_code)

    @property
    def message(self) -> str:
        """The one-line description: what stopped, at which step, where the checkpoint is."""
        where = f" received by {self.origin}" if self.origin else ""
        at = f" at epoch {self.epoch}, global step {self.global_step}" if self.epoch is not None else ""
        return f"training interrupted by {self.signame}{where}{at}{self._checkpoint_note()}"

    def _checkpoint_note(self) -> str:
        if self.checkpoint == UNKNOWN:
            return ""
        if self.checkpoint is None:
            if self.start_step is not None and self.global_step == self.start_step:
                return "; no checkpoint was written (no training step had finished)"
            return "; no checkpoint was written (the callbacks have no ModelSaver, or saving failed: see the log)"
        if self.checkpoint_step is not None and self.global_step is not None \
                and self.checkpoint_step != self.global_step:
            return (f"; newest checkpoint {self.checkpoint} (global step {self.checkpoint_step}; "
                    f"the final save did not happen: see the log)")
        return f"; final checkpoint {self.checkpoint}"

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> Any:
        return (type(self), (self.signame, self.epoch, self.global_step, self.signum, self.origin, self.checkpoint,
                             self.checkpoint_step, self.start_step))

    # Python reads ``code`` of a SystemExit exactly when it ends the interpreter with it (and
    # multiprocessing when it ends a child process with it): the moment to print the one line,
    # so that a script that catches the exception gets nothing printed on its behalf.
    @property  # type: ignore[override]
    def code(self) -> int:
        self.report()
        return self.exit_code

    @code.setter
    def code(self, value: Any) -> None:  # SystemExit.__init__ assigns it
        pass

    def report(self, file: Any = None) -> None:
        """Print the one line (after the traceback when ``TRAINBUS_DEBUG`` is set) on ``file``
        (default stderr), once per exception."""
        if self._reported:
            return
        self._reported = True
        out = file if file is not None else sys.stderr
        try:
            if debug_enabled():
                import traceback

                traceback.print_exception(type(self), self, self.__traceback__, file=out)
            out.write(f"trainbus: {self.message}\n")
            out.flush()
        except Exception:  # noqa: BLE001 - stderr may be closed at exit
            pass


class InterruptedBeforeTraining(TrainingInterrupted):
    """SIGINT, SIGTERM or SIGHUP arrived before the first training step (while the input, the
    graph, the callbacks or the session were being set up): nothing was trained and no
    checkpoint was written. Raised at once (there is no step to finish); exit status and the
    one line on stderr work as for :class:`TrainingInterrupted`, e.g.::

        trainbus: interrupted by SIGINT before training started (while building the graph); nothing was trained, no checkpoint was written

    :ivar during: what was being done (``"building the graph"``, ``"creating the session"``, ...),
        or None.
    :ivar checkpoint: the checkpoint the run was going to resume from (it is untouched), or None.
    """

    def __init__(self, signame: str, signum: int | None = None, during: str | None = None,
                 checkpoint: str | None = None, checkpoint_step: int | None = None) -> None:
        super().__init__(signame, None, None, signum, checkpoint=checkpoint, checkpoint_step=checkpoint_step)
        self.during = during

    @property
    def message(self) -> str:
        what = f" (while {self.during})" if self.during else ""
        note = "nothing was trained, no checkpoint was written"
        if self.checkpoint and self.checkpoint != UNKNOWN:
            step = f" (global step {self.checkpoint_step})" if self.checkpoint_step is not None else ""
            note += f"; the run resumes from {self.checkpoint}{step} when started again"
        return f"interrupted by {self.signame} before training started{what}; {note}"

    def __reduce__(self) -> Any:
        return (type(self), (self.signame, self.signum, self.during, self.checkpoint, self.checkpoint_step))


def newest_checkpoint(trainer: Any) -> tuple[str | None, int | None]:
    """The newest checkpoint (prefix, global step) named by the ``checkpoint`` list of the
    directory of ``trainer``'s first checkpoint writer (``ModelSaver``: any callback following
    :class:`trainbus.checkpoint.CheckpointWriter`); ``(None, None)`` when it has none or its
    directory lists no checkpoint yet."""
    from trainbus import checkpoint

    return checkpoint.newest_checkpoint(trainer)


def _stop_report(trainer: Any) -> dict[str, Any]:
    """What the signal handlers give a :class:`TrainingInterrupted` beside the signal: the newest
    checkpoint of ``trainer``'s checkpoint writer (``checkpoint=None`` when it lists none), its
    step, and the global step the training started at."""
    path, step = newest_checkpoint(trainer)
    return {"checkpoint": path, "checkpoint_step": step, "start_step": getattr(trainer, "start_global_step", None)}


def checkpoint_report(trainer: Any) -> dict[str, Any]:
    """The ``checkpoint``/``checkpoint_step``/``start_step`` keyword arguments of a
    :class:`TrainingInterrupted` raised in ``trainer``'s process, as the single-process trainer
    fills them: the newest checkpoint of its checkpoint writer (``checkpoint=None`` when it lists
    none, or when a chief has no saver) and the global step its training started at.
    Empty for a non-chief process without a saver: the chief-only savers run elsewhere, so this
    process cannot tell (the chief's line names the checkpoint)."""
    from trainbus import checkpoint

    report = _stop_report(trainer)
    if report["checkpoint"] is None and not getattr(trainer, "is_chief", True) and not checkpoint.find_writers(trainer):
        return {}
    return report


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
                _terminate_now(signum, "during a graceful stop")
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


#: (previous handlers, previous wakeup fd) of the signal contexts active in this process, outermost
#: first (``interrupts_before_training`` around ``graceful_signals``)
_ACTIVE: list[tuple[dict[int, Any], int]] = []


def _reset_in_child() -> None:
    """In a child forked during training or its setup (a dataflow worker, a subprocess helper):
    give it back the handlers the process had before, so SIGTERM terminates it as usual."""
    if not _ACTIVE:
        return
    previous, old_fd = _ACTIVE[0]
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


#: taken by the first thread that ends the process on a second signal, never released: a
#: handler and a watcher that both see the second signal say so once
_TERMINATING = threading.Lock()


def _terminate_now(signum: int, when: str) -> None:
    """A second signal: one line on stderr, then the signal's default action (no cleanup). The
    first thread here (the main thread's handler or a watcher) does it; any other waits for the
    end of the process."""
    _TERMINATING.acquire()
    try:
        sys.stderr.write(f"trainbus: second signal ({signal.Signals(signum).name}) {when}; terminating now\n")
        sys.stderr.flush()
    except Exception:  # noqa: BLE001 - stderr may be closed
        pass
    _die_by(signum)


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
def graceful_signals(trainer: Any, signals: tuple = DEFAULT_SIGNALS) -> Iterator[None]:
    """Within this context, SIGINT/SIGTERM/SIGHUP stop ``trainer`` gracefully (see the module doc);
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
    handled: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        # The watcher thread counts deliveries (one byte per signal in the wakeup pipe) and
        # decides first/second; here, in the main thread, only make the stop request take
        # effect before the next step even if the watcher has not run yet, and remember the
        # signal in case the watcher is not scheduled before training ends (a loaded machine).
        handled.append(signum)
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
    entry = (previous, old_fd if old_fd is not None else -1)
    _ACTIVE.append(entry)
    try:
        yield
    finally:
        _restore(entry, previous, old_fd, watcher)
    if watcher.received or handled:
        signum = (watcher.received or handled)[0]
        raise TrainingInterrupted(signal.Signals(signum).name, trainer.epoch_num, trainer.global_step, signum,
                                  **_stop_report(trainer))


def _restore(entry: Any, previous: dict, old_fd: int | None, watcher: Any) -> None:
    """Undo what a signal-handling block installed: its handlers, its wakeup fd, its watcher."""
    _forget(entry)
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


def _forget(entry: tuple[dict[int, Any], int]) -> None:
    for i, e in enumerate(_ACTIVE):
        if e is entry:
            del _ACTIVE[i]
            return


class _SetupWatcher(_Watcher):
    """Before training: the first signal is acted on by the Python handler (it raises in the main
    thread); the watcher only ends the process at once on a second one, also while the main
    thread is blocked in TensorFlow (e.g. creating the session)."""

    def on_signal(self, signum: int) -> None:
        with self._lock:
            self.received.append(signum)
            second = len(self.received) > 1
        if second:
            _terminate_now(signum, "before training started")


def _step_of(path: str | None) -> int | None:
    from trainbus.checkpoint import step_of

    return step_of(path)


class _Setup:
    """What :func:`interrupts_before_training` reports; the caller updates ``during``."""

    def __init__(self, trainer: Any, checkpoint: str | None) -> None:
        self.trainer = trainer
        self.checkpoint = checkpoint
        self.during: str | None = None

    def describe(self) -> str | None:
        """What is being done: the trainer's own account while one of its setup methods runs
        (``Trainer.setup_phase``), else ``during``."""
        return getattr(self.trainer, "setup_phase", None) or self.during


@contextlib.contextmanager
def interrupts_before_training(trainer: Any = None, checkpoint: str | None = None,
                               signals: tuple = DEFAULT_SIGNALS) -> Iterator[_Setup]:
    """Within this context (everything before the first training step: making the input,
    building the graph, setting up the callbacks, creating and initializing the session),
    SIGINT/SIGTERM/SIGHUP raise :class:`InterruptedBeforeTraining` at once in the main thread,
    instead of a ``KeyboardInterrupt`` traceback (SIGINT) or an end without a word (SIGTERM,
    SIGHUP): the script's ``finally`` blocks run, then it ends with one line and status
    ``128 + signum``. A second signal ends the process at once. ``checkpoint`` is the one the run
    resumes from, named in the line. ``trainer.train()`` installs :func:`graceful_signals` for the
    training itself, inside this context. Signals that are ignored stay ignored; a no-op outside
    the main thread. The yielded object's ``during`` (a few words) says what is being done."""
    setup = _Setup(trainer, checkpoint)
    if threading.current_thread() is not threading.main_thread():
        yield setup
        return
    previous: dict[int, Any] = {}
    for s in signals:
        h = signal.getsignal(s)
        if h is signal.SIG_IGN or h is None:
            continue
        previous[int(s)] = h
    if not previous:
        yield setup
        return
    watcher = _SetupWatcher(trainer, tuple(previous), previous)
    raised: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if raised:
            # a second signal while the first one's exception unwinds (the first arrived before the
            # main thread blocked in TensorFlow, so this handler, not only the watcher, sees both)
            _terminate_now(signum, "before training started")
            return
        raised.append(signum)
        if trainer is not None and getattr(trainer, "_training_started", False):
            # training ran and its own handlers were already taken down: report it as usual
            raise TrainingInterrupted(name, trainer.epoch_num, trainer.global_step, signum,
                                      **_stop_report(trainer))
        raise InterruptedBeforeTraining(name, signum, setup.describe(), setup.checkpoint, _step_of(setup.checkpoint))

    try:
        old_fd = signal.set_wakeup_fd(watcher.wfd, warn_on_full_buffer=False)
    except (ValueError, OSError):
        old_fd = None
    if old_fd is None:
        watcher.stop()
    else:
        watcher.start()
    entry = (previous, old_fd if old_fd is not None else -1)
    _ACTIVE.append(entry)
    for s in previous:
        signal.signal(s, handler)
    try:
        yield setup
    finally:
        _restore(entry, previous, old_fd, watcher)
