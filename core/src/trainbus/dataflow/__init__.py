"""DataFlow: Python iterables of datapoints (lists of components) for training input.

Anything with ``__iter__``, ``__len__`` and ``reset_state()`` is accepted as a dataflow.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

__all__ = ["DataFlow", "RNGDataFlow", "DataFromList", "DataFromGenerator", "FakeData", "BatchData", "MapData",
           "is_dataflow"]


class DataFlow:
    """Base class: iterate to get datapoints; call ``reset_state()`` once before iterating."""

    def __iter__(self) -> Iterator[Any]:
        raise TypeError(f"{type(self).__name__} must implement __iter__ to be a DataFlow")

    def __len__(self) -> int:
        raise TypeError(f"{type(self).__name__} has no known length (it does not implement __len__)")

    def size(self) -> int:
        return len(self)

    def reset_state(self) -> None:
        """Prepare for iteration (e.g. seed RNGs, start workers). Called once per process."""


def is_dataflow(obj: Any) -> bool:
    """Whether ``obj`` can be used as a dataflow (duck-typed)."""
    return isinstance(obj, DataFlow) or (hasattr(obj, "__iter__") and hasattr(obj, "reset_state"))


def dataflow_len(ds: Any) -> int:
    """``len(ds)``, with a clear error when the dataflow has no length."""
    try:
        return len(ds)
    except TypeError as e:
        raise TypeError(f"the dataflow {ds!r} has no length ({e}); pass steps_per_epoch explicitly") from None


class RNGDataFlow(DataFlow):
    """A DataFlow with its own ``self.rng`` (a ``numpy.random.RandomState``), reseeded by
    ``reset_state()``."""

    rng: np.random.RandomState

    def reset_state(self) -> None:
        import os
        import time

        seed = (id(self) + os.getpid() + int(time.time() * 1000)) % 4294967295
        self.rng = np.random.RandomState(seed)


class DataFromList(RNGDataFlow):
    """Produce datapoints from a list (shuffled every pass when ``shuffle``)."""

    def __init__(self, lst: Sequence[Any], shuffle: bool = True) -> None:
        self.lst = lst
        self.shuffle = shuffle
        self.rng = np.random.RandomState(0)

    def __len__(self) -> int:
        return len(self.lst)

    def __iter__(self) -> Iterator[Any]:
        if not self.shuffle:
            yield from self.lst
        else:
            idxs = np.arange(len(self.lst))
            self.rng.shuffle(idxs)
            for k in idxs:
                yield self.lst[k]


class DataFromGenerator(DataFlow):
    """Wrap a generator function (called for every pass) or a generator (one pass only)."""

    def __init__(self, gen: Callable[[], Iterable[Any]] | Iterable[Any], size: int | None = None) -> None:
        self._gen = gen
        self._size = size

    def __iter__(self) -> Iterator[Any]:
        if callable(self._gen):
            yield from self._gen()
        else:
            yield from self._gen

    def __len__(self) -> int:
        if self._size is None:
            raise TypeError("DataFromGenerator has no length unless size= is given")
        return self._size


class FakeData(RNGDataFlow):
    """Random datapoints of given shapes (for testing speed and wiring)."""

    def __init__(self, shapes: Sequence[Sequence[int]], size: int = 1000, random: bool = True,
                 dtype: str | Sequence[str] = "float32", domain: tuple[float, float] | Sequence[tuple[float, float]] = (0, 1)) -> None:
        self.shapes = [list(s) for s in shapes]
        self._size = int(size)
        self.random = random
        self.dtype = [dtype] * len(shapes) if isinstance(dtype, str) else list(dtype)
        self.domain = [domain] * len(shapes) if isinstance(domain, tuple) else list(domain)
        if len(self.dtype) != len(self.shapes) or len(self.domain) != len(self.shapes):
            raise ValueError("FakeData: dtype and domain must be one value or one per shape")
        self.rng = np.random.RandomState(0)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[list[np.ndarray]]:
        if self.random:
            for _ in range(self._size):
                yield [self._one(i) for i in range(len(self.shapes))]
        else:
            fixed = [self._one(i) for i in range(len(self.shapes))]
            for _ in range(self._size):
                yield [x.copy() for x in fixed]

    def _one(self, i: int) -> np.ndarray:
        lo, hi = self.domain[i]
        v = self.rng.rand(*self.shapes[i]) * (hi - lo) + lo
        return v.astype(self.dtype[i])


class BatchData(DataFlow):
    """Stack ``batch_size`` datapoints into one; each component becomes an array with a
    leading batch dimension (or a list, with ``use_list``)."""

    def __init__(self, ds: Any, batch_size: int, remainder: bool = False, use_list: bool = False) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"BatchData: batch_size must be a positive integer, got {batch_size!r}")
        if not remainder:
            try:
                if batch_size > len(ds):
                    raise ValueError(f"BatchData: batch_size {batch_size} is larger than the dataflow ({len(ds)}) and remainder=False")
            except TypeError:
                pass
        self.ds = ds
        self.batch_size = batch_size
        self.remainder = remainder
        self.use_list = use_list

    def reset_state(self) -> None:
        self.ds.reset_state()

    def __len__(self) -> int:
        n = dataflow_len(self.ds)
        div, mod = divmod(n, self.batch_size)
        return div + int(self.remainder and mod > 0)

    def __iter__(self) -> Iterator[list[Any]]:
        holder: list[Any] = []
        for dp in self.ds:
            holder.append(dp)
            if len(holder) == self.batch_size:
                yield self._aggregate(holder)
                holder = []
        if self.remainder and holder:
            yield self._aggregate(holder)

    def _aggregate(self, dps: list[Any]) -> list[Any]:
        n = len(dps[0])
        if self.use_list:
            return [[dp[k] for dp in dps] for k in range(n)]
        return [np.asarray([dp[k] for dp in dps]) for k in range(n)]


class MapData(DataFlow):
    """Apply ``func`` to every datapoint; datapoints it maps to ``None`` are dropped."""

    def __init__(self, ds: Any, func: Callable[[Any], Any]) -> None:
        self.ds = ds
        self.func = func

    def reset_state(self) -> None:
        self.ds.reset_state()

    def __len__(self) -> int:
        return dataflow_len(self.ds)

    def __iter__(self) -> Iterator[Any]:
        for dp in self.ds:
            ret = self.func(copy_dp(dp))
            if ret is not None:
                yield ret


def copy_dp(dp: Any) -> Any:
    return list(dp) if isinstance(dp, list) else dp


def repeat_forever(ds: Any) -> Iterator[Any]:
    """Iterate a dataflow again and again (raises if a pass yields nothing)."""
    for _ in itertools.count():
        empty = True
        for dp in ds:
            empty = False
            yield dp
        if empty:
            raise ValueError(f"the dataflow {ds!r} produced no datapoint in a whole pass")
