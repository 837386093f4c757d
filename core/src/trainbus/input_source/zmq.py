""":class:`ZMQInput`: datapoints received from a ZMQ endpoint (pyzmq, imported when the socket
opens), fed to the model through a :class:`~trainbus.input_source.QueueInput` queue."""

from __future__ import annotations

import threading
from typing import Any, Sequence

import tensorflow as tf

from trainbus.input_source.queue import QueueInput, _QueueSizeStat
from trainbus.tfutils.tower import _to_spec


class _ZMQPull:
    """A DataFlow over a ZMQ PULL socket: datapoints serialized by
    :func:`trainbus.utils.serialize.dumps` (what ``send_dataflow_zmq`` pushes). Infinite; the
    socket lives in the thread that iterates, and iteration ends soon after :meth:`stop`."""

    def __init__(self, end_point: str, hwm: int, bind: bool) -> None:
        self.end_point = end_point
        self.hwm = hwm
        self.bind = bind
        self._stop_evt = threading.Event()

    def reset_state(self) -> None:
        self._stop_evt.clear()

    def stop(self) -> None:
        self._stop_evt.set()

    def __iter__(self) -> Any:
        import zmq

        from trainbus.utils.serialize import loads

        ctx = zmq.Context()
        sock = ctx.socket(zmq.PULL)
        sock.set_hwm(self.hwm)
        try:
            try:
                sock.bind(self.end_point) if self.bind else sock.connect(self.end_point)
            except zmq.ZMQError as exc:
                verb = "bind to" if self.bind else "connect to"
                raise OSError(f"ZMQInput: cannot {verb} {self.end_point!r}: {exc}. Use an endpoint like "
                              "'tcp://127.0.0.1:5555' or 'ipc:///tmp/name', bound on exactly one side") from exc
            poller = zmq.Poller()
            poller.register(sock, zmq.POLLIN)
            while not self._stop_evt.is_set():
                if poller.poll(100):
                    yield loads(sock.recv(copy=False).buffer)
        finally:
            sock.close(linger=0)
            ctx.term()

    def __len__(self) -> int:
        raise TypeError("a ZMQ stream has no length")


class ZMQInput(QueueInput):
    """Receive datapoints from a ZMQ endpoint (what ``send_dataflow_zmq`` serves, serialized by
    :mod:`trainbus.utils.serialize`) and feed them to the model through a TF queue.

    tensorpack reads the socket with its compiled ``zmq_ops``; here a background thread pulls
    with pyzmq and enqueues, so the model still reads from a queue.

    :param end_point: the ZMQ endpoint, e.g. ``'tcp://127.0.0.1:5555'`` or ``'ipc:///tmp/train'``.
    :param hwm: the socket's high-water mark.
    :param bind: bind the endpoint (the senders connect), else connect to it.
    """

    def __init__(self, end_point: str, hwm: int, bind: bool = True) -> None:
        if not isinstance(end_point, str) or "://" not in end_point:
            raise ValueError(f"ZMQInput: end_point must be a ZMQ endpoint such as 'tcp://127.0.0.1:5555', "
                             f"got {end_point!r}")
        self._end_point = end_point
        self._hwm = int(hwm)
        self._bind = bool(bind)
        self._pull = _ZMQPull(end_point, self._hwm, self._bind)
        super().__init__(self._pull)

    def size(self) -> int:
        raise ValueError("ZMQInput reads an endless stream and has no size; pass steps_per_epoch explicitly")

    def _get_callbacks(self) -> list[Any]:
        # the queue thread only: like tensorpack's ZMQInput, no queue_size statistic
        return [cb for cb in super()._get_callbacks() if not isinstance(cb, _QueueSizeStat)]

    def _stop(self) -> None:
        if self.thread is not None:
            self.thread.stop()      # first: the pull loop ending now is not a failure
        self._pull.stop()
        super()._stop()

    def to_dataset(self, input_signature: Sequence[Any]) -> Any:
        """A ``tf.data.Dataset`` of the datapoints received at the endpoint (a new socket).

        :param input_signature: a ``tf.TensorSpec`` per component of a datapoint.
        """
        specs = tuple(_to_spec(s) for s in input_signature)
        pull = _ZMQPull(self._end_point, self._hwm, self._bind)
        return tf.data.Dataset.from_generator(lambda: (tuple(dp) for dp in pull), output_signature=specs)

    def __str__(self) -> str:
        return f"ZMQInput({self._end_point})"
