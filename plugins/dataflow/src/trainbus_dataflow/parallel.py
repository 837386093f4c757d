"""Run dataflows in parallel (``trainbus.dataflow.parallel``): in worker processes over a
``multiprocessing.Queue`` (``MultiProcessRunner``) or ZeroMQ (``MultiProcessRunnerZMQ``), or in
threads (``MultiThreadRunner``).

Each worker runs its own copy of the dataflow, so with more than one worker the output is the
same *distribution* as the input (duplicates and reordering happen); with one worker it is the
same datapoints in the same order. For parallelism that keeps the exact set of datapoints use the
parallel maps of ``trainbus.dataflow.parallel_map``.

Worker processes:

* ignore Ctrl-C (the parent handles it and stops them), and are killed by the kernel when the
  parent dies, even by SIGKILL (Linux, ``prctl(PR_SET_PDEATHSIG)``);
* are terminated and reaped when the parent exits, when the dataflow is garbage collected,
  when ``close()`` is called, and when ``reset_state()`` is called again (which starts new ones);
* are watched by a thread of the parent that sleeps on their process sentinels: the first one
  to die (killed, out of memory, ``os._exit``) makes the consumer raise :class:`WorkerDiedError`
  naming it, its pid and its exit status or signal, and stops the others;
* that raise send the traceback to the parent, which stops the other workers and raises an
  exception of the same type (rebuilt only from modules the parent has imported already; else a
  :class:`WorkerFailedError` carrying the type's name) whose message holds the worker's traceback;
* that produce nothing for ``stall_timeout`` seconds while the consumer waits (default 300, or
  ``$TRAINBUS_DATAFLOW_STALL_TIMEOUT``; 0 turns the watchdog off) make it raise
  :class:`WorkerStalledError`, which says which workers are stopped (e.g. by SIGSTOP).
* in a seeded run (``TrainConfig(seed=)``, ``trainbus.utils.seed``) seed Python, NumPy, the
  DataFlow RNGs and the image augmentors they inherited with a seed of their own, derived from
  the run's seed, the dataflow's start number and the worker's index: workers differ from each
  other and repeat themselves from run to run. Without a run seed, ``get_rng`` mixes the process
  id and the time.

The ZMQ pipes are Unix sockets in a fresh directory only the owner can enter (mode 0700,
under ``$TRAINBUS_PIPEDIR`` or the temp directory), removed when the dataflow is closed or the
process exits: another local user can neither connect nor inject datapoints.
"""

from __future__ import annotations

import atexit
import builtins
import errno
import itertools
import multiprocessing as mp
import os
import queue
import signal
import shutil
import sys
import tempfile
import threading
import time
import traceback
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np

from trainbus.utils import logger
from trainbus.utils.concurrency import StoppableThread, describe_exit, enable_death_signal, ensure_proc_terminate, \
    process_state, start_proc_mask_signal, wait_interrupted
from trainbus.utils.seed import dataflow_worker_seeds, seed_dataflow_worker
from trainbus.utils.serialize import dumps, loads
from trainbus_dataflow._lazyzmq import zmq
from trainbus_dataflow.base import DataFlow, DataFlowReentrantGuard, DataFlowTerminated, ProxyDataFlow

__all__ = ["MultiProcessRunner", "MultiProcessRunnerZMQ", "MultiThreadRunner", "PrefetchData", "PrefetchDataZMQ",
           "MultiProcessPrefetchData", "MultiThreadPrefetchData", "DataWorkerError", "WorkerDiedError",
           "WorkerFailedError", "WorkerStalledError", "STALL_TIMEOUT_ENV", "DEFAULT_STALL_TIMEOUT"]

#: the first frame of a two-frame ZMQ message that carries a worker's exception instead of a datapoint
EXC_MARK = b"trainbus-dataflow-exception"
#: the first frame of a two-frame ZMQ message, sent by the parent's watch thread, that says a worker died
DIED_MARK = b"trainbus-dataflow-worker-died"
#: how long (ms) the consumer waits for a message before it looks at the stall watchdog
_LIVENESS_POLL_MS = 500
#: the environment variable that sets the default stall timeout (seconds; 0 turns the watchdog off)
STALL_TIMEOUT_ENV = "TRAINBUS_DATAFLOW_STALL_TIMEOUT"
#: seconds the workers may produce nothing while the consumer waits, unless configured
DEFAULT_STALL_TIMEOUT = 300.0


class DataWorkerError(RuntimeError, DataFlowTerminated):
    """A worker process of a parallel dataflow died, failed or stalled; the dataflow stopped its
    other workers. An ``Exception`` (a trainer reports it as the error it is) and, for code written
    for tensorpack, a ``DataFlowTerminated``."""


class WorkerDiedError(DataWorkerError):
    """A worker process ended (killed by a signal, out of memory, ``os._exit``) without reporting
    an exception; the message names the dataflow, the worker, its pid and its exit status or signal.

    :ivar pid: the worker's process id.
    :ivar exitcode: ``multiprocessing``'s exit code (negative: the signal number).
    """

    def __init__(self, msg: str, pid: int | None = None, exitcode: int | None = None) -> None:
        super().__init__(msg)
        self.pid = pid
        self.exitcode = exitcode


class WorkerFailedError(DataWorkerError):
    """A worker raised an exception whose type the parent cannot rebuild (its module is not
    imported in the parent, which imports nothing a pipe names, or it takes other arguments).

    :ivar type_name: the worker's exception type, ``module.QualName``.
    """

    def __init__(self, msg: str, type_name: str = "") -> None:
        super().__init__(msg)
        self.type_name = type_name


class WorkerStalledError(DataWorkerError):
    """The worker processes produced nothing for longer than the stall timeout while the consumer
    waited (a worker stopped by SIGSTOP, deadlocked, waiting on a dead network share)."""


def stall_timeout_of(value: float | None, owner: str) -> float:
    """The stall timeout in seconds: ``value`` if given, else ``$TRAINBUS_DATAFLOW_STALL_TIMEOUT``,
    else :data:`DEFAULT_STALL_TIMEOUT`; 0 means no watchdog (returned as ``inf``)."""
    where = "stall_timeout"
    if value is None:
        env = os.environ.get(STALL_TIMEOUT_ENV, "").strip()
        if not env:
            return DEFAULT_STALL_TIMEOUT
        where = f"${STALL_TIMEOUT_ENV}"
        try:
            value = float(env)
        except ValueError:
            raise ValueError(f"{owner}: {where}={env!r} is not a number of seconds; set it to e.g. 300, "
                             "or 0 to turn the stall watchdog off") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < 0:
        raise ValueError(f"{owner}: {where} must be a number of seconds >= 0 (0: no stall watchdog), got {value!r}")
    return float("inf") if value == 0 else float(value)


def _fork_context() -> Any:
    """Workers are forked (the dataflow object is inherited, not pickled), as tensorpack does."""
    if sys.platform == "win32":
        return mp.get_context("spawn")
    return mp.get_context("fork")


#: the first frame of a multi-frame ZMQ message that carries a datapoint with large arrays out of band
DATA_MARK = b"trainbus-dataflow-frames"
#: arrays of at least this many bytes, as top-level components of a datapoint, travel as their own ZMQ frames
OUT_OF_BAND_BYTES = 16384


def send_datapoint(sock: Any, dp: Any) -> None:
    """Send ``dp`` over ``sock`` (``trainbus.utils.serialize``). Large C-contiguous numpy arrays that
    are components of a list or dict datapoint are sent as their own frames without a copy (so a
    dataflow must not modify an array after producing it) and received without a copy."""
    arrays: list[Any] = []
    meta: list[Any] = []
    if type(dp) is list or type(dp) is dict:
        for k, v in (enumerate(dp) if type(dp) is list else dp.items()):
            if type(v) is np.ndarray and v.nbytes >= OUT_OF_BAND_BYTES and v.flags.c_contiguous \
                    and not v.dtype.hasobject:
                arrays.append(v)
                meta.append([k, v.dtype.str, list(v.shape)])
        if arrays:
            rest = type(dp)(dp)
            for m in meta:
                rest[m[0]] = None
    if not arrays:
        sock.send(dumps(dp), copy=False)
        return
    sock.send_multipart([DATA_MARK, dumps([rest, meta]), *arrays], copy=False)


def decode_frames(frames: list[Any]) -> Any:
    """The datapoint of a multi-frame message from :func:`send_datapoint` (frames after the mark)."""
    rest, meta = loads(frames[0].buffer)
    for (k, dtype, shape), f in zip(meta, frames[1:]):
        rest[k] = np.frombuffer(f.buffer, dtype=np.dtype(dtype)).reshape(shape)
    return rest


def worker_exception_payload(idx: int | str, what: str = "worker") -> dict[str, Any]:
    """The current exception as a dict that crosses the process boundary (serializable by msgpack
    and pickle): its type's module and name, its message, the worker index, pid and the formatted
    traceback."""
    etype, evalue, _ = sys.exc_info()
    assert etype is not None
    try:
        message = str(evalue)
    except Exception:  # noqa: BLE001 - a broken __str__ must not hide the error
        message = "(its message could not be rendered)"
    return {"module": etype.__module__, "name": etype.__qualname__, "message": message, "idx": str(idx),
            "pid": os.getpid(), "what": what,
            "traceback": "".join(traceback.format_exception(etype, evalue, evalue.__traceback__))}


def _exception_type(module: str, name: str) -> type[BaseException] | None:
    """The exception type ``module.name`` if ``module`` is imported already (never imports)."""
    obj: Any = builtins if module == "builtins" else sys.modules.get(module)
    if obj is None:
        return None
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if isinstance(obj, type) and issubclass(obj, BaseException) else None


#: readable subclasses of rebuilt exception types (their ``str()`` is the message as it is)
_READABLE: dict[type, type] = {}


def _readable_type(etype: type[BaseException]) -> type[BaseException]:
    """A subclass of ``etype`` (same name, caught by the same ``except``) whose ``str()`` is its
    message as written: ``KeyError`` and friends would show it quoted, its lines joined by ``\\n``."""
    cls = _READABLE.get(etype)
    if cls is None:
        cls = type(etype.__name__, (etype,), {"__str__": lambda self: str(self.args[0]) if self.args else "",
                                              "__module__": etype.__module__, "__qualname__": etype.__qualname__,
                                              "__reduce__": lambda self: (etype, self.args)})
        _READABLE[etype] = cls
    return cls


def make_worker_exception(payload: dict[str, Any], owner: str) -> BaseException:
    """The exception the parent raises for a worker's ``payload``: of the worker's exception type
    when that type's module is already imported here and it takes a message, else a
    :class:`WorkerFailedError`; its message names the worker, its pid and the exception, and
    ends with the worker's traceback, one line per line."""
    type_name = f"{payload['module']}.{payload['name']}" if payload["module"] != "builtins" else payload["name"]
    first = payload.get("message", "")
    label = f"{payload['what']} {payload['idx']}".rstrip()
    msg = (f"{label} (pid {payload['pid']}) of {owner} raised {type_name}"
           f"{': ' + first if first else ''}; the other workers were stopped. The worker's traceback:\n"
           f"{payload['traceback'].rstrip()}")
    etype = _exception_type(payload["module"], payload["name"])
    if etype is not None and issubclass(etype, Exception):
        try:
            return _readable_type(etype)(msg)
        except Exception:  # noqa: BLE001 - constructors with other signatures
            pass
    return WorkerFailedError(msg, type_name)


def died_error(owner: str, label: str, pid: int | None, exitcode: int | None) -> WorkerDiedError:
    """The :class:`WorkerDiedError` for the worker ``label`` (``"worker 3"``) that ended with ``exitcode``."""
    return WorkerDiedError(f"{owner}: {label} (pid {pid}) died without reporting an error "
                           f"({describe_exit(exitcode)}; killed, or out of memory?); the other workers were stopped",
                           pid, exitcode)


def stalled_error(owner: str, waited: float, procs: list[Any]) -> WorkerStalledError:
    """The :class:`WorkerStalledError` after ``waited`` seconds without data from ``procs``."""
    states = []
    for i, p in enumerate(procs):
        name = getattr(p, "_trainbus_label", f"worker {i}")
        states.append(f"{name} (pid {p.pid}) {process_state(p.pid)}")
    return WorkerStalledError(f"{owner}: no datapoint from its worker processes for {waited:.1f} s (the stall "
                              f"timeout; raise it with stall_timeout= or ${STALL_TIMEOUT_ENV}, 0 turns it off): "
                              f"{', '.join(states)}; the workers were stopped")


class PipeDir:
    """A fresh directory, mode 0700, for the ZMQ IPC sockets of one dataflow: only its owner can
    connect to them. Under ``$TRAINBUS_PIPEDIR`` (or ``$TENSORPACK_PIPEDIR``, or the temp
    directory); removed by :meth:`remove` (idempotent), also at interpreter exit."""

    def __init__(self) -> None:
        base = os.environ.get("TRAINBUS_PIPEDIR") or os.environ.get("TENSORPACK_PIPEDIR") or tempfile.gettempdir()
        if not os.path.isdir(base):
            raise NotADirectoryError(f"the ZMQ pipe directory {base!r} ($TRAINBUS_PIPEDIR) does not exist; "
                                     "point TRAINBUS_PIPEDIR to a directory on a local file system")
        _sweep_stale_pipe_dirs(base)
        self.path = tempfile.mkdtemp(prefix=f"trainbus-pipes-{os.getpid()}-", dir=base)  # mode 0700
        self._owner = os.getpid()
        self._finalizer = weakref.finalize(self, PipeDir._rmtree, self.path, self._owner)

    @staticmethod
    def _rmtree(path: str, owner: int) -> None:
        if os.getpid() == owner:  # never from a forked worker
            shutil.rmtree(path, ignore_errors=True)

    def address(self, name: str) -> str:
        """``ipc://`` address of the socket ``name`` in this directory."""
        return f"ipc://{os.path.join(self.path, name)}"

    def remove(self) -> None:
        self._finalizer()


def _sweep_stale_pipe_dirs(base: str) -> None:
    """Remove this user's pipe directories under ``base`` whose process is gone (it was killed
    before it could remove them: SIGKILL, out of memory). Best effort; POSIX only."""
    if os.name != "posix":
        return
    try:
        names = [n for n in os.listdir(base) if n.startswith("trainbus-pipes-")]
    except OSError:
        return
    uid = os.getuid() if hasattr(os, "getuid") else None
    for n in names:
        pid = n[len("trainbus-pipes-"):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        path = os.path.join(base, n)
        try:
            if uid is not None and os.lstat(path).st_uid != uid:
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def pipe_name(name: str, pipedir: PipeDir | None = None) -> str:
    """A ZMQ IPC address for the socket ``name``: in ``pipedir``, or in a new :class:`PipeDir`
    that lives as long as the process (prefer passing one and removing it when done)."""
    if pipedir is None:
        pipedir = PipeDir()
        _KEEP.append(pipedir)
    return pipedir.address(name)


_KEEP: list[PipeDir] = []


def bind_socket(sock: Any, addr: str) -> None:
    """``sock.bind(addr)``, with an error that says what to do when it fails."""
    try:
        sock.bind(addr)
    except zmq.ZMQError as e:
        raise zmq.ZMQError(e.errno, f"cannot bind the dataflow ZMQ socket to {addr} ({e}); if it is a file on a "
                                    "non-local file system (NFS, ...), or its path is too long for a Unix socket, "
                                    "set TRAINBUS_PIPEDIR to a short local directory such as /tmp") from None


class WorkerWatch(threading.Thread):
    """A thread of the parent that sleeps on the worker processes' sentinels (no polling, no cost
    per datapoint); when the first one ends it reaps it and calls ``report(idx, proc)`` once.
    :meth:`stop` (before the workers are terminated on purpose) ends it without a report."""

    def __init__(self, owner: str, procs: list[Any], report: Callable[[int, Any], None]) -> None:
        super().__init__(name=f"{owner}-watch", daemon=True)
        self._procs = list(procs)
        self._report = report
        self._rfd, self._wfd = os.pipe()
        self.stopping = False

    def run(self) -> None:
        from multiprocessing.connection import wait

        try:
            by_sentinel = {p.sentinel: (i, p) for i, p in enumerate(self._procs)}
            ready = wait([self._rfd, *by_sentinel])
            if self.stopping or self._rfd in ready:
                return
            idx, proc = by_sentinel[ready[0]]
            proc.join(1)  # reap it: no zombie, and its exit code is known
            if not self.stopping:
                self._report(idx, proc)
        except Exception as e:  # noqa: BLE001 - the consumer still has the stall watchdog
            logger.warning(f"[{self.name}] the worker watch stopped: {type(e).__name__}: {e}")
        finally:
            os.close(self._rfd)

    def stop(self) -> None:
        """End the watch (idempotent); call it before terminating the workers."""
        if self.stopping:
            return
        self.stopping = True
        try:
            os.write(self._wfd, b"x")
        except OSError:
            pass
        if self is not threading.current_thread():
            self.join(5)
        os.close(self._wfd)


@contextmanager
def zmq_terminated_as_dataflow_terminated(owner: str) -> Iterator[None]:
    """Turn "the ZMQ context/socket was closed under us" into ``DataFlowTerminated``."""
    try:
        yield
    except zmq.ContextTerminated:
        logger.info(f"[{owner}] ZMQ context terminated.")
        raise DataFlowTerminated(f"{owner}: the ZMQ context was terminated (the dataflow was closed)") from None
    except zmq.ZMQError as e:
        if e.errno == errno.ENOTSOCK:
            logger.info(f"[{owner}] ZMQ socket closed.")
            raise DataFlowTerminated(f"{owner}: the ZMQ socket was closed (the dataflow was closed)") from None
        raise


def repeat_iter(get_iterable: Callable[[], Any]) -> Iterator[Any]:
    """Iterate ``get_iterable()`` again and again."""
    while True:
        empty = True
        for x in get_iterable():
            empty = False
            yield x
        if empty:
            raise ValueError(f"the dataflow {get_iterable()!r} produced no datapoint in a whole pass")


def die_with_parent(parent_pid: int, warn: bool = True) -> None:
    """In a worker process: ignore SIGINT (a Ctrl-C reaches the whole process group; the parent
    handles it and stops its workers, which must keep serving until then, also when the parent
    started them from a thread where they could not be started with SIGINT masked), have the
    kernel kill the worker when its parent dies (``enable_death_signal``), and exit now if the
    parent already died before that took effect (a death signal set after the parent's death is
    never delivered)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    enable_death_signal(_warn=warn)
    if os.getppid() != parent_pid:
        os._exit(1)


def give_worker_seeds(procs: list[Any]) -> None:
    """In the parent, before starting ``procs``: give each its seed (``trainbus.utils.seed``: derived
    from the run's seed, this dataflow's start number and the worker's index; None without a run
    seed), which the worker applies with :func:`seed_worker`."""
    for proc, seed in zip(procs, dataflow_worker_seeds(len(procs))):
        proc._trainbus_seed = seed


def seed_worker(proc: Any) -> None:
    """In a worker process, before its dataflow's ``reset_state()``: seed Python, NumPy and the
    DataFlow RNGs with the worker's own seed, and reseed the live image augmentors with it (they
    were reseeded at ``fork`` from the run's seed, the same in every worker). Nothing without a
    seed: ``get_rng`` mixes the process id and the time."""
    seed = getattr(proc, "_trainbus_seed", None)
    if seed is None:
        return
    seed_dataflow_worker(seed)
    augmentors = sys.modules.get("trainbus_dataflow.imgaug.base")
    if augmentors is not None:
        augmentors._reseed_after_fork()


class WorkerThread(StoppableThread):
    """A daemon thread that runs :meth:`work` once; an exception it raises (unless the thread was
    stopped) is put on :attr:`failures` as ``failure(exc, traceback text)`` for the consumer to raise.
    The thread stops itself (its stop event is set) when :meth:`work` ends, however it ends."""

    def __init__(self, name: str, idx: int, failures: Any, evt: threading.Event | None = None) -> None:
        super().__init__(evt)
        self.idx = idx
        self.failures = failures
        self.daemon = True
        self.name = name

    def work(self) -> None:
        raise NotImplementedError

    def failure(self, exc: BaseException, tb: str) -> Any:
        raise NotImplementedError

    def run(self) -> None:
        try:
            self.work()
        except BaseException as e:  # noqa: BLE001 - handed to the consumer
            if not self.stopped():
                self.queue_put_stoppable(self.failures, self.failure(e, traceback.format_exc()))
        finally:
            self.stop()


def await_stop_after_report() -> None:
    """In a worker that sent its exception to the parent: stay until the parent stops this process
    (it does once it has read the report). Exiting at once could lose the report: when a process
    ends, what it wrote to the pipe but the parent has not read yet (a full queue) can be dropped.
    Leaves when the parent is gone (where the kernel does not kill the worker with it)."""
    parent = os.getppid()
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(1)


@contextmanager
def reporting_worker_errors(ctx: Any, sock: Any, idx: int | str) -> Iterator[None]:
    """The body of a worker process that sends on ``sock`` (of ``ctx``): an exception in it is sent
    as an ``EXC_MARK`` message and the worker waits for the parent to stop it (see
    :func:`await_stop_after_report`; the parent reports the error: the worker prints nothing
    itself); Ctrl-C ends the worker quietly; the socket and context are closed at the end."""
    try:
        yield
    except KeyboardInterrupt:
        pass
    except BaseException:
        sock.send_multipart([EXC_MARK, dumps(worker_exception_payload(idx))])
        await_stop_after_report()
    finally:
        if not sock.closed:
            sock.close(0)
            ctx.destroy(0)


def _close_weakref(ref: weakref.ref) -> None:
    obj = ref()
    if obj is not None:
        obj.close()


class MultiProcessZMQDataFlow(DataFlow):
    """Common machinery of the dataflows that run worker processes talking ZMQ to the parent:
    a parent socket, ``self._procs``, starting, the watch of the workers, the stall watchdog,
    error forwarding and cleanup (processes, sockets, the private pipe directory)."""

    #: the type (the name of its zmq constant) of the socket the watch thread uses to tell the
    #: parent's socket that a worker died
    _WATCH_SOCKET = "PUSH"

    def __init__(self, stall_timeout: float | None = None) -> None:
        # held by every use of the parent socket and by close(): ZMQ sockets are not thread-safe,
        # and close() from another thread (a callback, atexit) must not close a socket that the
        # consumer is receiving on (libzmq aborts the process or the receive never returns)
        self._sock_lock = threading.RLock()
        if os.name == "nt":
            raise OSError(f"{type(self).__name__} uses ZMQ IPC pipes, which Windows lacks; "
                          "use MultiProcessRunner there")
        self._reset_done = False
        self._procs: list[Any] = []
        self.context: Any = None
        self.socket: Any = None
        self._atexit_registered = False
        self._pipedir: PipeDir | None = None
        self._watch: WorkerWatch | None = None
        self._result_addr: str | None = None
        self._stall_arg = stall_timeout
        self.stall_timeout = stall_timeout_of(stall_timeout, type(self).__name__)
        self._waiter: threading.Thread | None = None  # the thread waiting for data, if any
        self._closing = False

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the worker processes started by the last ``reset_state()``."""
        return [p.pid for p in self._procs if p.pid is not None]

    @property
    def pipe_dir(self) -> str | None:
        """The private directory of this dataflow's ZMQ sockets (None before ``reset_state()``
        and after ``close()``)."""
        return self._pipedir.path if self._pipedir is not None else None

    def reset_state(self) -> None:
        """Start the workers (in the calling process). Called again, it stops and reaps the
        previous workers first."""
        if self._reset_done:
            self.close()
        self._reset_done = True
        self.stall_timeout = stall_timeout_of(self._stall_arg, type(self).__name__)
        self._closing = False
        self._pipedir = PipeDir()
        if not self._atexit_registered:
            atexit.register(_close_weakref, weakref.ref(self))
            self._atexit_registered = True

    def _start_processes(self) -> None:
        give_worker_seeds(self._procs)
        start_proc_mask_signal(self._procs)
        self._watch = WorkerWatch(type(self).__name__, self._procs, self._report_death)
        self._watch.start()

    def _report_death(self, idx: int, proc: Any) -> None:
        """In the watch thread: tell the consumer, through its own socket, that worker ``idx`` died."""
        ctx, addr = self.context, self._result_addr
        if ctx is None or addr is None:
            return
        try:
            sock = ctx.socket(getattr(zmq, self._WATCH_SOCKET))
            try:
                if self._WATCH_SOCKET == "DEALER":
                    sock.setsockopt(zmq.IDENTITY, b"trainbus-watch")
                sock.connect(addr)
                label = getattr(proc, "_trainbus_label", f"worker {idx}")
                sock.send_multipart([DIED_MARK, dumps({"label": label, "pid": proc.pid, "exitcode": proc.exitcode})])
            finally:
                sock.close(linger=2000)
        except zmq.ZMQError:  # the dataflow was closed meanwhile
            pass

    def _closed_error(self, owner: str) -> DataFlowTerminated:
        return DataFlowTerminated(f"{owner}: the dataflow was closed (close() was called, here or in another "
                                  "thread) while it was being iterated")

    def _on_socket(self, op: Callable[[Any], Any], owner: str) -> Any:
        """``op(socket)`` while holding the socket lock; ``DataFlowTerminated`` once the dataflow
        is closing. ``op`` must return within a bounded time (a receive with a timeout)."""
        with self._sock_lock:
            sock = self.socket
            if sock is None or self._closing:
                raise self._closed_error(owner)
            return op(sock)

    def _poll_message(self, timeout_ms: int, owner: str, copy: bool = True) -> Any:
        """The next message (its frames) if one arrives within ``timeout_ms``, else None."""
        return self._on_socket(lambda sock: sock.recv_multipart(copy=copy) if sock.poll(timeout_ms) else None, owner)

    def _died(self, payload: Any, owner: str, exc_of: Callable[[Any], BaseException | None]) -> BaseException:
        """The error for a died-marker: the exception the dead worker sent, if it arrives within a
        second (it may come after the marker: other connection), else :class:`WorkerDiedError`.
        ``exc_of(message)`` is the worker exception a message carries, or None."""
        info = loads(payload)
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            msg = self._poll_message(100, owner, copy=False)
            if msg is not None:
                exc = exc_of(msg)
                if exc is not None:
                    return exc
        return died_error(owner, info["label"], info["pid"], info["exitcode"])

    def _fail(self, exc: BaseException) -> None:
        """Stop everything, raise ``exc`` (the one report of the failure: nothing is logged)."""
        self.close()
        raise exc

    def _wait(self, recv: Callable[[Any], Any], owner: str) -> Any:
        """The slow path of a receive whose first try timed out: ``recv(socket)`` again every
        ``_LIVENESS_POLL_MS`` (holding the socket lock only during each try), raising on a stall
        and when another thread closes the dataflow."""
        self._waiter = threading.current_thread()
        try:
            start = time.monotonic()
            while True:
                try:
                    return self._on_socket(recv, owner)
                except zmq.Again:
                    if wait_interrupted():
                        raise DataFlowTerminated(f"{owner}: stopped waiting for data (training was asked to "
                                                 "stop)") from None
                    waited = time.monotonic() - start
                    if waited >= self.stall_timeout:
                        self._fail(stalled_error(owner, waited, self._procs))
        finally:
            self._waiter = None

    @staticmethod
    def _read_message(sock: Any) -> tuple[Any, list[Any]]:
        """One message: its first frame and the rest (waits at most RCVTIMEO for the first)."""
        frame = sock.recv(copy=False)
        parts = []
        if frame.more:
            while sock.getsockopt(zmq.RCVMORE):
                parts.append(sock.recv(copy=False))
        return frame, parts

    def _recv_datapoint(self, owner: str) -> Any:
        """The next datapoint from the workers; raises the worker's exception for an error message,
        :class:`WorkerDiedError` when a worker died and :class:`WorkerStalledError` on a stall."""
        try:
            frame, parts = self._on_socket(self._read_message, owner)
        except zmq.Again:
            frame, parts = self._wait(self._read_message, owner)
        if not parts:
            return loads(frame.buffer)
        head = frame.bytes
        if head == DATA_MARK:
            return decode_frames(parts)
        if head == EXC_MARK:
            self._fail(make_worker_exception(loads(parts[0].buffer), owner))
        if head == DIED_MARK:
            def exc_of(msg: list[Any]) -> BaseException | None:
                return make_worker_exception(loads(msg[1].buffer), owner) if len(msg) == 2 and \
                    msg[0].bytes == EXC_MARK else None

            self._fail(self._died(parts[0].buffer, owner, exc_of))
        raise ValueError(f"{owner}: unexpected {len(parts) + 1}-frame message from a worker")

    def close(self) -> None:
        """Stop and reap the worker processes, close the sockets and remove the pipe directory
        (idempotent). Called from another thread than the one iterating, it waits until that
        one's current receive returns (at most half a second): the iteration then raises
        ``DataFlowTerminated``."""
        self._closing = True
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.stop()
        procs, self._procs = self._procs, []
        stop_processes(procs)
        with self._sock_lock:
            sock, ctx = self.socket, self.context
            self.socket = self.context = None
            if sock is not None:
                sock.close(0)
            if ctx is not None:
                ctx.destroy(0)
        pipedir, self._pipedir = self._pipedir, None
        if pipedir is not None:
            pipedir.remove()

    def __del__(self) -> None:
        try:
            if self._reset_done:
                self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def stop_processes(procs: list[Any]) -> None:
    """Terminate ``procs`` and reap them (SIGKILL for those that do not end within 5 s, e.g. a
    stopped process, which gets SIGCONT too)."""
    for p in procs:
        if p.pid is not None and p.is_alive():
            p.terminate()
            if hasattr(signal, "SIGCONT"):
                try:
                    os.kill(p.pid, signal.SIGCONT)  # a stopped worker handles the SIGTERM now
                except OSError:
                    pass
    for p in procs:
        if p.pid is None:
            continue
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join(5)


class MultiProcessRunner(ProxyDataFlow):
    """Run ``num_proc`` copies of a dataflow in forked processes; collect their datapoints through
    a ``multiprocessing.Queue`` of ``num_prefetch`` (pickled) datapoints.

    With ``num_proc=1`` the output is the datapoints of ``ds`` in order; with more it is the same
    distribution (duplicates, reordering). Each worker calls ``ds.reset_state()`` itself and
    repeats ``ds`` forever; a pass of this dataflow ends after ``len(ds)`` datapoints (never if
    ``ds`` has no length). The processes are created here and started by ``reset_state()``.
    Slower than ``MultiProcessRunnerZMQ`` for large datapoints (pickling, pipe copies).
    A worker that dies, raises or stalls (``stall_timeout``, as for ``MultiProcessRunnerZMQ``)
    makes the iteration raise (see the module docstring).
    """

    class _Worker(mp.get_context("fork" if sys.platform != "win32" else "spawn").Process):  # type: ignore[misc]
        def __init__(self, ds: Any, q: Any, idx: int) -> None:
            super().__init__(name=f"MultiProcessRunner-{idx}", daemon=True)
            self.ds = ds
            self.queue = q
            self.idx = idx
            self.parent_pid = os.getpid()

        def run(self) -> None:
            die_with_parent(self.parent_pid, self.idx == 0)
            seed_worker(self)
            try:
                self.ds.reset_state()
                for dp in repeat_iter(lambda: self.ds):
                    self.queue.put((0, dp))
            except KeyboardInterrupt:
                pass
            except BaseException:
                self.queue.put((1, worker_exception_payload(self.idx)))
                self.queue.close()
                self.queue.join_thread()

    def __init__(self, ds: Any, num_prefetch: int, num_proc: int, stall_timeout: float | None = None) -> None:
        super().__init__(ds)
        self._stall_arg = stall_timeout
        self.stall_timeout = stall_timeout_of(stall_timeout, "MultiProcessRunner")
        self._watch: WorkerWatch | None = None
        self._closing = False
        self._dead = None
        if int(num_proc) <= 0:
            raise ValueError(f"MultiProcessRunner: num_proc must be >= 1, got {num_proc!r}")
        if int(num_prefetch) <= 0:
            raise ValueError(f"MultiProcessRunner: num_prefetch must be >= 1, got {num_prefetch!r}")
        try:
            self._size = len(ds)
        except (NotImplementedError, TypeError):  # no length: an endless pass
            self._size = -1
        self.num_proc = int(num_proc)
        self.num_prefetch = int(num_prefetch)
        if self.num_proc > 1:
            logger.info("[MultiProcessRunner] Will fork a dataflow more than one times. "
                        "This assumes the datapoints are i.i.d.")
        self._ctx = _fork_context()
        self._make_workers()
        self._reset_done = False
        self._guard = DataFlowReentrantGuard()
        atexit.register(_close_weakref, weakref.ref(self))

    def _make_workers(self) -> None:
        self.queue = self._ctx.Queue(self.num_prefetch)
        self.procs = [MultiProcessRunner._Worker(self.ds, self.queue, i) for i in range(self.num_proc)]
        ensure_proc_terminate(self.procs)

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the worker processes."""
        return [p.pid for p in self.procs if p.pid is not None]

    def reset_state(self) -> None:
        """Start the worker processes (a second call stops them and starts new ones)."""
        if self._reset_done:
            self.close()
            self._make_workers()
        self._reset_done = True
        self.stall_timeout = stall_timeout_of(self._stall_arg, "MultiProcessRunner")
        self._closing = False
        self._dead: dict[str, Any] | None = None
        give_worker_seeds(self.procs)
        start_proc_mask_signal(self.procs)
        self._watch = WorkerWatch("MultiProcessRunner", self.procs, self._report_death)
        self._watch.start()

    def _report_death(self, idx: int, proc: Any) -> None:
        """In the watch thread: note the death for the consumer (not through the queue: a worker
        killed while writing to it leaves its lock taken)."""
        self._dead = {"idx": idx, "pid": proc.pid, "exitcode": proc.exitcode}

    def _raise_dead(self) -> None:
        """A worker died: raise the exception it sent before, if one is queued, else WorkerDiedError."""
        dead = self._dead
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                kind, obj = self.queue.get(timeout=0.2)
            except queue.Empty:
                break
            if kind == 1:
                self._fail(make_worker_exception(obj, "MultiProcessRunner"))
        self._fail(died_error("MultiProcessRunner", f"worker {dead['idx']}", dead["pid"], dead["exitcode"]))

    def _get(self) -> Any:
        if self._dead is not None:
            self._raise_dead()
        try:
            kind, obj = self.queue.get(timeout=_LIVENESS_POLL_MS / 1000)
        except queue.Empty:
            start = time.monotonic()
            while True:
                try:
                    kind, obj = self.queue.get(timeout=_LIVENESS_POLL_MS / 1000)
                    break
                except queue.Empty:
                    if self._closing:
                        raise DataFlowTerminated("MultiProcessRunner: closed while waiting for data") from None
                    if wait_interrupted():
                        raise DataFlowTerminated("MultiProcessRunner: stopped waiting for data (training was asked "
                                                 "to stop)") from None
                    if self._dead is not None:
                        self._raise_dead()
                    waited = time.monotonic() - start
                    if waited >= self.stall_timeout:
                        self._fail(stalled_error("MultiProcessRunner", waited, self.procs))
        if kind:
            self._fail(make_worker_exception(obj, "MultiProcessRunner"))
        return obj

    def _fail(self, exc: BaseException) -> None:
        self.close()
        raise exc

    def __iter__(self) -> Iterator[Any]:
        if not self._reset_done:
            raise RuntimeError("MultiProcessRunner: call reset_state() before iterating (it starts the workers)")
        with self._guard:
            for k in itertools.count():
                if 0 < self._size <= k:
                    break
                yield self._get()

    def close(self) -> None:
        """Terminate and reap the worker processes (idempotent); a thread waiting for data
        raises ``DataFlowTerminated`` within half a second."""
        self._closing = True
        watch, self._watch = getattr(self, "_watch", None), None
        if watch is not None:
            watch.stop()
        stop_processes(self.procs)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class MultiProcessRunnerZMQ(MultiProcessZMQDataFlow):
    """Run ``num_proc`` copies of a dataflow in processes forked by ``reset_state()``; datapoints
    come to the parent through a ZMQ PUSH/PULL pipe, serialized with msgpack
    (``trainbus.utils.serialize``: numpy arrays as raw bytes).

    With ``num_proc=1`` the output is the datapoints of ``ds`` in order; with more it is the same
    distribution (duplicates, reordering). Each worker calls ``ds.reset_state()`` once and repeats
    ``ds`` forever; a pass of this dataflow ends after ``len(ds)`` datapoints (never if ``ds`` has
    no length). Not reentrant; iterate it from one thread. Don't fork a process that holds a
    started instance (the copy won't work).

    :param ds: the dataflow to run in the workers.
    :param num_proc: number of worker processes.
    :param hwm: ZMQ high-water mark (queue length, in datapoints) of each end.
    :param stall_timeout: seconds the workers may produce nothing while the consumer waits before
        :class:`WorkerStalledError` (default ``$TRAINBUS_DATAFLOW_STALL_TIMEOUT``, else 300; 0: never).
    """

    class _Worker(mp.get_context("fork" if sys.platform != "win32" else "spawn").Process):  # type: ignore[misc]
        def __init__(self, ds: Any, conn_name: str, hwm: int, idx: int) -> None:
            super().__init__(name=f"MultiProcessRunnerZMQ-{idx}", daemon=True)
            self.ds = ds
            self.conn_name = conn_name
            self.hwm = hwm
            self.idx = idx
            self.parent_pid = os.getpid()

        def run(self) -> None:
            die_with_parent(self.parent_pid, self.idx == 0)
            seed_worker(self)
            ctx = zmq.Context()
            sock = ctx.socket(zmq.PUSH)
            sock.set_hwm(self.hwm)
            sock.connect(self.conn_name)
            with reporting_worker_errors(ctx, sock, self.idx):
                self.ds.reset_state()
                for dp in repeat_iter(lambda: self.ds):
                    send_datapoint(sock, dp)

    def __init__(self, ds: Any, num_proc: int = 1, hwm: int = 50, stall_timeout: float | None = None) -> None:
        super().__init__(stall_timeout)
        if int(num_proc) <= 0:
            raise ValueError(f"MultiProcessRunnerZMQ: num_proc must be >= 1, got {num_proc!r}")
        self.ds = ds
        self.num_proc = int(num_proc)
        self._hwm = int(hwm)
        if self.num_proc > 1:
            logger.info("[MultiProcessRunnerZMQ] Will fork a dataflow more than one times. "
                        "This assumes the datapoints are i.i.d.")
        try:
            self._size = ds.__len__()
        except (NotImplementedError, TypeError):  # no length: an endless pass
            self._size = -1
        self._guard = DataFlowReentrantGuard()

    def __len__(self) -> int:
        return self.ds.__len__()

    def reset_state(self) -> None:
        super().reset_state()
        self._guard = DataFlowReentrantGuard()
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.PULL)
        self.socket.set_hwm(self._hwm)
        self.socket.setsockopt(zmq.RCVTIMEO, _LIVENESS_POLL_MS)  # then check that the workers live
        name = pipe_name("dataflow", self._pipedir)
        bind_socket(self.socket, name)
        self._result_addr = name
        self._procs = [MultiProcessRunnerZMQ._Worker(self.ds, name, self._hwm, i) for i in range(self.num_proc)]
        self._start_processes()

    def __iter__(self) -> Iterator[Any]:
        if not self._reset_done:
            raise RuntimeError("MultiProcessRunnerZMQ: call reset_state() before iterating (it starts the workers)")
        owner = "MultiProcessRunnerZMQ"
        with self._guard, zmq_terminated_as_dataflow_terminated(owner):
            recv = self._recv_datapoint
            for k in itertools.count():
                if 0 < self._size <= k:
                    break
                yield recv(owner)


class MultiThreadRunner(DataFlow):
    """Run ``num_thread`` dataflows, one per thread, collecting their datapoints in a queue of
    ``num_prefetch``. ``get_df()`` is called once per thread and should return a new dataflow each
    time (unless it is stateless). With one thread the output is that dataflow's datapoints in
    order; with more the same distribution. A pass ends after ``len()`` datapoints (the first
    dataflow's length; never if it has none). An exception in a thread is raised by ``__iter__``.
    """

    class _Worker(WorkerThread):
        def __init__(self, get_df: Callable[[], Any], q: Any, idx: int) -> None:
            super().__init__(f"MultiThreadRunner-{idx}", idx, q)
            self.df = get_df()
            if not (hasattr(self.df, "__iter__") and hasattr(self.df, "reset_state")):
                raise TypeError(f"MultiThreadRunner: get_df() must return a DataFlow, got {self.df!r}")
            self.queue = q

        def work(self) -> None:
            for dp in repeat_iter(lambda: self.df):
                if self.stopped():
                    return
                self.queue_put_stoppable(self.queue, (0, dp))

        def failure(self, exc: BaseException, tb: str) -> Any:
            return (1, (self.idx, exc, tb))

    def __init__(self, get_df: Callable[[], Any], num_prefetch: int, num_thread: int) -> None:
        if not callable(get_df):
            raise TypeError(f"MultiThreadRunner: get_df must be a function returning a new DataFlow, got {get_df!r}")
        if int(num_thread) <= 0:
            raise ValueError(f"MultiThreadRunner: num_thread must be >= 1, got {num_thread!r}")
        if int(num_prefetch) <= 0:
            raise ValueError(f"MultiThreadRunner: num_prefetch must be >= 1, got {num_prefetch!r}")
        self.num_thread = int(num_thread)
        self.queue: queue.Queue = queue.Queue(maxsize=int(num_prefetch))
        self.threads = [MultiThreadRunner._Worker(get_df, self.queue, i) for i in range(self.num_thread)]
        try:
            self._size = self.__len__()
        except (NotImplementedError, TypeError):  # no length: an endless pass
            self._size = -1

    def reset_state(self) -> None:
        for th in self.threads:
            th.df.reset_state()
            th.start()

    def __len__(self) -> int:
        return self.threads[0].df.__len__()

    def __iter__(self) -> Iterator[Any]:
        for k in itertools.count():
            if 0 < self._size <= k:
                break
            kind, obj = self.queue.get()
            if kind:
                idx, exc, tb = obj
                self.close()
                raise rebuild_thread_exception(exc, tb, f"thread {idx} of MultiThreadRunner") from exc
            yield obj

    def close(self) -> None:
        """Stop the threads (each stops at its next datapoint)."""
        for th in self.threads:
            th.stop()
        for th in self.threads:
            if th.is_alive() and th is not threading.current_thread():
                # drain so that a thread blocked on a full queue sees the stop event
                try:
                    while True:
                        self.queue.get_nowait()
                except queue.Empty:
                    pass
                th.join(timeout=5.0)

    def __del__(self) -> None:
        try:
            for th in self.threads:
                th.stop()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def rebuild_thread_exception(exc: BaseException, tb: str, where: str) -> BaseException:
    """An exception of ``exc``'s type whose message names ``where`` it was raised and holds its
    traceback ``tb`` (``exc`` itself when its type cannot be built from a message)."""
    if isinstance(exc, Exception):
        try:
            return type(exc)(f"{where} raised {type(exc).__name__}; its traceback:\n{tb}")
        except Exception:  # noqa: BLE001 - constructors with other signatures
            pass
    return exc


# tensorpack's older names
PrefetchData = MultiProcessRunner
MultiProcessPrefetchData = MultiProcessRunner
PrefetchDataZMQ = MultiProcessRunnerZMQ
MultiThreadPrefetchData = MultiThreadRunner
