"""DataFlow: Python iterables of datapoints (lists or dicts of components) for training input.

The core keeps the small base it needs itself: the ``DataFlow`` contract, ``RNGDataFlow``,
``ProxyDataFlow``, ``DataFlowTerminated``, ``DataFlowReentrantGuard`` and the helpers the input
sources use. Every other name (``DataFromList``, ``BatchData``, ``MapData``, ``MultiProcessRunnerZMQ``,
...) comes from the ``trainbus-dataflow`` distribution and resolves here by name through the
entry-point group ``trainbus.dataflow``, e.g. ``trainbus.dataflow.BatchData``.

Anything with ``__iter__``, ``__len__`` and ``reset_state()`` is accepted as a dataflow, so a
tensorpack ``DataFlow`` object works unchanged.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from abc import ABCMeta, abstractmethod
from typing import Any, Iterator

import numpy as np

from trainbus.bus import registry as _registry


class DataFlowTerminated(BaseException):
    """Raised when a dataflow can no longer produce datapoints because something went wrong
    (e.g. its worker processes died). Most dataflows never raise it. A ``BaseException``, so
    ``except Exception`` in user code does not swallow it."""


class DataFlowReentrantGuard:
    """Context manager that refuses to be entered twice at the same time.

    Dataflows whose ``__iter__`` keeps state between passes (``FixedSizeData``, ``CacheData``,
    the multi-process runners) enter one of these while iterating, so a second iterator over
    the same object fails loudly instead of silently sharing state.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> DataFlowReentrantGuard:
        if not self._lock.acquire(blocking=False):
            raise threading.ThreadError("This DataFlow is not reentrant: it is already being iterated; "
                                        "create a second instance to iterate it in two places")
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> bool:
        self._lock.release()
        return False


class _DataFlowMeta(ABCMeta):
    """Accepts the old method names: a class that defines ``get_data``/``size`` but not
    ``__iter__``/``__len__`` gets them as ``__iter__``/``__len__``."""

    def __new__(mcls, name: str, bases: tuple, namespace: dict, **kwargs: Any) -> Any:
        for new, old in (("__iter__", "get_data"), ("__len__", "size")):
            if new not in namespace and old in namespace:
                namespace[new] = namespace[old]
        return super().__new__(mcls, name, bases, namespace, **kwargs)


class DataFlow(metaclass=_DataFlowMeta):
    """Base class of every dataflow.

    * ``__iter__`` yields datapoints: each a list (or dict) of components. It may be finite or
      infinite; a finite dataflow can be iterated again right after a pass ended.
    * ``__len__`` (optional) is the number of datapoints of one pass; it raises
      ``NotImplementedError`` when the dataflow has no size.
    * ``reset_state()`` must be called once, by the process that iterates the dataflow, before
      the first ``__iter__`` (seed RNGs, start workers). Input sources and the parallel runners
      call it for you.
    """

    @abstractmethod
    def __iter__(self) -> Iterator[Any]:
        """Yield datapoints (lists or dicts of components)."""

    def __len__(self) -> int:
        """Number of datapoints in one pass; ``NotImplementedError`` when unknown."""
        raise NotImplementedError(f"{type(self).__name__} has no length")

    def reset_state(self) -> None:
        """Prepare for iteration in the calling process (seed RNGs, start workers)."""

    def get_data(self) -> Iterator[Any]:
        """Old name of ``__iter__``."""
        return self.__iter__()

    def size(self) -> int:
        """Old name of ``__len__``."""
        return self.__len__()


_RNG_SEED: int | None = None


def get_rng(obj: Any = None) -> np.random.RandomState:
    """A ``numpy.random.RandomState`` seeded from ``obj``'s id, the process id and the time,
    so that every process (and every object) draws a different stream."""
    seed = (id(obj) + os.getpid() + int(time.time() * 1e6)) % 4294967295
    if _RNG_SEED is not None:
        seed = _RNG_SEED
    return np.random.RandomState(seed)


class RNGDataFlow(DataFlow):
    """A DataFlow with its own ``self.rng`` (a ``numpy.random.RandomState``), reseeded by
    ``reset_state()`` differently in every process."""

    rng: np.random.RandomState | None = None

    def reset_state(self) -> None:
        """Reseed ``self.rng``."""
        self.rng = get_rng(self)


class ProxyDataFlow(DataFlow):
    """A DataFlow that wraps another one, ``self.ds``: ``reset_state``, ``__len__`` and
    ``__iter__`` go to ``self.ds`` unless a subclass overrides them."""

    def __init__(self, ds: Any) -> None:
        self.ds = ds

    def reset_state(self) -> None:
        self.ds.reset_state()

    def __len__(self) -> int:
        return self.ds.__len__()

    def __iter__(self) -> Iterator[Any]:
        return self.ds.__iter__()


def is_dataflow(obj: Any) -> bool:
    """Whether ``obj`` can be used as a dataflow (duck-typed: ``__iter__`` and ``reset_state``)."""
    return isinstance(obj, DataFlow) or (hasattr(obj, "__iter__") and hasattr(obj, "reset_state"))


def dataflow_len(ds: Any) -> int:
    """``len(ds)``, with a clear error when the dataflow has no length."""
    try:
        return len(ds)
    except (TypeError, NotImplementedError) as e:
        raise TypeError(f"the dataflow {ds!r} has no length ({type(e).__name__}: {e}); "
                        "pass steps_per_epoch explicitly") from None


def repeat_forever(ds: Any) -> Iterator[Any]:
    """Iterate a dataflow again and again (raises if a pass yields nothing)."""
    for _ in itertools.count():
        empty = True
        for dp in ds:
            empty = False
            yield dp
        if empty:
            raise ValueError(f"the dataflow {ds!r} produced no datapoint in a whole pass")


_CORE_ALL = ["DataFlow", "RNGDataFlow", "ProxyDataFlow", "DataFlowTerminated", "DataFlowReentrantGuard", "is_dataflow",
             "dataflow_len", "repeat_forever", "get_rng"]
# ``__all__`` is computed on access so that ``from trainbus.dataflow import *`` also binds every
# name an installed plugin declares (read from metadata; each is imported on demand).
__getattr__, __dir__ = _registry.make_module_getattr(__name__, ("trainbus.dataflow",), globals(), _CORE_ALL)
