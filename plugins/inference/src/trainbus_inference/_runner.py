"""Inference runners: build inference towers that share the trained variables and run
inferencers over an input every time they are triggered."""

from __future__ import annotations

import time
from typing import Any, Sequence

import tensorflow as tf

from trainbus.callbacks.base import Callback
from trainbus.dataflow import is_dataflow
from trainbus.input_source import FeedInput, InputSource, QueueInput
from trainbus.tfutils.tower import PredictTowerContext, TowerFunc
from trainbus.utils import logger

from trainbus_inference._inferencer import Inferencer

tf1 = tf.compat.v1

__all__ = ["InferenceRunnerBase", "InferenceRunner", "DataParallelInferenceRunner"]


def _is_feed(inp: InputSource) -> bool:
    """A FeedInput that we feed ourselves (a QueueInput is a FeedInput that feeds a queue)."""
    return isinstance(inp, FeedInput) and not isinstance(inp, QueueInput)


def _device(i: int) -> str:
    # "/gpu:i" also on CPU-only hosts: the default session config allows soft placement.
    return f"/gpu:{i}" if i >= 0 else "/cpu:0"


class InferenceRunnerBase(Callback):
    """Base class of inference runners.

    Notes:
      1. The number of batches of one round is ``input.size()`` (``len(dataflow)``): make
         sure it is accurate.
      2. Works only with trainers that have a tower function (``TowerTrainer``).

    :param input: an ``InputSource``, or a DataFlow (wrapped in ``FeedInput(ds, infinite=False)``).
    :param infs: an :class:`Inferencer` or a list of them.
    """

    def __init__(self, input: Any, infs: Inferencer | Sequence[Inferencer]) -> None:
        who = type(self).__name__
        if isinstance(input, InputSource):
            pass
        elif is_dataflow(input):
            input = FeedInput(input, infinite=False)
        else:
            raise TypeError(f"{who}: input must be a DataFlow or an InputSource, got {input!r} of type "
                            f"{type(input).__name__}")
        if input.setup_done():
            raise ValueError(f"{who}: the InputSource {input} is already set up (used by a trainer or another runner); "
                             "give the runner its own InputSource or DataFlow")
        self._input_source = input
        if isinstance(infs, Inferencer):
            infs = [infs]
        if not isinstance(infs, (list, tuple)) or not infs:
            raise ValueError(f"{who}: infs must be an Inferencer or a non-empty list of them, got {infs!r}")
        for inf in infs:
            if not isinstance(inf, Inferencer):
                raise TypeError(f"{who}: every element of infs must be an Inferencer (e.g. ScalarStats('cost')), "
                                f"got {inf!r} of type {type(inf).__name__}")
        self.infs = list(infs)
        try:
            size = input.size()
        except Exception as e:  # noqa: BLE001 - any failure means "unknown size"
            raise ValueError(f"{who}: the size of the input {input} is unknown ({e}); a runner runs input.size() "
                             "batches per round: give the DataFlow a __len__") from None
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"{who}: the input {input} has size {size!r}; it needs at least one batch")
        self._size = int(size)
        self._input_callbacks: list[Callback] = []

    @property
    def input(self) -> InputSource:
        """The InputSource inference runs over."""
        return self._input_source

    def _tower_func_of(self, tower_func: Any) -> TowerFunc:
        trainer = self.trainer
        if tower_func is None:
            tower_func = getattr(trainer, "tower_func", None)
            if tower_func is None:
                raise TypeError(f"{type(self).__name__} needs a trainer with a tower function (a TowerTrainer such as "
                                f"SimpleTrainer), or tower_func=...; {trainer} has none")
        if not isinstance(tower_func, TowerFunc):
            tower_func = TowerFunc(tower_func, trainer.input_signature)
        return tower_func

    def _check_tower_name(self, tower_func: TowerFunc, name: str) -> None:
        try:
            tower_func.towers[name]
        except KeyError:
            return
        raise ValueError(f"{type(self).__name__}: a tower named {name!r} already exists; each InferenceRunner needs "
                         "its own tower_name=")

    def _setup_input_callbacks(self, cbs: Sequence[Callback]) -> None:
        # a QueueInput needs its thread started/stopped with training
        self._input_callbacks = list(cbs)
        for cb in self._input_callbacks:
            cb.setup_graph(self.trainer)

    def _setup_inferencers(self) -> None:
        for inf in self.infs:
            inf.setup_graph(self.trainer)

    def _fetch_plan(self) -> tuple[list[str], list[list[int]]]:
        names: list[str] = []
        plan = []
        for inf in self.infs:
            idx = []
            for n in inf.get_fetches():
                if n not in names:
                    names.append(n)
                idx.append(names.index(n))
            plan.append(idx)
        return names, plan

    def _tensors_of(self, handle: Any, names: list[str]) -> list[Any]:
        out = []
        for n in names:
            try:
                out.append(handle.get_tensor(n))
            except KeyError:
                users = [str(inf) for inf in self.infs if n in inf.get_fetches()]
                raise KeyError(f"{type(self).__name__}: inference tower {handle.ns_name!r} has no tensor {n!r} "
                               f"(requested by {', '.join(users)}); name a tensor your tower function creates") from None
        return out

    def _before_train(self) -> None:
        for cb in self._input_callbacks:
            cb.before_train()
        for inf in self.infs:
            inf.before_train()

    def _after_train(self) -> None:
        errors = []
        for cb in list(self._input_callbacks) + list(self.infs):
            try:
                cb._after_train()
            except Exception as e:  # noqa: BLE001 - reach every inferencer, re-raise the first
                errors.append(e)
        if errors:
            raise errors[0]

    def _trigger(self) -> None:
        start = time.perf_counter()
        for inf in self.infs:
            inf.before_inference()
        self._run_round()
        for inf in self.infs:
            stats = inf.after_inference() or {}
            for k, v in stats.items():
                self.trainer.monitors.put_scalar(k, v)
        logger.info(f"{self}: inference over {self._size} batches took {time.perf_counter() - start:.2f} sec.")

    def _feed_values(self) -> tuple | None:
        """The next datapoint of a fed input, or None when it ran out early."""
        try:
            return self._input_source.next_feed()
        except tf.errors.OutOfRangeError:
            return None

    def _start_feed_round(self) -> None:
        # FeedInput(infinite=False).reset_state(): reset the dataflow, iterate it once more
        self._input_source.reset_state()

    def _run_round(self) -> None:
        raise TypeError(f"{type(self).__name__} must implement _run_round()")

    def _dispatch(self, values: Sequence[Any]) -> None:
        for inf, idx in zip(self.infs, self._plan):
            inf.on_fetches([values[j] for j in idx])


class InferenceRunner(InferenceRunnerBase):
    """Run inferencers over an input with a ``training=False`` tower that shares the trained
    variables; the statistics go to ``trainer.monitors``. Runs once per trigger: after every
    epoch by default, or as scheduled by ``PeriodicTrigger``.

    :param input: an ``InputSource`` or a DataFlow (``FeedInput(ds, infinite=False)``).
    :param infs: a list of :class:`Inferencer`.
    :param tower_name: name scope of the inference tower; several runners need distinct names.
    :param tower_func: the tower function to build (``trainer.tower_func`` by default), called
        under ``PredictTowerContext(tower_name)``.
    :param device: the GPU to build the tower on (``-1``: CPU).
    """

    def __init__(self, input: Any, infs: Inferencer | Sequence[Inferencer], tower_name: str = "InferenceTower",
                 tower_func: Any = None, device: int = 0) -> None:
        super().__init__(input, infs)
        if not isinstance(tower_name, str) or not tower_name:
            raise ValueError(f"InferenceRunner: tower_name must be a non-empty string, got {tower_name!r}")
        if tower_func is not None and not callable(tower_func):
            raise TypeError(f"InferenceRunner: tower_func must be a TowerFunc or a function, got {tower_func!r}")
        if isinstance(device, bool) or not isinstance(device, int):
            raise TypeError(f"InferenceRunner: device must be an int (GPU id, -1 for CPU), got {device!r}")
        self._tower_name = tower_name
        self._tower_func_arg = tower_func
        self._device_id = device

    def _setup_graph(self) -> None:
        tower_func = self._tower_func_of(self._tower_func_arg)
        name = self._tower_name
        self._check_tower_name(tower_func, name)
        specs = tower_func.input_signature
        src = self._input_source
        with tf1.name_scope(None):
            if _is_feed(src):
                # own placeholders under the tower's scope; FeedInput's callback is not used
                # (it would feed the training step)
                src.setup([tf.TensorSpec(s.shape, s.dtype, f"{name}/{s.name}") for s in specs])
                self._placeholders = list(src.feed_source()[0])
            else:
                self._setup_input_callbacks(src.setup(specs))
                self._placeholders = []
            with tf1.device(_device(self._device_id)), PredictTowerContext(name):
                tower_func(*src.get_input_tensors())
        self._handle = tower_func.towers[name]
        self._setup_inferencers()
        names, self._plan = self._fetch_plan()
        self._fetches = self._tensors_of(self._handle, names)
        self._callable: Any = None

    def _run_round(self) -> None:
        if self._callable is None:
            self._callable = self.trainer.sess.make_callable(self._fetches, feed_list=self._placeholders)
        fn = self._callable
        if _is_feed(self._input_source):
            self._start_feed_round()
            for i in range(self._size):
                dp = self._feed_values()
                if dp is None:
                    logger.warning(f"{self}: the input ran out after {i} of {self._size} batches")
                    break
                self._dispatch(fn(*dp))
        else:
            for _ in range(self._size):
                self._dispatch(fn())

    def __str__(self) -> str:
        return f"InferenceRunner({self._tower_name})"


class DataParallelInferenceRunner(InferenceRunnerBase):
    """Inference with one ``training=False`` tower per device: each run takes one batch per
    tower; when the number of batches is not a multiple of the number of towers, the
    remaining batches run one by one on the first tower. Results equal
    :class:`InferenceRunner`'s.

    On a host without GPUs the towers use ``/gpu:i`` device names that soft placement (the
    default session config) puts on the CPU.

    :param input: a DataFlow (fed, one batch per tower) or an ``InputSource`` such as
        ``QueueInput`` (each tower dequeues its own batch).
    :param infs: a list of :class:`Inferencer`.
    :param gpus: number of GPUs, or a list of GPU ids.
    :param tower_name: prefix of the towers' names (``InferenceTower0``, ``InferenceTower1``, ...).
    :param tower_func: as in :class:`InferenceRunner`.
    """

    def __init__(self, input: Any, infs: Inferencer | Sequence[Inferencer], gpus: int | Sequence[int],
                 tower_name: str = "InferenceTower", tower_func: Any = None) -> None:
        super().__init__(input, infs)
        if isinstance(gpus, bool):
            raise TypeError(f"DataParallelInferenceRunner: gpus must be an int or a list of GPU ids, got {gpus!r}")
        if isinstance(gpus, int):
            if gpus < 1:
                raise ValueError(f"DataParallelInferenceRunner: gpus={gpus}; it needs at least one device")
            gpus = list(range(gpus))
        if not isinstance(gpus, (list, tuple)) or not gpus or not all(
                isinstance(g, int) and not isinstance(g, bool) and g >= 0 for g in gpus):
            raise ValueError(f"DataParallelInferenceRunner: gpus must be a positive int or a non-empty list of "
                             f"GPU ids (ints >= 0), got {gpus!r}")
        if len(set(gpus)) != len(gpus):
            raise ValueError(f"DataParallelInferenceRunner: gpus lists a device twice: {list(gpus)}")
        if not isinstance(tower_name, str) or not tower_name:
            raise ValueError(f"DataParallelInferenceRunner: tower_name must be a non-empty string, got {tower_name!r}")
        if tower_func is not None and not callable(tower_func):
            raise TypeError(f"DataParallelInferenceRunner: tower_func must be a TowerFunc or a function, got {tower_func!r}")
        self._gpus = list(gpus)
        self._tower_name = tower_name
        self._tower_names = [f"{tower_name}{k}" for k in range(len(self._gpus))]
        self._tower_func_arg = tower_func

    def _setup_graph(self) -> None:
        tower_func = self._tower_func_of(self._tower_func_arg)
        for name in self._tower_names:
            self._check_tower_name(tower_func, name)
        specs = tower_func.input_signature
        src = self._input_source
        feed = _is_feed(src)
        self._placeholders: list[list[Any]] = []
        with tf1.name_scope(None):
            if feed:
                first = self._tower_names[0]
                src.setup([tf.TensorSpec(s.shape, s.dtype, f"{first}/{s.name}") for s in specs])
            else:
                self._setup_input_callbacks(src.setup(specs))
            for k, (gpu, name) in enumerate(zip(self._gpus, self._tower_names)):
                if feed:
                    phs = list(src.feed_source()[0]) if k == 0 else [
                        tf1.placeholder(s.dtype, shape=s.shape, name=f"{name}/{s.name}") for s in specs]
                    self._placeholders.append(phs)
                    inputs = phs
                else:
                    self._placeholders.append([])
                    inputs = src.get_input_tensors()
                with tf1.device(_device(gpu)), PredictTowerContext(name):
                    tower_func(*inputs)
        self._handles = [tower_func.towers[n] for n in self._tower_names]
        self._setup_inferencers()
        names, self._plan = self._fetch_plan()
        self._tower_fetches = [self._tensors_of(h, names) for h in self._handles]
        self._callables: tuple[Any, Any] | None = None

    def _make_callables(self) -> tuple[Any, Any]:
        sess = self.trainer.sess
        all_feeds = [p for phs in self._placeholders for p in phs]
        full = sess.make_callable(self._tower_fetches, feed_list=all_feeds)
        single = sess.make_callable(self._tower_fetches[0], feed_list=self._placeholders[0])
        return full, single

    def _run_round(self) -> None:
        if self._callables is None:
            self._callables = self._make_callables()
        full, single = self._callables
        n = len(self._gpus)
        nr_full, nr_rest = divmod(self._size, n)
        if _is_feed(self._input_source):
            self._start_feed_round()
            done = 0
            for _ in range(nr_full):
                dps = [self._feed_values() for _ in range(n)]
                if any(dp is None for dp in dps):
                    # ran out in the middle of a parallel run: finish what was read one by one
                    for dp in dps:
                        if dp is not None:
                            self._dispatch(single(*dp))
                            done += 1
                    logger.warning(f"{self}: the input ran out after {done} of {self._size} batches")
                    return
                for res in full(*[v for dp in dps for v in dp]):
                    self._dispatch(res)
                done += n
            for _ in range(nr_rest):
                dp = self._feed_values()
                if dp is None:
                    logger.warning(f"{self}: the input ran out after {done} of {self._size} batches")
                    return
                self._dispatch(single(*dp))
                done += 1
        else:
            for _ in range(nr_full):
                for res in full():
                    self._dispatch(res)
            for _ in range(nr_rest):
                self._dispatch(single())

    def __str__(self) -> str:
        return f"DataParallelInferenceRunner({self._tower_name}x{len(self._gpus)})"
