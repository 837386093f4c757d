"""Queue inputs: a background thread enqueues datapoints of a DataFlow into a TF queue the
model reads from (:class:`QueueInput`), or reads batches of single datapoints from
(:class:`BatchQueueInput`)."""

from __future__ import annotations

import threading
import time
from typing import Any

import tensorflow as tf

from trainbus.callbacks.base import Callback
from trainbus.dataflow import dataflow_len, repeat_forever
from trainbus.input_source.base import FeedfreeInput, build_or_reuse_placeholder, explain_datapoint, inputs_of
from trainbus.input_source.feed import FeedInput
from trainbus.tfutils.sesscreate import INIT_WITH_VARIABLES, not_counted
from trainbus.utils import logger
from trainbus.utils.concurrency import add_wait_interrupt, remove_wait_interrupt, wait_interrupted

tf1 = tf.compat.v1


def _datapoint_mismatch(who: str, ds: Any, dp: Any, placehdrs: list[Any]) -> str | None:
    """What is wrong with datapoint ``dp`` against the input placeholders (number of components,
    dtypes, shapes), naming the input source ``who``, the dataflow and the component; None when
    nothing visible is wrong. Called only once an enqueue failed."""
    return explain_datapoint(who, ds, dp, inputs_of(placehdrs))


def _as_error(e: BaseException, ds: Any) -> Exception:
    """An ``Exception`` for what ended the input thread (``DataFlowTerminated`` is a
    ``BaseException``, which a command line would show as a bare traceback)."""
    err = RuntimeError(f"QueueInput: the dataflow {type(ds).__name__} stopped producing data: "
                       f"{type(e).__name__}: {e}")
    err.__cause__ = e
    return err


class _StopWatch(threading.Thread):
    """Closes the queue once the trainer was asked to stop (a signal): a step waiting on an empty
    queue (a stalled dataflow) then ends at once, and the stop stays graceful (every
    ``after_train`` runs, the final checkpoint is written). Wakes twice a second; nothing per step."""

    def __init__(self, thread: _EnqueueThread, trainer: Any) -> None:
        super().__init__(name="QueueInput-StopWatch", daemon=True)
        self._thread = thread
        self._trainer = trainer
        self._done = threading.Event()

    def stop_requested(self) -> bool:
        return bool(getattr(self._trainer, "stop_requested", False))

    def run(self) -> None:
        while not self._done.wait(0.5):
            if self.stop_requested():
                t = self._thread
                t.stop()  # what the dataflow raises from now on is no failure
                try:
                    t.sess.run(t.close_op)
                except Exception:  # noqa: BLE001 - the session may be closing already
                    pass
                return

    def stop(self) -> None:
        self._done.set()
        if self is not threading.current_thread():
            self.join(timeout=5)


class _EnqueueThread(threading.Thread):
    #: the input source, as its errors name it
    who = "QueueInput"

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
        self.skip = 0  # datapoints to pass over before the first enqueue

    def run(self) -> None:
        # this thread's requests (enqueues of fed placeholders, closing the queue) change no
        # variable: the trainer still knows the global step without reading it
        with not_counted(self.sess):
            self._enqueue_all()

    def _enqueue_all(self) -> None:
        try:
            it = repeat_forever(self.ds)
            for _ in range(self.skip):
                next(it)
            run_enqueue = self._enqueue_function()
            n_inputs = len(self.placehdrs)
            while not self._stop_evt.is_set():
                dp = next(it)
                try:
                    if len(dp) != n_inputs:  # the callable would drop an extra component without a word
                        raise ValueError(f"a datapoint of {len(dp)} components for {n_inputs} inputs")
                    run_enqueue(dp)
                except (ValueError, TypeError) as e:
                    why = _datapoint_mismatch(self.who, self.ds, dp, self.placehdrs)
                    if why is None:
                        raise
                    raise ValueError(why) from e
        except (tf.errors.CancelledError, tf.errors.OutOfRangeError):
            pass
        except BaseException as e:  # noqa: BLE001 - handed to the trainer, which raises it (failure())
            # a dead, failed or stalled dataflow worker included (DataFlowTerminated is no Exception)
            if not self._stop_evt.is_set() and not wait_interrupted():
                if not isinstance(e, Exception):
                    e = _as_error(e, self.ds)
                self.exception = e
                logger.warning(f"QueueInput: the input thread stopped with {type(e).__name__}; the queue is closed "
                               "and training stops with that error")
        finally:
            try:
                if not self.sess._closed:
                    self.sess.run(self.close_op)
            except Exception:  # noqa: BLE001 - the session may be closing already
                pass

    def _enqueue_function(self) -> Any:
        """``f(datapoint)``: one enqueue. A TensorFlow callable fed by position, with the values
        converted and shape-checked as ``Session.run`` does (``session.fastrun``): the callable
        ``Session.make_callable`` makes with feeds is a whole ``Session.run`` per call, 5 to 6
        times the cost of an enqueue; that one where the session cannot make a callable."""
        from trainbus.session.fastrun import make_plain_step

        enqueue = make_plain_step(self.sess, self.op, self.placehdrs, None)
        if enqueue is not None:
            return enqueue
        run = self.sess.make_callable(self.op, feed_list=self.placehdrs)
        return lambda dp: run(*dp)

    def stop(self) -> None:
        self._stop_evt.set()

    def stopped(self) -> bool:
        return self._stop_evt.is_set()


class _QueueCallback(Callback):
    def __init__(self, src: QueueInput) -> None:
        self._src = src

    def _before_train(self) -> None:
        self._src._start(self.trainer.sess)
        self._watch = _StopWatch(self._src.thread, self.trainer)
        self._watch.start()
        add_wait_interrupt(self._watch.stop_requested)

    def _after_train(self) -> None:
        watch = getattr(self, "_watch", None)
        if watch is not None:
            watch.stop()
        try:
            self._src._stop()  # an input thread waiting on a stalled dataflow gives up at once
        finally:
            if watch is not None:
                remove_wait_interrupt(watch.stop_requested)

    def __str__(self) -> str:
        return "QueueInputCallback"


class _QueueSizeStat(Callback):
    """Keeps an exponential moving average (decay 0.5, zero-debiased) of the number of datapoints
    waiting in the queue, updated at every step (in the step's own ``Session.run``), and
    summarized as the scalar ``QueueInput/queue_size`` (written by ``MergeAllSummaries`` with the
    other summaries): a queue near 0 means the model waits for the dataflow. Its state is in two
    variables of no collection, so checkpoints do not depend on the input source. Their
    initializer is run by ``NewSessionCreator`` with the variables' (``INIT_WITH_VARIABLES``),
    else by this callback before training."""

    DECAY = 0.5

    def __init__(self, src: QueueInput) -> None:
        self._src = src
        self._args: Any = None

    def _setup_graph(self) -> None:
        from trainbus.tfutils import _queue_size_graph

        graph = tf1.get_default_graph()
        built = None
        if _queue_size_graph.usable(graph, self._src._size_op):
            # the nodes _build() makes, imported at once (see _queue_size_graph)
            built = _queue_size_graph.build(graph, self._src.name_scope_name(), self._src._size_op, self.DECAY)
        self._init, ema = built if built is not None else self._build()
        self._args = tf1.train.SessionRunArgs(fetches=ema.op)
        graph.add_to_collection(INIT_WITH_VARIABLES, self._init)

    def _build(self) -> tuple[Any, Any]:
        """(the initializer of the average's variables, the tensor updating it), made with
        TensorFlow's constructors."""
        d = self.DECAY
        # in no collection: neither saved nor initialized with the model's variables (a worker of a
        # distributed job has no local variables to initialize)
        with tf1.name_scope(None), self._src.cached_name_scope():
            size = tf.cast(self._src._size_op, tf.float32, name="queue_size")
            biased = tf1.Variable(0.0, trainable=False, collections=[], name="queue_size_biased")
            count = tf1.Variable(0.0, trainable=False, collections=[], name="queue_size_count")
            init = tf1.variables_initializer([biased, count], name="queue_size_init")
            new_biased = tf1.assign(biased, biased * d + size * (1.0 - d))
            new_count = tf1.assign_add(count, 1.0)
            ema = tf.identity(new_biased / (1.0 - tf.pow(d, new_count)), name="queue_size_EMA")
        with tf1.name_scope(None):
            tf1.summary.scalar(size.op.name + "-summary", ema)
        return init, ema

    def _before_train(self) -> None:
        sess = self.trainer.sess
        if self._init.name not in getattr(sess, "ran_with_variables", ()):
            sess.run(self._init)  # a session creator other than NewSessionCreator made the session

    def _before_run(self, ctx: Any) -> Any:
        return self._args

    def __str__(self) -> str:
        return "QueueInputSizeStat"


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
            self.thread.who = self.describe()
            self._size_op = self.queue.size()
            # takes one element out when training ends: an enqueue blocked on the full queue
            # completes and the thread sees the stop, so no enqueue is left to cancel
            self._drain_op = self.queue.dequeue(name="input_drain")

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
        self.thread.skip, self._skip = self._skip, 0
        self.thread.start()

    def _stop(self) -> None:
        t = self.thread
        if t is None or not t.is_alive():
            return
        t.stop()
        # let a blocked enqueue finish (TensorFlow logs "Local rendezvous is aborting ...
        # CANCELLED" for every enqueue a close cancels); a thread waiting on its dataflow
        # instead is not waited for long: the close below ends it
        deadline = time.monotonic() + 1.0
        try:
            while t.is_alive() and time.monotonic() < deadline:
                if t.sess.run(self._size_op) > 0:
                    t.sess.run(self._drain_op)
                t.join(timeout=0.02)
        except Exception:  # noqa: BLE001 - the session may be closing already
            pass
        try:
            t.sess.run(t.close_op)
        except Exception:  # noqa: BLE001
            pass
        t.join(timeout=10)

    def failure(self) -> BaseException | None:
        """What ended the input thread (a dataflow error, a dead, failing or stalled worker), or
        None when it stopped because training stopped; the trainer raises it when the queue
        runs dry (``OutOfRangeError``)."""
        t = self.thread
        if t is None:
            return None
        if t.exception is None and t.is_alive() and not t.stopped():
            t.join(timeout=1.0)  # the queue was closed by the thread, which is still recording why
        return t.exception

    def _get_callbacks(self) -> list[Callback]:
        return [_QueueCallback(self), _QueueSizeStat(self)]

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

    def skip_datapoints(self, n: int) -> bool:
        return False  # its datapoints are single samples, batched in the graph: not one per step

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
            self.thread.who = self.describe()
            self._size_op = self.queue.size()
            # takes one element out when training ends: an enqueue blocked on the full queue
            # completes and the thread sees the stop, so no enqueue is left to cancel
            self._drain_op = self.queue.dequeue(name="input_drain")

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
