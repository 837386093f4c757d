"""DataFlows across machines or processes over ZMQ: ``send_dataflow_zmq`` serves a dataflow on a
PUSH socket; ``RemoteDataZMQ`` reads what one or two such senders push.

The endpoints are the caller's: ZMQ checks no credentials, so anyone who can reach a bound TCP
port can push datapoints into training or take them. Bind ``tcp://127.0.0.1:PORT`` (reach it from
other hosts through an SSH tunnel) unless every host on the network is trusted; an ``ipc://`` path
is as private as its directory's permissions make it."""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Iterator

from trainbus.dataflow import DataFlow, DataFlowReentrantGuard, dataflow_len
from trainbus.utils import logger
from trainbus.utils.serialize import dumps, loads
from trainbus_dataflow._lazyzmq import zmq

__all__ = ["send_dataflow_zmq", "RemoteDataZMQ"]

_LATENCY_WINDOW = 200


def _bind_or_connect(socket: Any, addr: str, bind: bool, who: str) -> None:
    try:
        socket.bind(addr) if bind else socket.connect(addr)
    except zmq.ZMQError as exc:
        verb = "bind to" if bind else "connect to"
        raise OSError(f"{who}: cannot {verb} {addr!r}: {exc}. Use an endpoint like 'tcp://127.0.0.1:5555' or "
                      "'ipc:///tmp/pipe-name', and bind on exactly one side") from exc


def send_dataflow_zmq(df: Any, addr: str, hwm: int = 50, format: str | None = None, bind: bool = False,
                      max_datapoints: int | None = None) -> None:
    """Serve ``df`` on a ZMQ PUSH socket at ``addr``, forever (looping over the dataflow), as
    tensorpack does; :class:`RemoteDataZMQ` at the other end reads it.

    :param df: the dataflow; ``reset_state()`` is called here.
    :param addr: a ZMQ endpoint (``tcp://host:port``, ``ipc://path``).
    :param hwm: the socket's high-water mark (datapoints buffered before sending blocks).
    :param format: ``None`` (trainbus's :mod:`trainbus.utils.serialize`); tensorpack's ``'zmq_ops'``
        format needs its compiled ops, which trainbus does not ship.
    :param bind: bind the address (else connect to it).
    :param max_datapoints: stop after sending this many (``None``: never return, as tensorpack).
    """
    if format not in (None,):
        raise ValueError(f"send_dataflow_zmq: format={format!r} is not supported; trainbus sends datapoints with "
                         "trainbus.utils.serialize (format=None), which RemoteDataZMQ reads")
    ctx = zmq.Context()
    socket = ctx.socket(zmq.PUSH)
    socket.set_hwm(hwm)
    sent = 0
    try:
        _bind_or_connect(socket, addr, bind, "send_dataflow_zmq")
        df.reset_state()
        try:
            total = dataflow_len(df)
        except (TypeError, NotImplementedError):
            total = None
        logger.info(f"Serving data to {addr} ({total if total is not None else 'unknown'} datapoints per pass) ...")
        latency: deque[float] = deque(maxlen=_LATENCY_WINDOW)
        while True:
            for dp in df:
                start = time.perf_counter()
                socket.send(dumps(dp), copy=False)
                latency.append(time.perf_counter() - start)
                sent += 1
                if sent % _LATENCY_WINDOW == 0:
                    logger.debug(f"send_dataflow_zmq: {sent} sent, mean send latency "
                                 f"{1000 * sum(latency) / len(latency):.3f} ms")
                if max_datapoints is not None and sent >= max_datapoints:
                    return
    finally:
        logger.info(f"send_dataflow_zmq to {addr} ends after {sent} datapoints")
        socket.setsockopt(zmq.LINGER, 0 if max_datapoints is None else -1)
        socket.close()
        ctx.term()


class RemoteDataZMQ(DataFlow):
    """Datapoints pulled from one or two ZMQ endpoints that :func:`send_dataflow_zmq` pushes to.
    An infinite dataflow (it has no length).

    :ivar cnt1: datapoints received from ``addr1`` in this process.
    :ivar cnt2: datapoints received from ``addr2``.
    """

    def __init__(self, addr1: str, addr2: str | None = None, hwm: int = 50, bind: bool = True) -> None:
        """
        :param addr1: the endpoint to read from.
        :param addr2: a second endpoint (another protocol, e.g. ``ipc://`` next to ``tcp://``).
        :param hwm: the high-water mark of each socket.
        :param bind: bind the endpoints (the senders connect), else connect to them.
        """
        if not addr1:
            raise ValueError("RemoteDataZMQ: addr1 must be a ZMQ endpoint such as 'tcp://127.0.0.1:5555'")
        self._addrs = [a for a in (addr1, addr2) if a]
        self._hwm = int(hwm)
        self._bind = bind
        self._guard = DataFlowReentrantGuard()
        self.cnt1 = 0
        self.cnt2 = 0

    def reset_state(self) -> None:
        self.cnt1 = 0
        self.cnt2 = 0

    def __iter__(self) -> Iterator[Any]:
        with self._guard:
            ctx = zmq.Context()
            sockets = []
            try:
                for addr in self._addrs:
                    s = ctx.socket(zmq.PULL)
                    sockets.append(s)  # closed below even when binding fails (else ctx.term() waits for it)
                    s.set_hwm(self._hwm)
                    _bind_or_connect(s, addr, self._bind, "RemoteDataZMQ")
                if len(sockets) == 1:
                    while True:
                        dp = loads(sockets[0].recv(copy=False).buffer)
                        self.cnt1 += 1
                        yield dp
                poller = zmq.Poller()
                for s in sockets:
                    poller.register(s, zmq.POLLIN)
                while True:
                    for sock, _ in poller.poll():
                        dp = loads(sock.recv(copy=False).buffer)
                        if sock is sockets[0]:
                            self.cnt1 += 1
                        else:
                            self.cnt2 += 1
                        yield dp
            finally:
                for s in sockets:
                    s.close(linger=0)
                ctx.term()
