"""Parallel versions of ``MapData`` (``trainbus.dataflow.parallel_map``): the map function runs in
threads (``MultiThreadMapData``) or worker processes over ZMQ (``MultiProcessMapDataZMQ``,
``MultiProcessMapAndBatchDataZMQ``), while the input dataflow is read in the calling process.

Order: workers finish at different times, so datapoints come out in a different order than
``MapData`` gives. What they come out as:

* ``strict=True``: every pass is exactly the set of datapoints of one pass of
  ``MapData(ds, map_func)`` (``ds`` must be finite; ``map_func`` must not return ``None``).
* ``strict=False`` (default): a reordering of ``RepeatedData(MapData(ds, map_func), -1)``:
  iteration never ends (as in tensorpack), and the first ``len(ds)`` datapoints may hold some
  of the next pass of ``ds``; ``len()`` is still ``len(ds)``, the size of an epoch.

With one worker and ``buffer_size=1`` the order is the order of ``ds``.

The process versions watch their workers like ``MultiProcessRunnerZMQ`` does: a worker that
dies, raises, or (``stall_timeout``) produces nothing while the consumer waits stops them all
with one error naming it; their pipes are private to the owner.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
import time
from typing import Any, Callable, Iterator

from trainbus.utils.concurrency import StoppableThread
from trainbus.utils.serialize import dumps, loads
from trainbus_dataflow._lazyzmq import zmq
from trainbus_dataflow.base import DataFlowReentrantGuard, ProxyDataFlow
from trainbus_dataflow.common import BatchData, RepeatedData
from trainbus_dataflow.parallel import (DIED_MARK, EXC_MARK, MultiProcessZMQDataFlow, WorkerThread, _fork_context,
                                        await_stop_after_report, bind_socket, die_with_parent, died_error,
                                        make_worker_exception, pipe_name, rebuild_thread_exception,
                                        reporting_worker_errors, seed_worker, send_datapoint,
                                        worker_exception_payload, zmq_terminated_as_dataflow_terminated)

__all__ = ["MultiThreadMapData", "MultiProcessMapData", "MultiProcessMapDataZMQ", "MultiProcessMapAndBatchData",
           "MultiProcessMapAndBatchDataZMQ", "ThreadedMapData"]

_LIVENESS_POLL_MS = 500
_Process = _fork_context().Process


def _check_map_args(owner: str, num: Any, map_func: Any, what: str) -> None:
    if num is None or isinstance(num, bool) or int(num) != num or int(num) <= 0:
        raise ValueError(f"{owner}: {what} must be a positive integer, got {num!r}")
    if not callable(map_func):
        raise TypeError(f"{owner}: map_func must be callable (datapoint -> datapoint or None), got {map_func!r}")


class _ParallelMapData(ProxyDataFlow):
    """Keeps ``buffer_size`` datapoints in flight: send one to the workers, take one result."""

    def __init__(self, ds: Any, buffer_size: int, strict: bool = False) -> None:
        super().__init__(ds)
        if int(buffer_size) <= 0:
            raise ValueError(f"{type(self).__name__}: buffer_size must be >= 1, got {buffer_size!r}")
        self._buffer_size = int(buffer_size)
        self._buffer_occupancy = 0
        self._strict = strict
        self._iter: Iterator[Any] | None = None

    def reset_state(self) -> None:
        super().reset_state()
        self._iter = iter(self.ds if self._strict else RepeatedData(self.ds, -1))
        self._buffer_occupancy = 0

    def _send(self, dp: Any) -> None:
        raise NotImplementedError

    def _recv(self) -> Any:
        raise NotImplementedError

    def _recv_strict(self) -> Any:
        ret = self._recv()
        if ret is None:
            raise ValueError(f"{type(self).__name__}: map_func returned None with strict=True; in strict mode every "
                             "datapoint must map to a datapoint (filter with MapData before, or use strict=False)")
        return ret

    def _fill_buffer(self, cnt: int | None = None) -> None:
        if cnt is None:
            cnt = self._buffer_size - self._buffer_occupancy
        assert self._iter is not None
        for i in range(cnt):
            try:
                dp = next(self._iter)
            except StopIteration:
                raise RuntimeError(f"{type(self).__name__}: buffer_size ({self._buffer_size}) is larger than the "
                                   f"dataflow {type(self.ds).__name__} (it ended after {i} datapoints) and "
                                   "strict=True; use a smaller buffer_size") from None
            self._send(dp)
        self._buffer_occupancy += cnt

    def _iter_non_strict(self) -> Iterator[Any]:
        assert self._iter is not None
        for dp in self._iter:
            self._send(dp)
            ret = self._recv()
            if ret is not None:
                yield ret

    def _iter_strict(self) -> Iterator[Any]:
        self._fill_buffer()
        assert self._iter is not None
        for dp in self._iter:
            self._send(dp)
            yield self._recv_strict()
        self._iter = iter(self.ds)  # the next pass
        # drain what is in flight; refill from the next pass before handing out the last one
        for k in range(self._buffer_size):
            dp = self._recv_strict()
            self._buffer_occupancy -= 1
            if k == self._buffer_size - 1:
                self._fill_buffer()
            yield dp

    def _check_reset(self) -> None:
        if self._iter is None:
            raise RuntimeError(f"{type(self).__name__}: call reset_state() before iterating (it starts the workers)")

    def __iter__(self) -> Iterator[Any]:
        if self._strict:
            yield from self._iter_strict()
        else:
            yield from self._iter_non_strict()


class _ThreadFailure:
    """What a worker thread puts in the output queue when ``map_func`` raised."""

    __slots__ = ("idx", "exc", "tb")

    def __init__(self, idx: int, exc: BaseException, tb: str) -> None:
        self.idx, self.exc, self.tb = idx, exc, tb


class MultiThreadMapData(_ParallelMapData):
    """``MapData`` with ``map_func`` run by ``num_thread`` threads (started by ``reset_state()``);
    see the module docstring for the order of the output. Good when ``map_func`` releases the GIL
    (numpy, OpenCV, file reads); ``MultiProcessRunnerZMQ(MultiThreadMapData(...), 1)`` moves
    the threads out of the training process.

    :param ds: the dataflow to map.
    :param num_thread: number of threads.
    :param map_func: datapoint -> datapoint, or None to drop it.
    :param buffer_size: datapoints in flight.
    :param strict: see the module docstring.
    """

    class _Worker(WorkerThread):
        def __init__(self, inq: Any, outq: Any, evt: threading.Event, map_func: Callable[[Any], Any], idx: int) -> None:
            super().__init__(f"MultiThreadMapData-{idx}", idx, outq, evt)
            self.inq = inq
            self.outq = outq
            self.func = map_func

        def work(self) -> None:
            while True:
                dp = self.queue_get_stoppable(self.inq)
                if self.stopped():
                    return
                # a None result is passed on too: every send has exactly one receive
                self.queue_put_stoppable(self.outq, self.func(dp))

        def failure(self, exc: BaseException, tb: str) -> Any:
            return _ThreadFailure(self.idx, exc, tb)

    def __init__(self, ds: Any, num_thread: int | None = None, map_func: Callable[[Any], Any] | None = None, *,
                 buffer_size: int = 200, strict: bool = False) -> None:
        _check_map_args("MultiThreadMapData", num_thread, map_func, "num_thread")
        if strict:
            try:
                buffer_size = min(buffer_size, len(ds))
            except Exception:  # noqa: BLE001 - no length
                pass
        super().__init__(ds, buffer_size, strict)
        self.num_thread = int(num_thread)  # type: ignore[arg-type]
        self.map_func = map_func
        self._threads: list[MultiThreadMapData._Worker] = []
        self._evt: threading.Event | None = None
        self._guard = DataFlowReentrantGuard()

    def reset_state(self) -> None:
        super().reset_state()
        self.close()
        self._in_queue: queue.Queue = queue.Queue()
        self._out_queue: queue.Queue = queue.Queue()
        self._evt = threading.Event()
        self._threads = [MultiThreadMapData._Worker(self._in_queue, self._out_queue, self._evt, self.map_func, i)
                         for i in range(self.num_thread)]
        for t in self._threads:
            t.start()
        self._guard = DataFlowReentrantGuard()
        self._fill_buffer()  # in flight: buffer_size datapoints from now on

    def _send(self, dp: Any) -> None:
        self._in_queue.put(dp)

    def _recv(self) -> Any:
        obj = self._out_queue.get()
        if type(obj) is _ThreadFailure:
            self.close()
            raise rebuild_thread_exception(obj.exc, obj.tb, f"thread {obj.idx} of MultiThreadMapData") from obj.exc
        return obj

    def __iter__(self) -> Iterator[Any]:
        self._check_reset()
        with self._guard:
            yield from super().__iter__()

    def close(self) -> None:
        """Stop the threads."""
        if self._evt is not None:
            self._evt.set()
        for _ in self._threads:
            self._in_queue.put(None)  # wakes a waiting thread, which then sees the stop event
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=StoppableThread.QUEUE_POLL_SECONDS + 1)
        self._threads = []

    def __del__(self) -> None:
        try:
            if self._evt is not None:
                self._evt.set()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


class MultiProcessMapDataZMQ(_ParallelMapData, MultiProcessZMQDataFlow):
    """``MapData`` with ``map_func`` run by ``num_proc`` worker processes forked by
    ``reset_state()``; datapoints travel over ZMQ serialized with msgpack. See the module
    docstring for the order of the output. ``ds`` is read in the calling process.

    Each worker announces itself once it is connected, and the parent hands datapoints only to
    announced workers, in turn (a datapoint sent while a ZMQ connection is still being set up
    could otherwise be lost, and a strict pass would never end).

    :param ds: the dataflow to map.
    :param num_proc: number of worker processes.
    :param map_func: datapoint -> datapoint, or None to drop it.
    :param buffer_size: datapoints in flight.
    :param strict: see the module docstring.
    :param stall_timeout: seconds without a result while the parent waits before
        ``WorkerStalledError`` (default ``$TRAINBUS_DATAFLOW_STALL_TIMEOUT``, else 300; 0: never).
    """

    #: the message a worker sends when it is ready
    READY = b"trainbus-dataflow-ready"
    #: how long reset_state() waits for every worker to announce itself
    START_TIMEOUT_S = 60.0
    _WATCH_SOCKET = "DEALER"

    class _Worker(_Process):  # type: ignore[misc, valid-type]
        def __init__(self, identity: bytes, map_func: Callable[[Any], Any], pipename: str, hwm: int) -> None:
            super().__init__(name=f"MultiProcessMapDataZMQ-{identity.decode()}", daemon=True)
            self.identity = identity
            self.parent_pid = os.getpid()
            self.map_func = map_func
            self.pipename = pipename
            self.hwm = hwm

        def run(self) -> None:
            die_with_parent(self.parent_pid, self.identity == b"0")
            seed_worker(self)
            ctx = zmq.Context()
            sock = ctx.socket(zmq.DEALER)
            sock.setsockopt(zmq.IDENTITY, self.identity)
            sock.set_hwm(self.hwm)
            sock.connect(self.pipename)
            func = self.map_func
            with reporting_worker_errors(ctx, sock, self.identity.decode()):
                sock.send(MultiProcessMapDataZMQ.READY)
                while True:
                    dp = loads(sock.recv(copy=False).buffer)
                    sock.send(dumps(func(dp)), copy=False)

    def __init__(self, ds: Any, num_proc: int | None = None, map_func: Callable[[Any], Any] | None = None, *,
                 buffer_size: int = 200, strict: bool = False, stall_timeout: float | None = None) -> None:
        _check_map_args(type(self).__name__, num_proc, map_func, "num_proc")
        if strict:
            try:
                buffer_size = min(buffer_size, len(ds))
            except Exception:  # noqa: BLE001 - no length
                pass
        _ParallelMapData.__init__(self, ds, buffer_size, strict)
        MultiProcessZMQDataFlow.__init__(self, stall_timeout)
        self.num_proc = int(num_proc)  # type: ignore[arg-type]
        self.map_func = map_func
        self._guard = DataFlowReentrantGuard()

    def reset_state(self) -> None:
        MultiProcessZMQDataFlow.reset_state(self)
        _ParallelMapData.reset_state(self)
        self._guard = DataFlowReentrantGuard()
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.ROUTER)
        # every datapoint in flight may sit in one worker's queue: never reach the high-water mark
        self.socket.set_hwm(self._buffer_size * 2 + 10)
        self.socket.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.socket.setsockopt(zmq.RCVTIMEO, _LIVENESS_POLL_MS)  # then check that the workers live
        name = pipe_name("dataflow-map", self._pipedir)
        bind_socket(self.socket, name)
        self._result_addr = name
        ids = [str(k).encode() for k in range(self.num_proc)]
        self._procs = [MultiProcessMapDataZMQ._Worker(i, self.map_func, name, self._buffer_size * 2 + 10)
                       for i in ids]
        self._start_processes()
        self._await_workers(set(ids))
        self._next_worker = itertools.cycle(ids)
        self._fill_buffer()

    def _await_workers(self, ids: set[bytes]) -> None:
        owner = type(self).__name__
        deadline = time.monotonic() + self.START_TIMEOUT_S
        waiting = set(ids)
        while waiting:
            msg = self._poll_message(_LIVENESS_POLL_MS, owner)
            if msg is not None:
                if len(msg) == 3 and msg[1] == EXC_MARK:
                    exc = make_worker_exception(loads(msg[2]), owner)
                    self.close()
                    raise exc
                if len(msg) == 3 and msg[1] == DIED_MARK:
                    self._fail(self._died(msg[2], owner, self._exc_of))
                if len(msg) == 2 and msg[1] == self.READY:
                    waiting.discard(msg[0])
                continue
            if time.monotonic() > deadline:
                self.close()
                raise TimeoutError(f"{owner}: worker processes {sorted(w.decode() for w in waiting)} did not connect "
                                   f"within {self.START_TIMEOUT_S:.0f} s")

    def _send(self, dp: Any) -> None:
        ident = next(self._next_worker)
        frames = [ident, dumps(dp)]
        try:
            self._on_socket(lambda sock: sock.send_multipart(frames, copy=False), type(self).__name__)
        except zmq.ZMQError as e:
            if e.errno != zmq.EHOSTUNREACH:
                raise
            self._raise_for_lost_worker(ident)

    def _raise_for_lost_worker(self, ident: bytes) -> None:
        """Worker ``ident`` has disconnected: raise the error it sent before it went (results still
        queued are dropped), or ``WorkerDiedError`` if it sent none."""
        owner = type(self).__name__
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            msg = self._poll_message(100, owner)
            if msg is None:
                continue
            if len(msg) == 3 and msg[1] == EXC_MARK:
                self._fail(make_worker_exception(loads(msg[2]), owner))
            if len(msg) == 3 and msg[1] == DIED_MARK:
                self._fail(self._died(msg[2], owner, self._exc_of))
        proc = self._procs[int(ident)] if ident.isdigit() and int(ident) < len(self._procs) else None
        self._fail(died_error(owner, f"worker {ident.decode()}", proc.pid if proc else None,
                              proc.exitcode if proc else None))

    def _exc_of(self, msg: list[Any]) -> BaseException | None:
        if len(msg) == 3 and bytes(msg[1]) == EXC_MARK:
            return make_worker_exception(loads(bytes(msg[2])), type(self).__name__)
        return None

    @staticmethod
    def _recv_message(sock: Any) -> Any:
        return sock.recv_multipart(copy=False)  # waits at most RCVTIMEO

    def _recv(self) -> Any:
        try:
            msg = self._on_socket(self._recv_message, type(self).__name__)
        except zmq.Again:
            msg = self._wait(self._recv_message, type(self).__name__)
        if len(msg) == 3:
            owner = type(self).__name__
            head = msg[1].bytes
            if head == EXC_MARK:
                self._fail(make_worker_exception(loads(msg[2].buffer), owner))
            if head == DIED_MARK:
                self._fail(self._died(msg[2].buffer, owner, self._exc_of))
        return loads(msg[1].buffer)

    def __len__(self) -> int:
        return self.ds.__len__()

    def __iter__(self) -> Iterator[Any]:
        self._check_reset()
        with self._guard, zmq_terminated_as_dataflow_terminated(type(self).__name__):
            yield from _ParallelMapData.__iter__(self)


class MultiProcessMapAndBatchDataZMQ(MultiProcessZMQDataFlow):
    """Map and batch in worker processes: a dispatcher process reads ``ds`` (repeated forever)
    and hands datapoints to ``num_proc`` workers, each maps them with ``map_func`` (dropping
    ``None``) and sends every ``batch_size`` results as one batch (``BatchData``'s stacking).
    With ``num_proc=1`` the output equals ``BatchData(MapData(ds, map_func), batch_size)``
    repeated; with more, batches group datapoints in any order, across passes. Infinite.

    :param buffer_size: datapoints (not batches) in flight; defaults to ``batch_size * 10``.
    :param stall_timeout: seconds without a batch while the parent waits before
        ``WorkerStalledError`` (default ``$TRAINBUS_DATAFLOW_STALL_TIMEOUT``, else 300; 0: never).
    """

    class _Dispatcher(_Process):  # type: ignore[misc, valid-type]
        def __init__(self, ds: Any, pipename: str, result_pipe: str, hwm: int) -> None:
            super().__init__(name="MultiProcessMapAndBatchDataZMQ-dispatcher", daemon=True)
            self.ds = RepeatedData(ds, -1)
            self.parent_pid = os.getpid()
            self.pipename = pipename
            self.result_pipe = result_pipe
            self.hwm = hwm

        def run(self) -> None:
            die_with_parent(self.parent_pid)
            ctx = zmq.Context()
            sock = ctx.socket(zmq.PUSH)
            sock.set_hwm(self.hwm)
            sock.bind(self.pipename)
            try:
                self.ds.reset_state()
                for dp in self.ds:
                    sock.send(dumps(dp), copy=False)
            except KeyboardInterrupt:
                pass
            except BaseException:
                err = ctx.socket(zmq.PUSH)
                err.connect(self.result_pipe)
                err.send_multipart([EXC_MARK, dumps(worker_exception_payload("", "the dispatcher"))])
                await_stop_after_report()  # the parent reports it, then stops this process
            finally:
                sock.close(0)
                ctx.destroy(0)

    class _Worker(_Process):  # type: ignore[misc, valid-type]
        def __init__(self, identity: bytes, map_func: Callable[[Any], Any], input_pipe: str, result_pipe: str,
                     hwm: int, batch_size: int) -> None:
            super().__init__(name=f"MultiProcessMapAndBatchDataZMQ-{identity.decode()}", daemon=True)
            self.identity = identity
            self.parent_pid = os.getpid()
            self.map_func = map_func
            self.input_pipe = input_pipe
            self.result_pipe = result_pipe
            self.hwm = hwm
            self.batch_size = batch_size

        def run(self) -> None:
            die_with_parent(self.parent_pid, self.identity == b"0")
            seed_worker(self)
            ctx = zmq.Context()
            inp = ctx.socket(zmq.PULL)
            inp.setsockopt(zmq.IDENTITY, self.identity)
            inp.set_hwm(self.hwm * self.batch_size)
            inp.connect(self.input_pipe)
            out = ctx.socket(zmq.PUSH)
            out.set_hwm(max(self.hwm, 5))
            out.connect(self.result_pipe)
            batch: list[Any] = []
            try:
                while True:
                    dp = self.map_func(loads(inp.recv(copy=False).buffer))
                    if dp is None:
                        continue
                    batch.append(dp)
                    if len(batch) == self.batch_size:
                        send_datapoint(out, BatchData.aggregate_batch(batch, False, "map_func"))
                        batch = []
            except KeyboardInterrupt:
                pass
            except BaseException:
                out.send_multipart([EXC_MARK, dumps(worker_exception_payload(self.identity.decode()))])
                await_stop_after_report()  # the parent reports it, then stops this process
            finally:
                inp.close(0)
                if not out.closed:
                    out.close(0)
                ctx.destroy(0)

    def __init__(self, ds: Any, num_proc: int, map_func: Callable[[Any], Any], batch_size: int,
                 buffer_size: int | None = None, stall_timeout: float | None = None) -> None:
        super().__init__(stall_timeout)
        _check_map_args(type(self).__name__, num_proc, map_func, "num_proc")
        if isinstance(batch_size, bool) or int(batch_size) != batch_size or batch_size <= 0:
            raise ValueError(f"{type(self).__name__}: batch_size must be a positive integer, got {batch_size!r}")
        if buffer_size is None:
            buffer_size = batch_size * 10
        if batch_size >= buffer_size:
            raise ValueError(f"{type(self).__name__}: buffer_size ({buffer_size}) must be larger than batch_size "
                             f"({batch_size})")
        self.ds = ds
        self.num_proc = int(num_proc)
        self.map_func = map_func
        self.batch_size = int(batch_size)
        self.buffer_size = int(buffer_size)
        self._guard = DataFlowReentrantGuard()

    def reset_state(self) -> None:
        super().reset_state()
        self._guard = DataFlowReentrantGuard()
        job_pipe = pipe_name("job", self._pipedir)
        result_pipe = pipe_name("result", self._pipedir)
        self._result_addr = result_pipe
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.PULL)
        self.socket.set_hwm(max(5, self.buffer_size // self.batch_size))
        self.socket.setsockopt(zmq.RCVTIMEO, _LIVENESS_POLL_MS)  # then check that the workers live
        bind_socket(self.socket, result_pipe)
        worker_hwm = max(3, self.buffer_size // self.num_proc // self.batch_size)
        self._procs = [MultiProcessMapAndBatchDataZMQ._Worker(str(k).encode(), self.map_func, job_pipe, result_pipe,
                                                              worker_hwm, self.batch_size)
                       for k in range(self.num_proc)]
        dispatcher = MultiProcessMapAndBatchDataZMQ._Dispatcher(self.ds, job_pipe, result_pipe, self.buffer_size)
        dispatcher._trainbus_label = "the dispatcher"
        self._procs.append(dispatcher)
        self._start_processes()

    def __iter__(self) -> Iterator[Any]:
        if not self._reset_done:
            raise RuntimeError(f"{type(self).__name__}: call reset_state() before iterating (it starts the workers)")
        owner = type(self).__name__
        with self._guard, zmq_terminated_as_dataflow_terminated(owner):
            while True:
                yield self._recv_datapoint(owner)


# tensorpack's names for the same classes
MultiProcessMapData = MultiProcessMapDataZMQ
MultiProcessMapAndBatchData = MultiProcessMapAndBatchDataZMQ
ThreadedMapData = MultiThreadMapData
