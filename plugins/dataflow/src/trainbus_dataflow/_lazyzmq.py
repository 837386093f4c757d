"""pyzmq for the ZMQ dataflows, imported the first time one of its names is used.

``from trainbus import *`` and ``from trainbus.dataflow import *`` import every module of this
distribution; importing pyzmq (about 20 modules and its C extension) waits until a dataflow
opens a socket or handles one of its errors.
"""

from __future__ import annotations

from typing import Any


class _LazyZMQ:
    """Stands for the ``zmq`` module: every attribute is the module's own."""

    def __getattr__(self, name: str) -> Any:
        import zmq

        value = getattr(zmq, name)
        self.__dict__[name] = value  # found by plain attribute lookup from now on (per-datapoint paths)
        return value

    def __repr__(self) -> str:
        return "<zmq, imported on first use>"


zmq: Any = _LazyZMQ()
