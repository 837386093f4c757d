"""Queue inputs: a background thread enqueues datapoints of a DataFlow into a TF queue the
model reads from (:class:`QueueInput`), or reads batches of single datapoints from
(:class:`BatchQueueInput`)."""

from __future__ import annotations

import threading
from typing import Any

import tensorflow as tf

from trainbus.callbacks.base import Callback
from trainbus.dataflow import dataflow_len, repeat_forever
from trainbus.input_source.base import FeedfreeInput, build_or_reuse_placeholder
from trainbus.input_source.feed import FeedInput
from trainbus.utils import logger

tf1 = tf.compat.v1


def _datapoint_mismatch(who: str, ds: Any, dp: Any, placehdrs: list[Any]) -> str | None:
    """What is wrong with datapoint ``dp`` against the input placeholders (number of components,
    shapes), naming the dataflow and the component; None when nothing visible is wrong."""
    import numpy as np

    name = type(ds).__name__
    if len(dp) != len(placehdrs):
        return (f"{who}: the dataflow {name} produced a datapoint of {len(dp)} components, but the model has "
                f"{len(placehdrs)} inputs ({[p.op.name for p in placehdrs]}); make each datapoint a list with one "
                "component per input, in the order of inputs()")
    for k, (value, ph) in enumerate(zip(dp, placehdrs)):
        try:
            arr = np.asarray(value)
        except Exception:  # noqa: BLE001 - described below
            return f"{who}: component {k} ({ph.op.name!r}) of a datapoint from {name} is not array-like: {value!r:.80}"
        if not ph.shape.is_compatible_with(arr.shape):
            return (f"{who}: component {k} ({ph.op.name!r}) of a datapoint from the dataflow {name} has shape "
                    f"{tuple(arr.shape)}, but the input signature expects {ph.shape}; make the dataflow produce "
                    "that shape (e.g. batch it) or change the TensorSpec in inputs()")
    return None


class _EnqueueThread(threading.Thread):
    def __init__(self, queue: Any, ds: Any, placehdrs: list[Any]) -> None:
        super().__init__(name="QueueInput-EnqueueThread", daemon=True)
        self.queue = queue
        self.ds = ds
        self.placehdrs = placehdrs
        self.op = queue.enqueue(placehdrs)
        self.close_op = queue.close(cancel_pending_enqueues=True)
        self._stop_evt = threading.Event()
        self.exception: BaseException | None = None
        self.sess: Any = None

    def run(self) -> None:
        try:
            it = repeat_forever(self.ds)
            run_enqueue = self.sess.make_callable(self.op, feed_list=self.placehdrs)
            while not self._stop_evt.is_set():
                dp = next(it)
                try:
                    run_enqueue(*dp)
                except (ValueError, TypeError) as e:
                    why = _datapoint_mismatch("QueueInput", self.ds, dp, self.placehdrs)
                    if why is None:
                        raise
                    raise ValueError(why) from e
        except (tf.errors.CancelledError, tf.errors.OutOfRangeError):
            pass
        except Exception as e:  # noqa: BLE001 - handed to the trainer, which re-raises it
            if not self._stop_evt.is_set():
                self.exception = e
                logger.error(f"QueueInput: the input thread failed: {type(e).__name__}: {e}")
        finally:
            try:
                if not self.sess._closed:
                    self.sess.run(self.close_op)
            except Exception:  # noqa: BLE001 - the session may be closing already
                pass

    def stop(self) -> None:
        self._stop_evt.set()

    def stopped(self) -> bool:
        return self._stop_evt.is_set()


class _QueueCallback(Callback):
    def __init__(self, src: QueueInput) -> None:
        self._src = src

    def _before_train(self) -> None:
        self._src._start(self.trainer.sess)

    def _after_train(self) -> None:
        self._src._stop()

    def __str__(self) -> str:
        return "QueueInputCallback"


class QueueInput(FeedInput, FeedfreeInput):
    """Enqueue datapoints from a DataFlow into a TF queue in a background thread; the
    model reads from the queue (so the step does not wait for Python).

    :param ds: the DataFlow.
    :param queue: a ``tf.compat.v1.QueueBase`` to use (default: a ``FIFOQueue`` of 50).
    """

    def __init__(self, ds: Any, queue: Any = None) -> None:
        super().__init__(ds)
        self.queue = queue
        self.thread: _EnqueueThread | None = None

    def _setup(self, input_signature: list[Any]) -> None:
        if not input_signature:
            raise ValueError("QueueInput needs a model with at least one input (the input signature is empty)")
        self._all_placehdrs = [build_or_reuse_placeholder(s) for s in input_signature]
        with self.cached_name_scope():
            if self.queue is None:
                self.queue = tf1.FIFOQueue(50, [p.dtype for p in self._all_placehdrs], name="input_queue")
            self.thread = _EnqueueThread(self.queue, self.ds, self._all_placehdrs)
            self._size_op = self.queue.size()

    def _get_input_tensors(self) -> list[Any]:
        with tf1.device("/cpu:0"), self.cached_name_scope():
            ret = self.queue.dequeue(name="input_deque")
            if isinstance(ret, tf.Tensor):
                ret = [ret]
            for qv, p in zip(ret, self._all_placehdrs):
                qv.set_shape(p.shape)
            return ret

    def _start(self, sess: Any) -> None:
        self.ds.reset_state()
        self.thread.sess = sess
        self.thread.start()

    def _stop(self) -> None:
        t = self.thread
        if t is None or not t.is_alive():
            return
        t.stop()
        try:
            t.sess.run(t.close_op)
        except Exception:  # noqa: BLE001
            pass
        t.join(timeout=10)

    def failure(self) -> BaseException | None:
        return self.thread.exception if self.thread is not None else None

    def _get_callbacks(self) -> list[Callback]:
        return [_QueueCallback(self)]

    def step_feed(self) -> None:
        """None: the model reads from the queue, the step needs no feed."""
        return None


class BatchQueueInput(QueueInput):
    """Enqueue single datapoints from a DataFlow into a TF queue; the model reads batches
    of ``batch_size`` of them (``dequeue_many``).

    :param ds: a DataFlow of single datapoints (no batch dimension).
    :param batch_size: datapoints per batch.
    :param queue: a ``tf.compat.v1.QueueBase`` with fully-defined shapes (default: a
        ``FIFOQueue`` of 3000).
    """

    def __init__(self, ds: Any, batch_size: int, queue: Any = None) -> None:
        super().__init__(ds, queue)
        if isinstance(batch_size, bool) or int(batch_size) != batch_size or int(batch_size) <= 0:
            raise ValueError(f"BatchQueueInput: batch_size must be a positive int, got {batch_size!r}")
        self.batch_size = int(batch_size)

    def size(self) -> int:
        return dataflow_len(self.ds) // self.batch_size

    def _setup(self, input_signature: list[Any]) -> None:
        if not input_signature:
            raise ValueError("BatchQueueInput needs a model with at least one input (the input signature is empty)")
        self.input_placehdrs = [build_or_reuse_placeholder(s) for s in input_signature]
        nobatch = []
        for s in input_signature:
            if s.shape.rank is None or s.shape.rank < 1 or not s.shape[1:].is_fully_defined():
                raise ValueError(f"BatchQueueInput: input {s.name!r} has shape {s.shape}; it needs a batch dimension "
                                 "first and fully-defined other dimensions")
            with tf1.name_scope(None):
                nobatch.append(tf1.placeholder(s.dtype, shape=s.shape[1:], name=f"{s.name}-nobatch"))
        self._all_placehdrs = nobatch
        with self.cached_name_scope():
            if self.queue is None:
                self.queue = tf1.FIFOQueue(3000, [p.dtype for p in nobatch], shapes=[p.shape for p in nobatch],
                                           name="input_queue")
            for shp in self.queue.shapes:
                if not tf.TensorShape(shp).is_fully_defined():
                    raise ValueError(f"BatchQueueInput: the queue's shapes {self.queue.shapes} must be fully defined")
            self.thread = _EnqueueThread(self.queue, self.ds, nobatch)
            self._size_op = self.queue.size()

    def _get_input_tensors(self) -> list[Any]:
        with tf1.device("/cpu:0"), self.cached_name_scope():
            ret = self.queue.dequeue_many(self.batch_size, name="input_deque")
            if isinstance(ret, tf.Tensor):
                ret = [ret]
            for qv, p in zip(ret, self.input_placehdrs):
                shp = p.shape.as_list()
                shp[0] = self.batch_size
                qv.set_shape(shp)
            return ret
