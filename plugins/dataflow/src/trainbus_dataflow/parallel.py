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
* that raise send the traceback to the parent, which stops the other workers and raises an
  exception of the same type whose message holds the worker's traceback.
"""

from __future__ import annotations

import atexit
import builtins
import errno
import importlib
import itertools
import multiprocessing as mp
import os
import queue
import signal
import sys
import tempfile
import threading
import traceback
import uuid
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import numpy as np
import zmq

from trainbus.utils import logger
from trainbus.utils.concurrency import StoppableThread, enable_death_signal, ensure_proc_terminate, \
    start_proc_mask_signal
from trainbus.utils.serialize import dumps, loads
from trainbus_dataflow.base import DataFlow, DataFlowReentrantGuard, DataFlowTerminated, ProxyDataFlow

__all__ = ["MultiProcessRunner", "MultiProcessRunnerZMQ", "MultiThreadRunner", "PrefetchData", "PrefetchDataZMQ",
           "MultiProcessPrefetchData", "MultiThreadPrefetchData"]

#: the first frame of a two-frame ZMQ message that carries a worker's exception instead of a datapoint
EXC_MARK = b"trainbus-dataflow-exception"
#: how long (ms) the parent waits for a message before it checks that its workers are alive
_LIVENESS_POLL_MS = 500


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
    and pickle): its type's module and name, the worker index, pid and the formatted traceback."""
    etype, evalue, _ = sys.exc_info()
    assert etype is not None
    return {"module": etype.__module__, "name": etype.__qualname__, "idx": str(idx), "pid": os.getpid(),
            "what": what, "traceback": "".join(traceback.format_exception(etype, evalue, evalue.__traceback__))}


def _exception_type(module: str, name: str) -> type[BaseException] | None:
    try:
        obj: Any = builtins if module == "builtins" else importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except Exception:  # noqa: BLE001 - unknown type: the caller falls back to RuntimeError
        return None
    return obj if isinstance(obj, type) and issubclass(obj, BaseException) else None


def make_worker_exception(payload: dict[str, Any], owner: str) -> BaseException:
    """The exception the parent raises for a worker's ``payload``: the worker's exception type if it
    can be built from a message (else ``RuntimeError``), with the worker's traceback in the message."""
    msg = (f"{payload['what']} {payload['idx']} (pid {payload['pid']}) of {owner} raised "
           f"{payload['name']}; its traceback:\n{payload['traceback']}")
    etype = _exception_type(payload["module"], payload["name"])
    if etype is not None and issubclass(etype, Exception):
        try:
            return etype(msg)
        except Exception:  # noqa: BLE001 - constructors with other signatures
            pass
    return RuntimeError(msg)


def pipe_name(name: str) -> str:
    """A fresh ZMQ IPC address: an abstract socket on Linux (no file), else a file under
    ``$TRAINBUS_PIPEDIR`` (or ``$TENSORPACK_PIPEDIR``, or the temp directory)."""
    tag = uuid.uuid4().hex[:12]
    if sys.platform.startswith("linux"):
        return f"ipc://@trainbus-{name}-pipe-{tag}"
    pipedir = os.environ.get("TRAINBUS_PIPEDIR") or os.environ.get("TENSORPACK_PIPEDIR") or tempfile.gettempdir()
    if not os.path.isdir(pipedir):
        raise NotADirectoryError(f"the ZMQ pipe directory {pipedir!r} ($TRAINBUS_PIPEDIR) does not exist; "
                                 "point TRAINBUS_PIPEDIR to a directory on a local file system")
    return f"ipc://{os.path.join(pipedir, f'trainbus-{name}-pipe-{tag}')}"


def bind_socket(sock: Any, addr: str) -> None:
    """``sock.bind(addr)``, with an error that says what to do when it fails."""
    try:
        sock.bind(addr)
    except zmq.ZMQError as e:
        raise zmq.ZMQError(e.errno, f"cannot bind the dataflow ZMQ socket to {addr} ({e}); if it is a file on a "
                                    "non-local file system (NFS, ...), set TRAINBUS_PIPEDIR to a local "
                                    "directory such as /tmp") from None


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


@contextmanager
def reporting_worker_errors(ctx: Any, sock: Any, idx: int | str) -> Iterator[None]:
    """The body of a worker process that sends on ``sock`` (of ``ctx``): an exception in it is sent
    as an ``EXC_MARK`` message (delivered before the process exits) and raised again; Ctrl-C ends the
    worker quietly; the socket and context are closed at the end either way."""
    try:
        yield
    except KeyboardInterrupt:
        pass
    except BaseException:
        sock.send_multipart([EXC_MARK, dumps(worker_exception_payload(idx))])
        sock.close(linger=5000)  # deliver the error before exiting
        ctx.term()
        raise
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
    a parent socket, ``self._procs``, starting, liveness checks, error forwarding and cleanup."""

    def __init__(self) -> None:
        if os.name == "nt":
            raise OSError(f"{type(self).__name__} uses ZMQ IPC pipes, which Windows lacks; "
                          "use MultiProcessRunner there")
        self._reset_done = False
        self._procs: list[Any] = []
        self.context: Any = None
        self.socket: Any = None
        self._atexit_registered = False

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the worker processes started by the last ``reset_state()``."""
        return [p.pid for p in self._procs if p.pid is not None]

    def reset_state(self) -> None:
        """Start the workers (in the calling process). Called again, it stops and reaps the
        previous workers first."""
        if self._reset_done:
            self.close()
        self._reset_done = True
        if not self._atexit_registered:
            atexit.register(_close_weakref, weakref.ref(self))
            self._atexit_registered = True

    def _start_processes(self) -> None:
        start_proc_mask_signal(self._procs)

    def _check_workers_alive(self, owner: str) -> None:
        dead = [(i, p) for i, p in enumerate(self._procs) if not p.is_alive()]
        if dead:
            desc = ", ".join(f"{i} (pid {p.pid}, exit code {p.exitcode})" for i, p in dead)
            self.close()
            raise DataFlowTerminated(f"{owner}: worker process {desc} died without reporting an error "
                                     "(killed, or out of memory?); the other workers were stopped")

    def _recv_datapoint(self, owner: str) -> Any:
        """The next datapoint from the workers; raises the worker's exception for an error message,
        and ``DataFlowTerminated`` if workers died silently."""
        sock = self.socket
        while True:
            try:
                frame = sock.recv(copy=False)  # waits at most RCVTIMEO (set by reset_state)
                break
            except zmq.Again:
                self._check_workers_alive(owner)
        if not frame.more:
            return loads(frame.buffer)
        head = frame.bytes
        parts = []
        while sock.getsockopt(zmq.RCVMORE):
            parts.append(sock.recv(copy=False))
        if head == DATA_MARK:
            return decode_frames(parts)
        if head == EXC_MARK:
            exc = make_worker_exception(loads(parts[0].buffer), owner)
            logger.error(f"[{owner}] a worker raised {type(exc).__name__}; stopping the other workers")
            self.close()
            raise exc
        raise ValueError(f"{owner}: unexpected {len(parts) + 1}-frame message from a worker")

    def close(self) -> None:
        """Stop and reap the worker processes and close the sockets (idempotent)."""
        procs, self._procs = self._procs, []
        for p in procs:
            if p.pid is not None and p.is_alive():
                p.terminate()
        for p in procs:
            if p.pid is None:
                continue
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join(5)
        sock, ctx = self.socket, self.context
        self.socket = self.context = None
        if sock is not None:
            sock.close(0)
        if ctx is not None:
            ctx.destroy(0)

    def __del__(self) -> None:
        try:
            if self._reset_done:
                self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class MultiProcessRunner(ProxyDataFlow):
    """Run ``num_proc`` copies of a dataflow in forked processes; collect their datapoints through
    a ``multiprocessing.Queue`` of ``num_prefetch`` (pickled) datapoints.

    With ``num_proc=1`` the output is the datapoints of ``ds`` in order; with more it is the same
    distribution (duplicates, reordering). Each worker calls ``ds.reset_state()`` itself and
    repeats ``ds`` forever; a pass of this dataflow ends after ``len(ds)`` datapoints (never if
    ``ds`` has no length). The processes are created here and started by ``reset_state()``.
    Slower than ``MultiProcessRunnerZMQ`` for large datapoints (pickling, pipe copies).
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

    def __init__(self, ds: Any, num_prefetch: int, num_proc: int) -> None:
        super().__init__(ds)
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
        start_proc_mask_signal(self.procs)

    def _get(self) -> Any:
        while True:
            try:
                kind, obj = self.queue.get(timeout=_LIVENESS_POLL_MS / 1000)
                break
            except queue.Empty:
                dead = [(i, p) for i, p in enumerate(self.procs) if not p.is_alive()]
                if dead and self.queue.empty():
                    desc = ", ".join(f"{i} (pid {p.pid}, exit code {p.exitcode})" for i, p in dead)
                    self.close()
                    raise DataFlowTerminated(f"MultiProcessRunner: worker process {desc} died without reporting "
                                             "an error; the other workers were stopped") from None
        if kind:
            exc = make_worker_exception(obj, "MultiProcessRunner")
            logger.error(f"[MultiProcessRunner] a worker raised {type(exc).__name__}; stopping the other workers")
            self.close()
            raise exc
        return obj

    def __iter__(self) -> Iterator[Any]:
        if not self._reset_done:
            raise RuntimeError("MultiProcessRunner: call reset_state() before iterating (it starts the workers)")
        with self._guard:
            for k in itertools.count():
                if 0 < self._size <= k:
                    break
                yield self._get()

    def close(self) -> None:
        """Terminate and reap the worker processes (idempotent)."""
        for p in self.procs:
            if p.pid is not None and p.is_alive():
                p.terminate()
        for p in self.procs:
            if p.pid is not None:
                p.join(5)
                if p.is_alive():
                    p.kill()
                    p.join(5)

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
            ctx = zmq.Context()
            sock = ctx.socket(zmq.PUSH)
            sock.set_hwm(self.hwm)
            sock.connect(self.conn_name)
            with reporting_worker_errors(ctx, sock, self.idx):
                self.ds.reset_state()
                for dp in repeat_iter(lambda: self.ds):
                    send_datapoint(sock, dp)

    def __init__(self, ds: Any, num_proc: int = 1, hwm: int = 50) -> None:
        super().__init__()
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
        name = pipe_name("dataflow")
        bind_socket(self.socket, name)
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
