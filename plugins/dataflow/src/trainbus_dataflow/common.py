"""Dataflows that compose other dataflows (``trainbus.dataflow.common``): batching, mapping,
repeating, mixing, joining, shuffling, caching, printing, speed testing.

Datapoints are lists (or tuples) or dicts of components; every dataflow here handles both
unless its docstring says otherwise.
"""

from __future__ import annotations

import itertools
import sys
from collections import defaultdict, deque
from collections.abc import Mapping
from copy import copy as _copy
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from trainbus.utils import logger
from trainbus_dataflow.base import DataFlow, DataFlowReentrantGuard, ProxyDataFlow, RNGDataFlow, get_rng

__all__ = ["TestDataSpeed", "PrintData", "BatchData", "BatchDataByShape", "FixedSizeData", "MapData",
           "MapDataComponent", "RepeatedData", "RepeatedDataPoint", "RandomChooseData", "RandomMixData", "JoinData",
           "ConcatData", "SelectComponent", "LocallyShuffleData", "CacheData"]


def _shallow_copy(dp: Any) -> Any:
    """A shallow copy of a datapoint (fast paths for list and dict)."""
    t = type(dp)
    if t is list:
        return dp[:]
    if t is dict:
        return dp.copy()
    return _copy(dp)


def _describe(ds: Any) -> str:
    return type(ds).__name__


def tqdm_kwargs(**kwargs: Any) -> dict[str, Any]:
    """Keyword arguments for the progress bars of the dataflow library (updated by ``kwargs``)."""
    kw: dict[str, Any] = {"smoothing": 0.5, "dynamic_ncols": True, "ascii": True, "leave": False,
                          "bar_format": "{l_bar}{bar}|{n_fmt}/{total_fmt}[{elapsed}<{remaining},{rate_noinv_fmt}]"}
    if not sys.stderr.isatty():
        kw["mininterval"] = 60  # don't flood log files
    kw.update(kwargs)
    return kw


class TestDataSpeed(ProxyDataFlow):
    """Measure how fast a dataflow produces datapoints, with a progress bar.

    Iterating it first runs the test (``start()``), then produces the datapoints of ``ds``.

    :param ds: the dataflow to test.
    :param size: how many datapoints to take.
    :param warmup: how many datapoints to take (and not time) first.
    """

    __test__ = False  # not a pytest test class

    def __init__(self, ds: Any, size: int = 5000, warmup: int = 0) -> None:
        super().__init__(ds)
        self.test_size = int(size)
        self.warmup = int(warmup)
        self._reset_called = False
        #: datapoints per second of the last ``start()``
        self.speed: float | None = None

    def reset_state(self) -> None:
        self._reset_called = True
        super().reset_state()

    def __iter__(self) -> Iterator[Any]:
        self.start()
        yield from self.ds

    def start(self) -> float:
        """Take ``warmup`` then ``size`` datapoints from ``ds`` with a progress bar; calls
        ``ds.reset_state()`` first unless ``reset_state()`` was called. Returns (and keeps in
        ``self.speed``) the datapoints per second of the timed part."""
        import time

        import tqdm

        if not self._reset_called:
            self.ds.reset_state()
            self._reset_called = True
        itr = iter(self.ds)
        if self.warmup:
            for _ in tqdm.trange(self.warmup, **tqdm_kwargs()):
                next(itr)
        n = 0
        start = time.perf_counter()
        with tqdm.tqdm(total=self.test_size, **tqdm_kwargs(leave=True, smoothing=0.2)) as pbar:
            for _ in itr:
                n += 1
                pbar.update()
                if n == self.test_size:
                    break
        elapsed = max(time.perf_counter() - start, 1e-9)
        self.speed = n / elapsed
        return self.speed


class BatchData(ProxyDataFlow):
    """Stack ``batch_size`` consecutive datapoints into one.

    Each component gets a new leading dimension of size ``batch_size``: Python ints become an
    ``int32`` array, floats ``float32``, strings a numpy string array, numpy arrays/scalars
    keep their dtype. With ``use_list`` each component is a plain list instead.

    :param ds: a dataflow of list or dict datapoints. Without ``use_list`` the components must
        be scalars or arrays of one shape across the batch.
    :param batch_size: datapoints per batch.
    :param remainder: also produce the last, smaller batch (``len(ds)`` should then be exact).
        Without it every batch has exactly ``batch_size`` datapoints.
    :param use_list: make lists instead of arrays.
    """

    def __init__(self, ds: Any, batch_size: int, remainder: bool = False, use_list: bool = False) -> None:
        super().__init__(ds)
        if isinstance(batch_size, bool) or int(batch_size) != batch_size or int(batch_size) <= 0:
            raise ValueError(f"BatchData: batch_size must be a positive integer, got {batch_size!r}")
        self.batch_size = int(batch_size)
        if not remainder:
            try:
                n = len(ds)
            except (NotImplementedError, TypeError):
                n = None
            if n is not None and self.batch_size > n:
                raise ValueError(f"BatchData: batch_size {self.batch_size} is larger than the dataflow "
                                 f"{_describe(ds)} ({n} datapoints), so no batch would be produced; "
                                 "use a smaller batch_size or remainder=True")
        self.remainder = remainder
        self.use_list = use_list

    def __len__(self) -> int:
        n = len(self.ds)
        div, rem = divmod(n, self.batch_size)
        return div + int(self.remainder and rem > 0)

    def __iter__(self) -> Iterator[Any]:
        bs = self.batch_size
        agg = self.aggregate_batch
        source = _describe(self.ds)
        use_list = self.use_list
        it = iter(self.ds)
        take = itertools.islice
        while True:
            holder = list(take(it, bs))  # C-level: no Python step per datapoint
            if len(holder) < bs:
                if self.remainder and holder:
                    yield agg(holder, use_list, source)
                return
            yield agg(holder, use_list, source)

    @staticmethod
    def _batch_numpy(data_list: Sequence[Any], key: Any = 0, source: str | None = None) -> np.ndarray:
        first = data_list[0]
        if isinstance(first, int):  # bool is an int too, and is batched as int32 like tensorpack does
            dtype: Any = "int32"
        elif type(first) is float:
            dtype = "float32"
        elif isinstance(first, (bytes, str)):
            dtype = "str"
        else:
            try:
                dtype = first.dtype
            except AttributeError:
                raise TypeError(f"BatchData: cannot batch component {key!r} {_from(source)}of type "
                                f"{type(first).__name__}: components must be Python/numpy scalars, strings or numpy "
                                "arrays; use use_list=True to batch other objects into lists") from None
        try:
            return np.asarray(data_list, dtype=dtype)
        except (ValueError, TypeError) as e:
            shapes = sorted({str(np.shape(x)) for x in data_list})
            raise ValueError(f"BatchData: cannot stack component {key!r} {_from(source)}into one array ({e}); the "
                             f"datapoints of a batch have shapes {', '.join(shapes)} there; make them equal "
                             "(resize/pad), batch with BatchDataByShape, or use use_list=True") from None

    @staticmethod
    def aggregate_batch(data_holder: list[Any], use_list: bool = False, source: str | None = None) -> Any:
        """Stack a list of datapoints (all lists/tuples, or all dicts) into one batched datapoint
        of the same kind. ``source`` names the dataflow in error messages."""
        first = data_holder[0]
        if isinstance(first, (list, tuple)):
            try:
                columns = zip(*data_holder, strict=True)
                if use_list:
                    return [list(c) for c in columns]
                batch = BatchData._batch_numpy
                return [batch(c, k, source) for k, c in enumerate(columns)]
            except (ValueError, TypeError) as e:
                _check_same_structure(data_holder, source)
                raise e
        if isinstance(first, dict):
            keys = first.keys()
            for dp in data_holder:
                if type(dp) is not dict or dp.keys() != keys:
                    _check_same_structure(data_holder, source)
            if use_list:
                return {k: [dp[k] for dp in data_holder] for k in keys}
            return {k: BatchData._batch_numpy([dp[k] for dp in data_holder], k, source) for k in keys}
        raise ValueError(f"BatchData: a datapoint {_from(source)}must be a list, tuple or dict of components, "
                         f"got {type(first).__name__}: {first!r:.80}")


def _from(source: str | None) -> str:
    return f"from {source} " if source else ""


def _check_same_structure(data_holder: list[Any], source: str | None) -> None:
    """Raise a ValueError naming the first datapoint of a batch whose structure differs from the first one's."""
    first = data_holder[0]
    for i, dp in enumerate(data_holder):
        if isinstance(first, dict):
            if not isinstance(dp, dict) or dp.keys() != first.keys():
                raise ValueError(f"BatchData: datapoint {i} of a batch {_from(source)}is {_shape_of(dp)} but the "
                                 f"first datapoint of the batch is a dict with keys {sorted(map(str, first))}; every "
                                 "datapoint must have the same keys")
        elif not isinstance(dp, (list, tuple)) or len(dp) != len(first):
            raise ValueError(f"BatchData: datapoint {i} of a batch {_from(source)}is {_shape_of(dp)} but the first "
                             f"datapoint of the batch is a {type(first).__name__} of {len(first)} components; every "
                             "datapoint must have the same structure")


def _shape_of(dp: Any) -> str:
    if isinstance(dp, dict):
        return f"a dict with keys {sorted(map(str, dp))}"
    if isinstance(dp, (list, tuple)):
        return f"a {type(dp).__name__} of {len(dp)} components"
    return f"a {type(dp).__name__}"


class BatchDataByShape(BatchData):
    """Batch together datapoints whose component ``idx`` has the same shape.

    Datapoints are kept in one buffer per shape; a batch is produced when a buffer holds
    ``batch_size`` datapoints (so rare shapes may never be produced). Not reentrant.

    :param ds: a dataflow whose ``dp[idx]`` is a numpy array.
    :param batch_size: datapoints per batch.
    :param idx: the component whose shape groups datapoints.
    """

    def __init__(self, ds: Any, batch_size: int, idx: int | str) -> None:
        super().__init__(ds, batch_size, remainder=False)
        self.idx = idx
        self.holder: defaultdict[tuple, list[Any]] = defaultdict(list)
        self._guard = DataFlowReentrantGuard()

    def reset_state(self) -> None:
        super().reset_state()
        self.holder = defaultdict(list)
        self._guard = DataFlowReentrantGuard()

    def __iter__(self) -> Iterator[Any]:
        source = _describe(self.ds)
        with self._guard:
            for dp in self.ds:
                try:
                    shape = dp[self.idx].shape
                except (AttributeError, IndexError, KeyError, TypeError):
                    raise ValueError(f"BatchDataByShape: component {self.idx!r} of a datapoint from {source} must be "
                                     f"a numpy array, got {_shape_of(dp)}") from None
                holder = self.holder[shape]
                holder.append(dp)
                if len(holder) == self.batch_size:
                    yield self.aggregate_batch(holder, False, source)
                    del holder[:]


class FixedSizeData(ProxyDataFlow):
    """Produce exactly ``size`` datapoints of ``ds`` per pass, starting ``ds`` over when it ends.

    With ``keep_state`` a pass continues where the previous one stopped (``ds`` = 1..5,
    size 3: ``1 2 3 | 4 5 1 | 2 3 4``); without it every pass starts ``ds`` anew
    (``1 2 3 | 1 2 3``). Not reentrant.
    """

    def __init__(self, ds: Any, size: int, keep_state: bool = True) -> None:
        super().__init__(ds)
        self._size = int(size)
        self._keep = keep_state
        self.itr: Iterator[Any] | None = None
        self._guard = DataFlowReentrantGuard()

    def __len__(self) -> int:
        return self._size

    def reset_state(self) -> None:
        super().reset_state()
        self.itr = None
        self._guard = DataFlowReentrantGuard()

    def __iter__(self) -> Iterator[Any]:
        with self._guard:
            if self.itr is None:
                self.itr = iter(self.ds)
            for _ in range(self._size):
                try:
                    dp = next(self.itr)
                except StopIteration:
                    self.itr = iter(self.ds)
                    try:
                        dp = next(self.itr)
                    except StopIteration:
                        raise ValueError(f"FixedSizeData: the dataflow {_describe(self.ds)} produced no "
                                         "datapoint in a whole pass") from None
                yield dp
            if not self._keep:
                self.itr = None


class MapData(ProxyDataFlow):
    """Apply ``func`` to every datapoint (given a shallow copy); datapoints it maps to ``None``
    are dropped (then ``len()`` is only an upper bound).

    ``func`` should not modify the arrays of its argument in place unless that is safe.
    """

    def __init__(self, ds: Any, func: Callable[[Any], Any]) -> None:
        super().__init__(ds)
        if not callable(func):
            raise TypeError(f"{type(self).__name__}: func must be callable, got {func!r}")
        self.func = func

    def __iter__(self) -> Iterator[Any]:
        func = self.func
        for dp in self.ds:
            ret = func(dp[:] if type(dp) is list else _shallow_copy(dp))
            if ret is not None:
                yield ret


class MapDataComponent(MapData):
    """Apply ``func`` to one component, ``dp[index]`` (an int for list datapoints, a key for
    dicts); when it returns ``None`` the datapoint is dropped. The input datapoint itself is
    not modified: the result goes into a shallow copy (a tuple becomes a list)."""

    def __init__(self, ds: Any, func: Callable[[Any], Any], index: int | str = 0) -> None:
        if not callable(func):
            raise TypeError(f"MapDataComponent: func must be callable, got {func!r}")
        self._index = index
        self._func = func
        super().__init__(ds, self._mapper)

    def _mapper(self, dp: Any) -> Any:
        try:
            value = dp[self._index]
        except (IndexError, KeyError, TypeError):
            raise ValueError(f"MapDataComponent: a datapoint from {_describe(self.ds)} has no component "
                             f"{self._index!r} (it is {_shape_of(dp)})") from None
        r = self._func(value)
        if r is None:
            return None
        if isinstance(dp, tuple):
            dp = list(dp)
        dp[self._index] = r  # dp is already a shallow copy (MapData)
        return dp


class RepeatedData(ProxyDataFlow):
    """Produce all of ``ds``, ``num`` times over (``num=-1``: forever, and then ``len()``
    raises ``NotImplementedError``)."""

    def __init__(self, ds: Any, num: int) -> None:
        super().__init__(ds)
        if int(num) != num or (num < 0 and num != -1):
            raise ValueError(f"RepeatedData: num must be a non-negative integer or -1 (forever), got {num!r}")
        self.num = int(num)

    def __len__(self) -> int:
        if self.num == -1:
            raise NotImplementedError("RepeatedData(num=-1) is infinite: __len__() is unavailable")
        return len(self.ds) * self.num

    def __iter__(self) -> Iterator[Any]:
        if self.num == -1:
            while True:
                yield from self.ds
        else:
            for _ in range(self.num):
                yield from self.ds


class RepeatedDataPoint(ProxyDataFlow):
    """Produce every datapoint of ``ds`` ``num`` times in a row: ``a a b b c c``."""

    def __init__(self, ds: Any, num: int) -> None:
        super().__init__(ds)
        if int(num) != num or num < 1:
            raise ValueError(f"RepeatedDataPoint: num must be an integer >= 1, got {num!r}")
        self.num = int(num)

    def __len__(self) -> int:
        return len(self.ds) * self.num

    def __iter__(self) -> Iterator[Any]:
        num = self.num
        for dp in self.ds:
            for _ in range(num):
                yield dp


class RandomChooseData(RNGDataFlow):
    """Take each datapoint from a randomly chosen dataflow of several; stop when the chosen one
    is exhausted.

    :param df_lists: a list of dataflows (chosen uniformly), or of ``(dataflow, probability)``
        pairs with probabilities summing to 1.
    """

    def __init__(self, df_lists: Sequence[Any]) -> None:
        super().__init__()
        if not df_lists:
            raise ValueError("RandomChooseData: df_lists is empty")
        if isinstance(df_lists[0], (tuple, list)):
            total = sum(float(p) for _, p in df_lists)
            if not np.isclose(total, 1.0):
                raise ValueError(f"RandomChooseData: the probabilities sum to {total}, they must sum to 1")
            self.df_lists = [(d, float(p)) for d, p in df_lists]
        else:
            p = 1.0 / len(df_lists)
            self.df_lists = [(d, p) for d in df_lists]

    def reset_state(self) -> None:
        super().reset_state()
        for d, _ in self.df_lists:
            d.reset_state()

    def __iter__(self) -> Iterator[Any]:
        if self.rng is None:
            self.rng = get_rng(self)
        itrs = [iter(d) for d, _ in self.df_lists]
        probs = np.array([p for _, p in self.df_lists])
        while True:
            k = self.rng.choice(len(itrs), p=probs)
            try:
                yield next(itrs[k])
            except StopIteration:
                return


class RandomMixData(RNGDataFlow):
    """Mix the datapoints of several dataflows in a random order that takes exactly
    ``len(d)`` datapoints from each ``d``; ends when all are exhausted. Every dataflow needs
    an exact ``len()``."""

    def __init__(self, df_lists: Sequence[Any]) -> None:
        super().__init__()
        self.df_lists = list(df_lists)
        if not self.df_lists:
            raise ValueError("RandomMixData: df_lists is empty")
        try:
            self.sizes = [len(d) for d in self.df_lists]
        except (NotImplementedError, TypeError) as e:
            raise ValueError(f"RandomMixData: every dataflow needs a length to be mixed ({e})") from None

    def reset_state(self) -> None:
        super().reset_state()
        for d in self.df_lists:
            d.reset_state()

    def __len__(self) -> int:
        return sum(self.sizes)

    def __iter__(self) -> Iterator[Any]:
        if self.rng is None:
            self.rng = get_rng(self)
        sums = np.cumsum(self.sizes)
        order = np.arange(len(self))
        self.rng.shuffle(order)
        which = np.searchsorted(sums, order, "right")
        itrs = [iter(d) for d in self.df_lists]
        for k in which:
            try:
                yield next(itrs[k])
            except StopIteration:
                raise ValueError(f"RandomMixData: dataflow {k} ({_describe(self.df_lists[k])}) produced fewer "
                                 f"datapoints than its len() = {self.sizes[k]}") from None


class ConcatData(DataFlow):
    """Produce all datapoints of each dataflow in turn."""

    def __init__(self, df_lists: Sequence[Any]) -> None:
        self.df_lists = list(df_lists)

    def reset_state(self) -> None:
        for d in self.df_lists:
            d.reset_state()

    def __len__(self) -> int:
        return sum(len(d) for d in self.df_lists)

    def __iter__(self) -> Iterator[Any]:
        for d in self.df_lists:
            yield from d


class JoinData(DataFlow):
    """Join the components of datapoints taken from several dataflows in lockstep:
    ``[c1, c2]`` + ``[c3]`` gives ``[c1, c2, c3]``; ``{"a": c1}`` + ``{"b": c2}`` gives
    ``{"a": c1, "b": c2}``. Stops when any dataflow is exhausted; ``len()`` is the smallest
    length. Lists and dicts cannot be mixed.
    """

    def __init__(self, df_lists: Sequence[Any]) -> None:
        self.df_lists = list(df_lists)
        if not self.df_lists:
            raise ValueError("JoinData: df_lists is empty")
        try:
            sizes = [len(d) for d in self.df_lists]
        except (NotImplementedError, TypeError):
            sizes = None
        if sizes is not None and len(set(sizes)) > 1:
            logger.info(f"[JoinData] the dataflows to join have different sizes {sizes}; "
                        "it stops when the shortest is exhausted")

    def reset_state(self) -> None:
        seen: set[int] = set()
        for d in self.df_lists:
            if id(d) not in seen:
                seen.add(id(d))
                d.reset_state()

    def __len__(self) -> int:
        return min(len(d) for d in self.df_lists)

    def __iter__(self) -> Iterator[Any]:
        itrs = [iter(d) for d in self.df_lists]
        while True:
            try:
                dps = [next(it) for it in itrs]
            except StopIteration:
                return
            if isinstance(dps[0], (list, tuple)):
                for i, dp in enumerate(dps):
                    if not isinstance(dp, (list, tuple)):
                        raise ValueError(f"JoinData: dataflow {i} ({_describe(self.df_lists[i])}) produced "
                                         f"{_shape_of(dp)} but dataflow 0 produces lists; join lists with lists "
                                         "or dicts with dicts")
                yield list(itertools.chain.from_iterable(dps))
            else:
                out: dict[Any, Any] = {}
                for i, dp in enumerate(dps):
                    if not isinstance(dp, Mapping):
                        raise ValueError(f"JoinData: dataflow {i} ({_describe(self.df_lists[i])}) produced "
                                         f"{_shape_of(dp)} but dataflow 0 produces dicts; join lists with lists "
                                         "or dicts with dicts")
                    out.update(dp)
                yield out


def SelectComponent(ds: Any, idxs: Sequence[int | str]) -> MapData:
    """A dataflow of list datapoints ``[dp[i] for i in idxs]``: select and reorder components
    (indices of list datapoints or keys of dict datapoints)."""
    idxs = list(idxs)

    def select(dp: Any) -> list[Any]:
        return [dp[i] for i in idxs]

    return MapData(ds, select)


class LocallyShuffleData(ProxyDataFlow, RNGDataFlow):
    """Shuffle within a moving buffer, for sources too large to shuffle whole.

    Datapoints of ``ds`` (repeated forever) enter a FIFO buffer of ``buffer_size``, each
    ``num_reuse`` times; once the buffer is full every new entry pushes out the oldest, which
    is produced. The buffer is shuffled after every ``shuffle_interval`` datapoints taken from
    ``ds`` (default ``buffer_size // 3``). Passes of ``ds`` mix, so iteration never ends;
    ``len()`` is ``len(ds) * num_reuse``, a guide for an epoch. Not reentrant.
    """

    def __init__(self, ds: Any, buffer_size: int, num_reuse: int = 1, shuffle_interval: int | None = None) -> None:
        ProxyDataFlow.__init__(self, ds)
        if int(buffer_size) < 1:
            raise ValueError(f"LocallyShuffleData: buffer_size must be >= 1, got {buffer_size!r}")
        self.q: deque[Any] = deque(maxlen=int(buffer_size))
        if shuffle_interval is None:
            shuffle_interval = int(buffer_size) // 3
        self.shuffle_interval = max(int(shuffle_interval), 1)
        self.num_reuse = int(num_reuse)
        self._inf_ds = RepeatedData(ds, -1)
        self._guard = DataFlowReentrantGuard()
        self._iter_cnt = 0
        self._inf_iter: Iterator[Any] | None = None

    def reset_state(self) -> None:
        self._guard = DataFlowReentrantGuard()
        ProxyDataFlow.reset_state(self)
        RNGDataFlow.reset_state(self)
        self._iter_cnt = 0
        self._inf_iter = iter(self._inf_ds)

    def __len__(self) -> int:
        return len(self.ds) * self.num_reuse

    def __iter__(self) -> Iterator[Any]:
        if self._inf_iter is None:
            raise RuntimeError("LocallyShuffleData: call reset_state() before iterating")
        with self._guard:
            q = self.q
            for dp in self._inf_iter:
                self._iter_cnt = (self._iter_cnt + 1) % self.shuffle_interval
                if self._iter_cnt == 0:
                    self.rng.shuffle(q)
                for _ in range(self.num_reuse):
                    if len(q) == q.maxlen:
                        yield q.popleft()
                    q.append(dp)


class CacheData(ProxyDataFlow):
    """Keep the datapoints of the first pass of ``ds`` in memory and produce later passes from
    memory (shuffled each pass when ``shuffle``). Stop the first pass early and the cache is
    incomplete. Not reentrant."""

    def __init__(self, ds: Any, shuffle: bool = False) -> None:
        super().__init__(ds)
        self.shuffle = shuffle
        self.buffer: list[Any] = []
        self._guard = DataFlowReentrantGuard()
        self.rng: np.random.RandomState | None = None

    def reset_state(self) -> None:
        super().reset_state()
        self._guard = DataFlowReentrantGuard()
        if self.shuffle:
            self.rng = get_rng(self)
        self.buffer = []

    def __iter__(self) -> Iterator[Any]:
        with self._guard:
            if self.buffer:
                if self.shuffle:
                    if self.rng is None:
                        self.rng = get_rng(self)
                    self.rng.shuffle(self.buffer)
                yield from self.buffer
            else:
                for dp in self.ds:
                    yield dp
                    self.buffer.append(dp)


class PrintData(ProxyDataFlow):
    """Pass datapoints through unchanged, printing the type, shape, dtype and range of the
    components of the first ``num`` ones (for debugging a pipeline)::

        datapoint 0/2 with 2 components consists of
         0: ndarray:float32 of shape (28, 28) in range [0.0, 1.0]
         1: int with value 7

    :param num: how many datapoints to print.
    :param name: a name printed in the header line.
    :param max_depth: how deep to describe nested lists.
    :param max_list: how many elements of a nested list to describe.
    """

    def __init__(self, ds: Any, num: int = 1, name: str | None = None, max_depth: int = 3, max_list: int = 3) -> None:
        super().__init__(ds)
        self.num = num
        self.name = name
        self.cnt = 0
        self.max_depth = max_depth
        self.max_list = max_list

    def _describe_component(self, el: Any, pos: Any, depth: int) -> list[str]:
        indent = " " * (depth * 2)
        shape = dtype = rng = ""
        sub: list[str] = []
        if isinstance(el, (bool, int, float)) or isinstance(el, np.generic):
            rng = f" with value {el}"
        elif isinstance(el, np.ndarray):
            shape = f" of shape {el.shape}"
            dtype = f":{el.dtype}"
            if el.size:
                rng = f" in range [{el.min()}, {el.max()}]"
        elif isinstance(el, (list, tuple)):
            shape = f" of len {len(el)}"
            if depth < self.max_depth:
                for k, child in enumerate(el):
                    if k >= self.max_list:
                        sub.append(" " * ((depth + 1) * 2) + "...")
                        break
                    sub.extend(self._describe_component(child, k, depth + 1))
            elif el:
                sub.append(" " * ((depth + 1) * 2) + " ...")
        return [f"{indent}{pos}: {type(el).__name__}{dtype}{shape}{rng}", *sub]

    def _get_msg(self, dp: Any) -> str:
        lines = [f"datapoint {self.cnt}/{self.num} with {len(dp)} components consists of"]
        items = dp.items() if isinstance(dp, Mapping) else enumerate(dp)
        for key, value in items:
            lines.extend(self._describe_component(value, key, 1))
        return "\n".join(lines)

    def __iter__(self) -> Iterator[Any]:
        for dp in self.ds:
            if self.cnt == 0:
                label = f" ({self.name})" if self.name is not None else ""
                logger.info(f"Contents of DataFlow{label}:")
            if self.cnt < self.num:
                print(self._get_msg(dp))
                self.cnt += 1
            yield dp

    def reset_state(self) -> None:
        super().reset_state()
        self.cnt = 0
