"""Inputs from tensors a function builds: :class:`TensorInput` (starting the queue runners
they read from) and :class:`DummyConstantInput` (constant zeros)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import tensorflow as tf

from trainbus.callbacks.base import Callback
from trainbus.input_source.base import FeedfreeInput
from trainbus.utils import logger

tf1 = tf.compat.v1


class _QueueRunnerCallback(Callback):
    """Starts the queue runners a :class:`TensorInput` reads from before training and stops
    them (request stop, close their queues, join their threads) after it."""

    def __init__(self, src: TensorInput) -> None:
        self._src = src
        self._coord: Any = None
        self._threads: list[Any] = []

    def _before_train(self) -> None:
        self._coord, self._threads = self._src._start_queue_runners(self.trainer.sess)

    def _after_train(self) -> None:
        if self._coord is not None:
            self._src._stop_queue_runners(self._coord, self._threads)
            self._coord = None

    def __str__(self) -> str:
        return "TensorInputQueueRunners"


def _queue_runners_feeding(tensors: Sequence[Any], runners: Sequence[Any]) -> list[Any]:
    """The queue runners (of ``runners``) whose queues ``tensors`` read from, directly or
    through other queues filled by queue runners."""
    by_queue: dict[Any, list[Any]] = {}
    for qr in runners:
        by_queue.setdefault(qr.queue.queue_ref.op, []).append(qr)
    needed: list[Any] = []
    seen: set[Any] = set()
    todo = [t.op if isinstance(t, tf.Tensor) else t for t in tensors]
    while todo:
        op = todo.pop()
        if op in seen:
            continue
        seen.add(op)
        todo.extend(x.op for x in op.inputs)
        todo.extend(op.control_inputs)
        for qr in by_queue.get(op, []):
            if qr not in needed:
                needed.append(qr)
                for enq in qr.enqueue_ops:
                    todo.append(enq.op if isinstance(enq, tf.Tensor) else enq)
    return needed


class TensorInput(FeedfreeInput):
    """Inputs from tensors that a function builds, e.g. a ``tf.compat.v1.train`` input
    pipeline of queues (``range_input_producer``, ``shuffle_batch``, ...).

    The queue runners those tensors depend on are started in the trainer's session before
    training (``tf.compat.v1.train.start_queue_runners``) and stopped after it.

    :param get_tensor_fn: called with no arguments in each tower; returns the list of input
        tensors of that tower, one per input of the signature. The tensors are evaluated at
        every step.
    :param size: number of steps of one epoch, or None when unknown.
    """

    def __init__(self, get_tensor_fn: Callable[[], Sequence[Any]], size: int | None = None) -> None:
        if not callable(get_tensor_fn):
            raise TypeError(f"TensorInput needs a function returning the list of input tensors, got {get_tensor_fn!r}")
        if size is not None:
            if isinstance(size, bool) or int(size) != size or int(size) <= 0:
                raise ValueError(f"TensorInput: size must be a positive number of steps or None, got {size!r}")
            size = int(size)
        self.get_tensor_fn = get_tensor_fn
        self._fixed_size = size
        self._tensors: list[Any] = []
        #: the queue-runner threads started for this source (alive between before/after train)
        self.queue_runner_threads: list[Any] = []

    def size(self) -> int:
        if self._fixed_size is None:
            raise ValueError(f"{type(self).__name__} was created without size=, so the number of steps of an epoch is "
                             "unknown; pass TensorInput(fn, size=steps) or steps_per_epoch= to the TrainConfig")
        return self._fixed_size

    def _setup(self, input_signature: list[Any]) -> None:
        self._spec = input_signature

    def _get_input_tensors(self) -> list[Any]:
        with self.cached_name_scope():
            ret = self.get_tensor_fn()
        if isinstance(ret, tf.Tensor) or not isinstance(ret, (list, tuple)):
            raise TypeError(f"{type(self).__name__}: the tensor function must return a list of tensors, got {ret!r}")
        ret = list(ret)
        if len(ret) != len(self._spec):
            raise ValueError(f"{type(self).__name__}: the tensor function returned {len(ret)} tensors but the model "
                             f"has {len(self._spec)} inputs ({[s.name for s in self._spec]})")
        for t, s in zip(ret, self._spec):
            if not isinstance(t, tf.Tensor):
                raise TypeError(f"{type(self).__name__}: input {s.name!r} is {t!r}, not a tf.Tensor")
            if t.dtype.base_dtype != s.dtype:
                raise ValueError(f"{type(self).__name__}: input {s.name!r} wants {s.dtype.name} but the tensor "
                                 f"function gave {t.name} of {t.dtype.name}")
            if not t.shape.is_compatible_with(s.shape):
                raise ValueError(f"{type(self).__name__}: input {s.name!r} wants shape {s.shape} but the tensor "
                                 f"function gave {t.name} of shape {t.shape}")
        self._tensors.extend(ret)
        return ret

    def queue_runners(self) -> list[Any]:
        """The graph's queue runners the tensors built so far read from."""
        if not self._tensors:
            return []
        g = self._tensors[0].graph
        return _queue_runners_feeding(self._tensors, g.get_collection(tf1.GraphKeys.QUEUE_RUNNERS))

    def _start_queue_runners(self, sess: Any) -> tuple[Any, list[Any]]:
        coord = tf1.train.Coordinator()
        threads: list[Any] = []
        runners = self.queue_runners()
        for qr in runners:
            threads.extend(qr.create_threads(sess, coord=coord, daemon=True, start=True))
        self.queue_runner_threads.extend(threads)
        if runners:
            logger.info(f"{self}: started {len(runners)} queue runner(s) with {len(threads)} thread(s)")
        return coord, threads

    def _stop_queue_runners(self, coord: Any, threads: list[Any]) -> None:
        coord.request_stop()
        try:
            coord.join(threads, stop_grace_period_secs=10, ignore_live_threads=True)
        except (tf.errors.CancelledError, tf.errors.OutOfRangeError):
            pass

    def _get_callbacks(self) -> list[Callback]:
        return [_QueueRunnerCallback(self)]


class DummyConstantInput(TensorInput):
    """Constant zero tensors of given shapes (to measure speed without input cost).

    :param shapes: one fully-defined shape per input of the signature.
    """

    def __init__(self, shapes: Sequence[Sequence[int]]) -> None:
        self.shapes = [list(s) for s in shapes]
        for shp in self.shapes:
            if any(d is None or int(d) < 0 for d in shp):
                raise ValueError(f"DummyConstantInput needs fully-defined shapes, got {self.shapes}")
        super().__init__(self._zeros)

    def _setup(self, input_signature: list[Any]) -> None:
        if len(self.shapes) != len(input_signature):
            raise ValueError(f"DummyConstantInput: {len(self.shapes)} shapes for {len(input_signature)} inputs "
                             f"({[s.name for s in input_signature]})")
        super()._setup(input_signature)

    def _zeros(self) -> list[Any]:
        from trainbus.tfutils.tower import get_current_tower_context

        ctx = get_current_tower_context()
        idx = getattr(ctx, "index", 0)
        return [tf.zeros(shape, dtype=s.dtype, name=f"dummy-{s.name}-{idx}")
                for shape, s in zip(self.shapes, self._spec)]

    def _get_callbacks(self) -> list[Callback]:
        return []
