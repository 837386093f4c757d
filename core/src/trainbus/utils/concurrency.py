"""Threads and processes: stoppable and loop threads, session-sharing threads, cleaning up child processes.

* :class:`StoppableThread` has a stop event and queue operations that give up once it is set;
  :class:`LoopThread` calls a function in a loop until stopped, and can be paused.
* :class:`ShareSessionThread` runs with the TensorFlow default session of the thread that started it.
* :func:`ensure_proc_terminate` terminates processes at interpreter exit; :func:`enable_death_signal`
  (called in a child) makes the kernel kill the child when its parent dies, even by SIGKILL;
  :func:`start_proc_mask_signal` starts processes that ignore Ctrl-C (SIGINT), so only the parent handles it.
"""

from __future__ import annotations

import atexit
import bisect
import ctypes
import multiprocessing as mp
import queue
import signal
import subprocess
import sys
import threading
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from trainbus.utils import logger

__all__ = ["StoppableThread", "LoopThread", "ShareSessionThread", "ensure_proc_terminate", "start_proc_mask_signal",
           "mask_sigint", "enable_death_signal", "subproc_call", "OrderedResultGatherProc", "OrderedContainer", "DIE"]
# also here, outside tensorpack's names: describe_exit, process_state (for error messages about child
# processes) and add_wait_interrupt, remove_wait_interrupt, wait_interrupted (stop waiting for data)


class StoppableThread(threading.Thread):
    """A thread with a stop event (``stop()`` sets it, ``stopped()`` reads it)."""

    #: how long a stoppable queue operation blocks before it looks at the stop event again
    QUEUE_POLL_SECONDS = 5.0

    def __init__(self, evt: threading.Event | None = None) -> None:
        """
        :param evt: the stop event; a new one if None (several threads may share one to stop together).
        """
        super().__init__()
        self._stop_evt = threading.Event() if evt is None else evt

    def stop(self) -> None:
        """Ask the thread to stop (sets the stop event; the thread's loop must look at :meth:`stopped`)."""
        self._stop_evt.set()

    def stopped(self) -> bool:
        """Whether :meth:`stop` was called (or the shared event was set)."""
        return self._stop_evt.is_set()

    def queue_put_stoppable(self, q: Any, obj: Any) -> None:
        """``q.put(obj)``, but give up (without putting) once the thread is stopped."""
        while not self.stopped():
            try:
                q.put(obj, timeout=self.QUEUE_POLL_SECONDS)
                return
            except queue.Full:
                pass

    def queue_get_stoppable(self, q: Any) -> Any:
        """``q.get()``, but give up and return None once the thread is stopped."""
        while not self.stopped():
            try:
                return q.get(timeout=self.QUEUE_POLL_SECONDS)
            except queue.Empty:
                pass
        return None


class LoopThread(StoppableThread):
    """A daemon thread that calls ``func()`` again and again until stopped; it can be paused and resumed."""

    def __init__(self, func: Callable[[], Any], pausable: bool = True) -> None:
        """
        :param func: called with no arguments, once per loop.
        :param pausable: whether :meth:`pause` / :meth:`resume` may be used (costs a lock per loop).
        """
        super().__init__()
        self._func = func
        self._pausable = pausable
        if pausable:
            self._lock = threading.Lock()
        self.daemon = True

    def run(self) -> None:
        while not self.stopped():
            if self._pausable:
                with self._lock:
                    pass
            self._func()

    def _check_pausable(self, what: str) -> None:
        if not self._pausable:
            raise RuntimeError(f"LoopThread.{what}(): this LoopThread was created with pausable=False")

    def pause(self) -> None:
        """Pause the loop before its next call of ``func`` (the current call finishes)."""
        self._check_pausable("pause")
        self._lock.acquire()

    def resume(self) -> None:
        """Resume a paused loop."""
        self._check_pausable("resume")
        try:
            self._lock.release()
        except RuntimeError:
            raise RuntimeError("LoopThread.resume(): the loop is not paused") from None


class ShareSessionThread(threading.Thread):
    """A thread that runs under the TensorFlow default session of the thread that called :meth:`start`.

    Either subclass it and use ``with self.default_sess():`` in ``run``, or wrap an existing thread:
    ``ShareSessionThread(th).start()`` runs ``th.run()`` with that session as default.
    """

    def __init__(self, th: threading.Thread | None = None) -> None:
        """
        :param th: a thread whose ``run`` to call under the session; its name and daemon flag are taken over.
        """
        super().__init__()
        self._th = None
        self._sess = None
        if th is not None:
            if not isinstance(th, threading.Thread):
                raise TypeError(f"ShareSessionThread(th): th must be a threading.Thread, got {type(th).__name__}")
            self._th = th
            self.name = th.name
            self.daemon = th.daemon

    @contextmanager
    def default_sess(self) -> Iterator[Any]:
        """Context: the captured session is the default session inside; yields it (None if there was none)."""
        if self._sess is not None:
            with self._sess.as_default():
                yield self._sess
        else:
            logger.warning(f"ShareSessionThread {self.name} wasn't started under a default session!")
            yield None

    def start(self) -> None:
        from trainbus.utils import lazytf as _tf

        self._sess = _tf.tf1().get_default_session()
        super().start()

    def run(self) -> None:
        if self._th is None:
            raise NotImplementedError("ShareSessionThread.run: pass a thread to wrap, or override run() "
                                      "(use `with self.default_sess():` inside)")
        with self.default_sess():
            self._th.run()


class DIE:
    """A placeholder put in a queue to mean "no more data from this producer"."""


def ensure_proc_terminate(proc: mp.Process | list) -> None:
    """At interpreter exit, terminate (and join) ``proc`` — a ``multiprocessing.Process`` or a list of them —
    if it is still alive. Only a weak reference is kept."""
    if isinstance(proc, list):
        for p in proc:
            ensure_proc_terminate(p)
        return
    if not isinstance(proc, mp.process.BaseProcess):
        raise TypeError(f"ensure_proc_terminate: expected a multiprocessing.Process or a list of them, "
                        f"got {type(proc).__name__}")

    def stop(ref: weakref.ref) -> None:
        p = ref()
        if p is None or p._popen is None or not p.is_alive():
            return
        p.terminate()
        p.join()

    atexit.register(stop, weakref.ref(proc))


_PR_SET_PDEATHSIG = 1
_libc = None


def _prctl_set_pdeathsig(sig: int) -> None:
    global _libc
    if _libc is None:
        import ctypes.util  # on first use: a training that starts no worker process needs none of it

        _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    if _libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(sig), ctypes.c_ulong(0), ctypes.c_ulong(0),
                   ctypes.c_ulong(0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_PDEATHSIG, {sig}) failed")


def enable_death_signal(_warn: bool = True) -> None:
    """Make the kernel send SIGKILL to the current process when its parent dies (however it dies).

    Call it in a child process. On Linux this is ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` through ctypes (no extra
    package). Elsewhere it does nothing and, if ``_warn``, logs a warning once.

    Note: Linux delivers the signal when the *thread* that created the child exits, so create children from a
    thread that lives as long as they should.
    """
    if not sys.platform.startswith("linux"):
        if _warn:
            _log_once(f"enable_death_signal: not available on {sys.platform}; child processes will not be killed "
                      "automatically if their parent dies", "warning")
        return
    try:
        _prctl_set_pdeathsig(signal.SIGKILL)
    except (OSError, AttributeError) as e:
        if _warn:
            _log_once(f"enable_death_signal: prctl failed ({e}); this process will not be killed automatically "
                      "if its parent dies", "warning")


#: checks that say "stop waiting for data" (a trainer asked to stop); see :func:`add_wait_interrupt`
_WAIT_INTERRUPTS: list[Callable[[], bool]] = []


def add_wait_interrupt(check: Callable[[], bool]) -> None:
    """Register ``check``: while it returns True, a dataflow waiting for its workers gives up
    (``DataFlowTerminated``) at its next wake-up instead of waiting on. An input source registers
    one for the time of training (true once the trainer was asked to stop, e.g. by SIGTERM), so
    that a stalled input does not hold a graceful stop. Looked at only while waiting, never per
    datapoint."""
    _WAIT_INTERRUPTS.append(check)


def remove_wait_interrupt(check: Callable[[], bool]) -> None:
    """Unregister ``check`` (no error if it is not registered)."""
    try:
        _WAIT_INTERRUPTS.remove(check)
    except ValueError:
        pass


def wait_interrupted() -> bool:
    """Whether a registered check asks waiting dataflows to give up."""
    for check in list(_WAIT_INTERRUPTS):
        try:
            if check():
                return True
        except Exception:  # noqa: BLE001 - a broken check must not break the dataflow
            continue
    return False


def describe_exit(exitcode: int | None) -> str:
    """How a ``multiprocessing`` child ended, in words: ``"exit status 3"``, ``"killed by signal
    SIGKILL (9)"`` (a negative exit code is the signal), ``"still running"`` for None."""
    if exitcode is None:
        return "still running"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = "an unknown signal"
        return f"killed by signal {name} ({-exitcode})"
    return f"exit status {exitcode}"


def process_state(pid: int | None) -> str:
    """What process ``pid`` is doing, for an error message: ``"is stopped (SIGSTOP or SIGTSTP)"``,
    ``"is running"``, ``"is sleeping"``, ``"has exited"``... (from ``/proc`` on Linux; elsewhere
    only whether it exists)."""
    if pid is None:
        return "was never started"
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        import os

        if os.name != "posix":  # os.kill(pid, 0) would terminate it on Windows
            return "is alive or gone (unknown on this platform)"
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return "has exited"
        except OSError:
            pass
        return "is alive"
    return {"T": "is stopped (SIGSTOP or SIGTSTP)", "t": "is stopped by a debugger", "R": "is running",
            "S": "is sleeping (waiting on something)", "D": "is in an uninterruptible wait (disk, network file system)",
            "Z": "has exited (not yet reaped)", "X": "has exited"}.get(state, f"is in state {state}")


def is_main_thread() -> bool:
    """Whether the caller runs in the main thread."""
    return threading.current_thread() is threading.main_thread()


@contextmanager
def mask_sigint() -> Iterator[bool]:
    """Context: ignore SIGINT inside it (restoring the previous handler after); yields True.

    Signal handlers can be changed only in the main thread: elsewhere this changes nothing and yields False.
    """
    if is_main_thread():
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            yield True
        finally:
            signal.signal(signal.SIGINT, old)
    else:
        yield False


def start_proc_mask_signal(proc: mp.Process | list) -> None:
    """Start ``proc`` (a ``multiprocessing.Process`` or a list) with SIGINT ignored in the children.

    A child made by ``fork``, ``forkserver`` or ``spawn`` inherits the ignored disposition, so Ctrl-C reaches
    only the parent, which then stops the children in order. Masking works only from the main thread.
    """
    procs = proc if isinstance(proc, list) else [proc]
    with mask_sigint():
        for p in procs:
            if isinstance(p, mp.process.BaseProcess):
                if (getattr(p, "_start_method", None) or mp.get_start_method()) == "fork":
                    _log_once("Starting a process with the 'fork' method is efficient but not safe with threads (it "
                              "may deadlock or crash); use the 'forkserver' or 'spawn' method if you run into that "
                              "(multiprocessing.set_start_method).", "warning")
            p.start()


def subproc_call(cmd: str, timeout: float | None = None) -> tuple[bytes | str, int]:
    """Run the shell command ``cmd``; returns ``(output, returncode)`` with stderr merged into stdout.

    The return code is -1 on timeout (with the output so far), -2 if the command could not be run at all.
    """
    try:
        out = subprocess.check_output(cmd, stderr=subprocess.STDOUT, shell=True, timeout=timeout)
        return out, 0
    except subprocess.TimeoutExpired as e:
        logger.warning(f"Command '{cmd}' timeout!")
        if e.output:
            logger.warning(e.output.decode("utf-8", "replace"))
            return e.output, -1
        return "", -1
    except subprocess.CalledProcessError as e:
        logger.warning(f"Command '{cmd}' failed, return code={e.returncode}")
        logger.warning(e.output.decode("utf-8", "replace"))
        return e.output, e.returncode
    except Exception as e:
        logger.warning(f"Command '{cmd}' failed to run: {e}")
        return "", -2


class OrderedContainer:
    """Items put with a rank come out in rank order, without gaps: ``get`` gives rank ``start``, then
    ``start + 1``, ...; an item waits until every lower rank has come out. Not thread-safe."""

    def __init__(self, start: int = 0) -> None:
        """
        :param start: the rank of the first item.
        """
        self.ranks: list[int] = []
        self.data: list[Any] = []
        self.wait_for = start

    def put(self, rank: int, val: Any) -> None:
        """Add ``val`` with ``rank`` (ranks must be distinct)."""
        idx = bisect.bisect(self.ranks, rank)
        self.ranks.insert(idx, rank)
        self.data.insert(idx, val)

    def has_next(self) -> bool:
        """Whether the item of the next rank is here."""
        return bool(self.ranks) and self.ranks[0] == self.wait_for

    def get(self) -> tuple[int, Any]:
        """``(rank, item)`` of the next rank; raises ``LookupError`` if it is not here yet (see :meth:`has_next`)."""
        if not self.has_next():
            raise LookupError(f"OrderedContainer.get: the item of rank {self.wait_for} has not been put yet")
        self.wait_for += 1
        return self.ranks.pop(0), self.data.pop(0)


class OrderedResultGatherProc(mp.Process):
    """A process that reads ``(rank, data)`` pairs from a queue and puts them, in rank order, into
    ``self.result_queue``. A producer sends ``(DIE, anything)`` when it is done (passed on as is); the process
    exits after ``nr_producer`` of them."""

    def __init__(self, data_queue: Any, nr_producer: int, start: int = 0) -> None:
        """
        :param data_queue: a ``multiprocessing.Queue`` of ``(rank, data)``.
        :param nr_producer: the number of producers (the number of ``DIE`` markers to wait for).
        :param start: the rank of the first item.
        """
        super().__init__()
        self.data_queue = data_queue
        self.ordered_container = OrderedContainer(start=start)
        self.result_queue = mp.Queue()
        self.nr_producer = nr_producer

    def run(self) -> None:
        nr_end = 0
        while True:
            task_id, data = self.data_queue.get()
            if task_id == DIE:
                self.result_queue.put((task_id, data))
                nr_end += 1
                if nr_end == self.nr_producer:
                    return
            else:
                self.ordered_container.put(task_id, data)
                while self.ordered_container.has_next():
                    self.result_queue.put(self.ordered_container.get())

    def get(self) -> Any:
        """The next ``(rank, data)`` (or ``(DIE, ...)``) from the result queue."""
        return self.result_queue.get()


def _log_once(message: str, func: str = "info") -> None:
    from trainbus.utils.argtools import log_once  # imported when a message is due, not with this module

    log_once(message, func)
