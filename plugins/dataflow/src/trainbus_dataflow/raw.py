"""Dataflows that produce datapoints from Python objects (``trainbus.dataflow.raw``)."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from trainbus_dataflow.base import DataFlow, RNGDataFlow

__all__ = ["FakeData", "DataFromQueue", "DataFromList", "DataFromDict", "DataFromGenerator", "DataFromIterable"]


class FakeData(RNGDataFlow):
    """Random datapoints of given shapes, for testing speed and wiring.

    :param shapes: one shape (list/tuple of ints) per component.
    :param size: number of datapoints in a pass.
    :param random: draw new values for every datapoint; if False, draw one datapoint per pass
        and produce (shallow copies of) it ``size`` times.
    :param dtype: a dtype name for every component, or a list with one per component.
    :param domain: ``(low, high)`` of the uniform values, or a list with one per component.
    """

    def __init__(self, shapes: Sequence[Sequence[int]], size: int = 1000, random: bool = True,
                 dtype: str | Sequence[str] = "float32",
                 domain: tuple[float, float] | Sequence[tuple[float, float]] = (0, 1)) -> None:
        self.shapes = [tuple(int(d) for d in s) for s in shapes]
        self._size = int(size)
        self.random = random
        self.dtype = [dtype] * len(self.shapes) if isinstance(dtype, str) else list(dtype)
        self.domain = [domain] * len(self.shapes) if isinstance(domain, tuple) else list(domain)
        if len(self.dtype) != len(self.shapes):
            raise ValueError(f"FakeData: {len(self.shapes)} shapes but {len(self.dtype)} dtypes; "
                             "give one dtype, or one per shape")
        if len(self.domain) != len(self.shapes):
            raise ValueError(f"FakeData: {len(self.shapes)} shapes but {len(self.domain)} domains; "
                             "give one (low, high) tuple, or one per shape")
        self.rng = np.random.RandomState(0)  # usable before reset_state(); reset_state() reseeds it

    def __len__(self) -> int:
        return self._size

    def _draw(self) -> list[np.ndarray]:
        out = []
        for shape, dtype, (lo, hi) in zip(self.shapes, self.dtype, self.domain):
            # np.asarray: a shape of () draws a Python float, which has no astype
            out.append(np.asarray(self.rng.rand(*shape) * (hi - lo) + lo).astype(dtype))
        return out

    def __iter__(self) -> Iterator[list[np.ndarray]]:
        if self.random:
            for _ in range(self._size):
                yield self._draw()
        else:
            fixed = self._draw()
            for _ in range(self._size):
                yield list(fixed)


class DataFromQueue(DataFlow):
    """Produce datapoints forever from a queue (anything with a blocking ``get()``)."""

    def __init__(self, queue: Any) -> None:
        if not hasattr(queue, "get"):
            raise TypeError(f"DataFromQueue needs an object with a get() method (e.g. queue.Queue), got {queue!r}")
        self.queue = queue

    def __iter__(self) -> Iterator[Any]:
        while True:
            yield self.queue.get()


class DataFromList(RNGDataFlow):
    """Produce the elements of a list as datapoints; in a new random order every pass when
    ``shuffle`` (the order follows ``self.rng``, reseeded by ``reset_state()``)."""

    def __init__(self, lst: Sequence[Any], shuffle: bool = True) -> None:
        if not hasattr(lst, "__getitem__") or not hasattr(lst, "__len__"):
            raise TypeError(f"DataFromList needs a list (or another sequence) of datapoints, got {type(lst).__name__}")
        self.lst = lst
        self.shuffle = shuffle
        self.rng = np.random.RandomState(0)  # usable before reset_state(); reset_state() reseeds it

    def __len__(self) -> int:
        return len(self.lst)

    def __iter__(self) -> Iterator[Any]:
        if not self.shuffle:
            yield from self.lst
            return
        order = np.arange(len(self.lst))
        self.rng.shuffle(order)
        # Python ints (a list indexed by numpy integers goes through __index__ every time), and
        # the loop in C
        yield from map(self.lst.__getitem__, order.tolist())


class DataFromDict(RNGDataFlow):
    """Produce dict datapoints from a dict of equally long lists (columns):
    ``{"x": [1, 2], "y": [3, 4]}`` gives ``{"x": 1, "y": 3}`` then ``{"x": 2, "y": 4}``.

    :param data: the columns.
    :param shuffle: produce the rows in a new random order every pass.
    """

    def __init__(self, data: dict[Any, Sequence[Any]], shuffle: bool = True) -> None:
        if not isinstance(data, dict) or not data:
            raise TypeError(f"DataFromDict needs a non-empty dict of equally long lists, got {type(data).__name__}")
        lengths = {k: len(v) for k, v in data.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"DataFromDict: every column must have the same length, got {lengths}")
        self.data = data
        self._size = next(iter(lengths.values()))
        self.shuffle = shuffle
        self.rng = np.random.RandomState(0)

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[dict[Any, Any]]:
        order = np.arange(self._size)
        if self.shuffle:
            self.rng.shuffle(order)
        for i in order:
            yield {k: v[i] for k, v in self.data.items()}


class DataFromGenerator(DataFlow):
    """Wrap a generator function (called anew for every pass) or an iterable.

    ``len()`` is the length of the wrapped object, so a generator has none
    (``TypeError``, as in tensorpack), while a list has one; ``size=`` gives it explicitly.
    """

    def __init__(self, gen: Callable[[], Iterable[Any]] | Iterable[Any], size: int | None = None) -> None:
        if not callable(gen) and not hasattr(gen, "__iter__"):
            raise TypeError(f"DataFromGenerator needs an iterable or a function returning one, got {gen!r}")
        self._gen = gen
        self._size = size

    def __iter__(self) -> Iterator[Any]:
        if callable(self._gen):
            yield from self._gen()
        else:
            yield from self._gen

    def __len__(self) -> int:
        if self._size is not None:
            return int(self._size)
        try:
            return len(self._gen)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(f"DataFromGenerator over {type(self._gen).__name__} has no length; "
                            "give size= if you know it") from None


class DataFromIterable(DataFlow):
    """Wrap an iterable of datapoints; ``len()`` is the iterable's length if it has one,
    otherwise ``NotImplementedError``."""

    def __init__(self, iterable: Iterable[Any]) -> None:
        if not hasattr(iterable, "__iter__"):
            raise TypeError(f"DataFromIterable needs an iterable, got {iterable!r}")
        self._itr = iterable
        try:
            self._len: int | None = len(iterable)  # type: ignore[arg-type]
        except Exception:  # noqa: BLE001 - any object without a usable len()
            self._len = None

    def __len__(self) -> int:
        if self._len is None:
            raise NotImplementedError(f"DataFromIterable over {type(self._itr).__name__} has no length")
        return self._len

    def __iter__(self) -> Iterator[Any]:
        yield from self._itr
