"""Input sources: how a trainer's tower gets its input tensors.

``FeedInput`` feeds placeholders from a DataFlow (merged into the step's single
``Session.run``), ``QueueInput`` fills a TF queue from a DataFlow in a thread,
``BatchQueueInput`` batches single datapoints in such a queue, ``StagingInput`` prefetches
another input source into a ``StagingArea``, ``TFDatasetInput`` reads a ``tf.data.Dataset``,
``TensorInput`` takes tensors from a function (starting the queue runners they need),
``ZMQInput`` receives datapoints from a ZMQ endpoint and ``DummyConstantInput`` produces
constant zeros.

Whatever the source, the graph has a placeholder named after each input of the signature
(``x:0``, ``label:0``) once the source is set up: it is what the model reads under
``FeedInput``, and a name to feed by hand under the others.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import tensorflow as tf

from trainbus.callbacks.base import Callback
from trainbus.dataflow import dataflow_len, is_dataflow, repeat_forever
from trainbus.tfutils.common import get_op_tensor_name
from trainbus.tfutils.dependency import dependency_of_fetches
from trainbus.tfutils.tower import _to_spec
from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["InputSource", "PlaceholderInput", "FeedInput", "FeedfreeInput", "QueueInput", "BatchQueueInput",
           "StagingInput", "TFDatasetInput", "DummyConstantInput", "TensorInput", "ZMQInput", "ProxyInputSource",
           "remap_input_source", "build_or_reuse_placeholder"]


def build_or_reuse_placeholder(spec: Any) -> Any:
    """The placeholder named after ``spec`` (a ``tf.TensorSpec``) in the default graph: the
    existing one when the graph has a placeholder of that name and a compatible dtype and
    shape, else a new one (created outside any name scope, so its name is ``spec.name``)."""
    spec = _to_spec(spec)
    g = tf1.get_default_graph()
    try:
        op = g.get_operation_by_name(spec.name)
    except KeyError:
        op = None
    if op is not None:
        if op.type != "Placeholder":
            raise ValueError(f"the graph has an op {spec.name!r} of type {op.type}, but the input {spec.name!r} of the "
                             "input signature needs a placeholder of that name; rename that op or the input")
        t = op.outputs[0]
        if t.dtype != spec.dtype or not spec.shape.is_compatible_with(t.shape):
            raise ValueError(f"the graph has a placeholder {t.name!r} of {t.dtype.name}{t.shape}, incompatible with "
                             f"the input signature's {spec.dtype.name}{spec.shape}; give one of them another name")
        if t.shape.rank == spec.shape.rank and (t.shape.rank is None or t.shape.as_list() == spec.shape.as_list()):
            return t
        # compatible but of another shape: this tower gets a placeholder of its own
    with tf1.name_scope(None):
        return tf1.placeholder(spec.dtype, shape=spec.shape, name=spec.name)


_placeholder = build_or_reuse_placeholder


class InputSource:
    """Base class of input sources. ``setup(input_signature)`` builds what is needed and
    returns the callbacks the trainer must run; ``get_input_tensors()`` gives the tensors."""

    _name_scope: str | None = None
    _setup_done = False

    def setup(self, input_signature: Sequence[Any]) -> list[Callback]:
        """Build the input pipeline for ``input_signature`` (a list of ``tf.TensorSpec``);
        returns the callbacks to register with the trainer. Called once."""
        if self._setup_done:
            raise RuntimeError(f"{self} was already set up; an InputSource can be used by one trainer")
        self._input_signature = [_to_spec(s) for s in input_signature]
        self._setup(self._input_signature)
        # every input source leaves the signature's placeholders in the graph, so that
        # graph.get_tensor_by_name('x:0') works whatever the model reads from
        self._signature_placehdrs = [build_or_reuse_placeholder(s) for s in self._input_signature]
        self._setup_done = True
        return self.get_callbacks()

    @property
    def input_placeholders(self) -> list[Any]:
        """The placeholders named after the input signature (after :meth:`setup`)."""
        if not self._setup_done:
            raise RuntimeError(f"{self}: input_placeholders exist after setup(input_signature)")
        return list(self._signature_placehdrs)

    def setup_done(self) -> bool:
        return self._setup_done

    def _setup(self, input_signature: list[Any]) -> None:
        """Build graph parts of the input (placeholders, queues)."""

    def get_input_tensors(self) -> list[Any]:
        """The input tensors, in the order of the signature (call inside a tower)."""
        return self._get_input_tensors()

    def _get_input_tensors(self) -> list[Any]:
        raise TypeError(f"{type(self).__name__} must implement _get_input_tensors()")

    def get_callbacks(self) -> list[Callback]:
        """Callbacks that keep this input running (started/stopped with training)."""
        cbs = self._get_callbacks()
        for cb in cbs:
            cb.set_chief_only(False)
        return cbs

    def _get_callbacks(self) -> list[Callback]:
        return []

    def reset_state(self) -> None:
        """Reinitialize the input (called before each run over it)."""

    def size(self) -> int:
        """Number of datapoints (steps) in one pass."""
        raise ValueError(f"{self} has no known size")

    def failure(self) -> BaseException | None:
        """The exception that broke the input (e.g. in a feeding thread), if any."""
        return None

    def cached_name_scope(self) -> Any:
        name = self._name_scope or type(self).__name__
        return tf1.name_scope(name + "/")

    def __str__(self) -> str:
        return type(self).__name__


class PlaceholderInput(InputSource):
    """Just placeholders, fed by whoever runs the graph."""

    def _setup(self, input_signature: list[Any]) -> None:
        self._all_placehdrs = [_placeholder(s) for s in input_signature]

    def _get_input_tensors(self) -> list[Any]:
        return self._all_placehdrs


class FeedfreeInput(InputSource):
    """Base of the input sources whose tensors need no feed (queues, datasets, tensors):
    the training step runs without a ``feed_dict``."""


class _FeedSourceCallback(Callback):
    """Installs a FeedInput as the feed source of the trainer's hooked session."""

    def __init__(self, src: FeedInput) -> None:
        self._src = src

    def _before_train(self) -> None:
        self._src.reset_state()
        self.trainer.hooked_sess.set_feed_source(*self._src.feed_source())

    def __str__(self) -> str:
        return "FeedInputCallback"


class FeedInput(InputSource):
    """Feed placeholders with datapoints of a DataFlow, one per ``hooked_sess.run``.

    The feed goes into the same ``Session.run`` as the step (no extra hook call).

    :param ds: the DataFlow (anything with ``__iter__``/``reset_state``).
    :param infinite: iterate the dataflow again when it ends.
    """

    def __init__(self, ds: Any, infinite: bool = True) -> None:
        if not is_dataflow(ds):
            raise TypeError(f"FeedInput needs a DataFlow (with __iter__ and reset_state), got {ds!r}")
        self.ds = ds
        self._infinite = infinite
        self._iter: Any = None

    def size(self) -> int:
        return dataflow_len(self.ds)

    def _setup(self, input_signature: list[Any]) -> None:
        self._all_placehdrs = [_placeholder(s) for s in input_signature]

    def _get_input_tensors(self) -> list[Any]:
        return self._all_placehdrs

    def reset_state(self) -> None:
        self.ds.reset_state()
        self._iter = repeat_forever(self.ds) if self._infinite else iter(self.ds)

    def next_feed(self) -> tuple:
        """The next datapoint, as a tuple aligned with the placeholders."""
        if self._iter is None:
            self.reset_state()
        try:
            dp = next(self._iter)
        except StopIteration:
            raise tf.errors.OutOfRangeError(None, None, "FeedInput: the dataflow is exhausted") from None
        if len(dp) != len(self._all_placehdrs):
            raise ValueError(f"FeedInput: a datapoint has {len(dp)} components but the model has "
                             f"{len(self._all_placehdrs)} inputs ({[p.op.name for p in self._all_placehdrs]})")
        return tuple(dp)

    def feed_source(self) -> tuple[list[Any], Callable[[], tuple]]:
        """``(placeholders, next_values)`` for ``HookedSession.set_feed_source``."""
        return self._all_placehdrs, self.next_feed

    def _get_callbacks(self) -> list[Callback]:
        return [_FeedSourceCallback(self)]


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


class _ZMQPull:
    """A DataFlow over a ZMQ PULL socket: datapoints serialized by
    :func:`trainbus.utils.serialize.dumps` (what ``send_dataflow_zmq`` pushes). Infinite; the
    socket lives in the thread that iterates, and iteration ends soon after :meth:`stop`."""

    def __init__(self, end_point: str, hwm: int, bind: bool) -> None:
        self.end_point = end_point
        self.hwm = hwm
        self.bind = bind
        self._stop_evt = threading.Event()

    def reset_state(self) -> None:
        self._stop_evt.clear()

    def stop(self) -> None:
        self._stop_evt.set()

    def __iter__(self) -> Any:
        import zmq

        from trainbus.utils.serialize import loads

        ctx = zmq.Context()
        sock = ctx.socket(zmq.PULL)
        sock.set_hwm(self.hwm)
        try:
            try:
                sock.bind(self.end_point) if self.bind else sock.connect(self.end_point)
            except zmq.ZMQError as exc:
                verb = "bind to" if self.bind else "connect to"
                raise OSError(f"ZMQInput: cannot {verb} {self.end_point!r}: {exc}. Use an endpoint like "
                              "'tcp://127.0.0.1:5555' or 'ipc:///tmp/name', bound on exactly one side") from exc
            poller = zmq.Poller()
            poller.register(sock, zmq.POLLIN)
            while not self._stop_evt.is_set():
                if poller.poll(100):
                    yield loads(sock.recv(copy=False).buffer)
        finally:
            sock.close(linger=0)
            ctx.term()

    def __len__(self) -> int:
        raise TypeError("a ZMQ stream has no length")


class ZMQInput(QueueInput):
    """Receive datapoints from a ZMQ endpoint (what ``send_dataflow_zmq`` serves, serialized by
    :mod:`trainbus.utils.serialize`) and feed them to the model through a TF queue.

    tensorpack reads the socket with its compiled ``zmq_ops``; here a background thread pulls
    with pyzmq and enqueues, so the model still reads from a queue.

    :param end_point: the ZMQ endpoint, e.g. ``'tcp://127.0.0.1:5555'`` or ``'ipc:///tmp/train'``.
    :param hwm: the socket's high-water mark.
    :param bind: bind the endpoint (the senders connect), else connect to it.
    """

    def __init__(self, end_point: str, hwm: int, bind: bool = True) -> None:
        if not isinstance(end_point, str) or "://" not in end_point:
            raise ValueError(f"ZMQInput: end_point must be a ZMQ endpoint such as 'tcp://127.0.0.1:5555', "
                             f"got {end_point!r}")
        self._end_point = end_point
        self._hwm = int(hwm)
        self._bind = bool(bind)
        self._pull = _ZMQPull(end_point, self._hwm, self._bind)
        super().__init__(self._pull)

    def size(self) -> int:
        raise ValueError("ZMQInput reads an endless stream and has no size; pass steps_per_epoch explicitly")

    def _stop(self) -> None:
        if self.thread is not None:
            self.thread.stop()      # first: the pull loop ending now is not a failure
        self._pull.stop()
        super()._stop()

    def to_dataset(self, input_signature: Sequence[Any]) -> Any:
        """A ``tf.data.Dataset`` of the datapoints received at the endpoint (a new socket).

        :param input_signature: a ``tf.TensorSpec`` per component of a datapoint.
        """
        specs = tuple(_to_spec(s) for s in input_signature)
        pull = _ZMQPull(self._end_point, self._hwm, self._bind)
        return tf.data.Dataset.from_generator(lambda: (tuple(dp) for dp in pull), output_signature=specs)

    def __str__(self) -> str:
        return f"ZMQInput({self._end_point})"


class _StagingCallback(Callback):
    def __init__(self, src: StagingInput) -> None:
        self._src = src

    def _setup_graph(self) -> None:
        self._stage = tf1.group(*self._src._stage_ops)
        self._check = self._src._unstage_ops[0][0] if self._src._unstage_ops else None
        self._args = tf1.train.SessionRunArgs(fetches=self._stage)

    def _before_train(self) -> None:
        for _ in range(self._src._nr_stage):
            self.trainer.sess.run(self._stage)

    def _before_run(self, ctx: Any) -> Any:
        if self._check is None or dependency_of_fetches(ctx.original_args.fetches, self._check):
            return self._args
        return None

    def __str__(self) -> str:
        return "StagingInputCallback"


class StagingInput(FeedfreeInput):
    """Prefetch another input source into a ``StagingArea`` (``nr_stage`` elements ahead).

    :param input: the InputSource to prefetch from.
    :param nr_stage: how many elements to prefetch before training starts.
    :param device: where to put the staging area (default: the tower's device).
    """

    def __init__(self, input: InputSource, nr_stage: int = 1, device: str | None = None) -> None:
        if not isinstance(input, InputSource):
            raise TypeError(f"StagingInput wraps an InputSource, got {input!r}")
        self._input = input
        self._nr_stage = int(nr_stage)
        self._device = device
        self._stage_ops: list[Any] = []
        self._unstage_ops: list[Any] = []

    def size(self) -> int:
        return self._input.size()

    def failure(self) -> BaseException | None:
        return self._input.failure()

    def _setup(self, input_signature: list[Any]) -> None:
        self._input_callbacks = self._input.setup(input_signature)

    def _get_input_tensors(self) -> list[Any]:
        from tensorflow.python.ops.data_flow_ops import StagingArea

        inputs = self._input.get_input_tensors()
        dev = self._device
        ctx = tf1.device(dev) if dev is not None else _null()
        with ctx, self.cached_name_scope():
            area = StagingArea([x.dtype for x in inputs], shapes=None)
            self._stage_ops.append(area.put(inputs))
            outputs = area.get()
            if isinstance(outputs, tf.Tensor):
                outputs = [outputs]
            for vin, vout in zip(inputs, outputs):
                vout.set_shape(vin.shape)
            self._unstage_ops.append(outputs)
            return outputs

    def _get_callbacks(self) -> list[Callback]:
        return list(self._input_callbacks) + [_StagingCallback(self)]


class _InitCallback(Callback):
    def __init__(self, op_fn: Callable[[], Any], label: str) -> None:
        self._op_fn = op_fn
        self._label = label

    def _before_train(self) -> None:
        self.trainer.sess.run(self._op_fn())

    def __str__(self) -> str:
        return self._label


class TFDatasetInput(FeedfreeInput):
    """Read inputs from a ``tf.data.Dataset`` whose elements match the input signature.

    :param dataset: a dataset, or a function returning one (called in the trainer's graph;
        use a function when eager execution is on).
    """

    def __init__(self, dataset: Any) -> None:
        if not (isinstance(dataset, tf.data.Dataset) or callable(dataset)):
            raise TypeError(f"TFDatasetInput needs a tf.data.Dataset or a function returning one, got {dataset!r}")
        self._dataset = dataset
        self._iterator: Any = None

    def _setup(self, input_signature: list[Any]) -> None:
        ds = self._dataset if isinstance(self._dataset, tf.data.Dataset) else self._dataset()
        spec = ds.element_spec
        specs = list(spec) if isinstance(spec, (tuple, list)) else [spec]
        if len(specs) != len(input_signature):
            raise ValueError(f"TFDatasetInput: the dataset's elements have {len(specs)} components but the model has "
                             f"{len(input_signature)} inputs ({[s.name for s in input_signature]})")
        for s, want in zip(specs, input_signature):
            if s.dtype != want.dtype:
                raise ValueError(f"TFDatasetInput: input {want.name!r} wants {want.dtype.name} but the dataset gives "
                                 f"{s.dtype.name}")
        self._iterator = tf1.data.make_initializable_iterator(ds)

    def _get_input_tensors(self) -> list[Any]:
        ret = self._iterator.get_next()
        ret = list(ret) if isinstance(ret, (tuple, list)) else [ret]
        for t, s in zip(ret, self._input_signature):
            t.set_shape(t.shape.merge_with(s.shape))
        return ret

    def _get_callbacks(self) -> list[Callback]:
        return [_InitCallback(lambda: self._iterator.initializer, "TFDatasetInputCallback")]

    def size(self) -> int:
        raise ValueError("TFDatasetInput has no known size; pass steps_per_epoch explicitly")

    @staticmethod
    def dataflow_to_dataset(df: Any, types: Sequence[Any]) -> Any:
        """A ``tf.data.Dataset`` of the (list) datapoints of ``df``, one tuple of components of
        ``types`` each; calls ``df.reset_state()``. Finite when ``df`` is: add ``.repeat()`` to train
        on it for several epochs.

        :param df: a DataFlow producing lists (anything with ``__iter__`` and ``reset_state``).
        :param types: the ``tf.DType`` of every component.
        """
        if not is_dataflow(df):
            raise TypeError(f"TFDatasetInput.dataflow_to_dataset needs a DataFlow, got {df!r}")
        if not isinstance(types, (list, tuple)) or not types:
            raise TypeError(f"TFDatasetInput.dataflow_to_dataset: types must be a list of tf.DType, one per "
                            f"component, got {types!r}")
        df.reset_state()
        n = len(types)

        def generate() -> Any:
            for dp in df:
                if len(dp) != n:
                    raise ValueError(f"TFDatasetInput.dataflow_to_dataset: a datapoint of {type(df).__name__} has "
                                     f"{len(dp)} components but {n} types were given")
                yield tuple(dp)

        sig = tuple(tf.TensorSpec(None, tf.as_dtype(t)) for t in types)
        return tf.data.Dataset.from_generator(generate, output_signature=sig)


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


class ProxyInputSource(InputSource):
    """An input source that hands every call to another one (``self._input``)."""

    def __init__(self, input: InputSource) -> None:
        if not isinstance(input, InputSource):
            raise TypeError(f"{type(self).__name__} wraps an InputSource, got {input!r}")
        self._input = input

    def _get_input_tensors(self) -> list[Any]:
        return self._input.get_input_tensors()

    def _setup(self, input_signature: list[Any]) -> None:
        self._input_callbacks = self._input.setup(input_signature)

    def _get_callbacks(self) -> list[Callback]:
        return list(self._input_callbacks)

    def size(self) -> int:
        return self._input.size()

    def reset_state(self) -> None:
        self._input.reset_state()

    def failure(self) -> BaseException | None:
        return self._input.failure()


def remap_input_source(input: InputSource, names: Sequence[str]) -> InputSource:
    """Use ``input``, which produces only some of the model's inputs (``names``, in its own
    order), for a model with more inputs: the other inputs stay placeholders (to be fed, or
    left unused by the tower).

    ``remap_input_source(FeedInput(ds), ['image', 'label'])`` gives an input source whose
    dataflow feeds ``image`` and ``label`` whatever other inputs the model has.

    :param input: the InputSource producing the tensors of ``names``.
    :param names: the model input names ``input`` produces, in the order it produces them.
    """
    names = [get_op_tensor_name(n)[0] for n in names]
    if not names or len(set(names)) != len(names):
        raise ValueError(f"remap_input_source: names must be distinct input names, got {names!r}")

    class _Remapped(ProxyInputSource):
        def _setup(self, input_signature: list[Any]) -> None:
            self._all_placehdrs = [build_or_reuse_placeholder(s) for s in input_signature]
            by_name = {s.name: s for s in input_signature}
            missing = [n for n in names if n not in by_name]
            if missing:
                raise ValueError(f"remap_input_source: {missing} are not inputs of the model; its inputs are "
                                 f"{list(by_name)}")
            self._input_callbacks = self._input.setup([by_name[n] for n in names])

        def _get_input_tensors(self) -> list[Any]:
            produced = self._input.get_input_tensors()
            if len(produced) != len(names):
                raise ValueError(f"remap_input_source: {self._input} produced {len(produced)} tensors for {names}")
            ret = list(self._all_placehdrs)
            pos = {s.name: i for i, s in enumerate(self._input_signature)}
            for n, t in zip(names, produced):
                ret[pos[n]] = t
            return ret

        def __str__(self) -> str:
            return f"Remapped({self._input}, {names})"

    return _Remapped(input)


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: Any) -> bool:
        return False
