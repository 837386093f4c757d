"""Input sources: how a trainer's tower gets its input tensors.

``FeedInput`` feeds placeholders from a DataFlow (merged into the step's single
``Session.run``), ``QueueInput`` fills a TF queue from a DataFlow in a thread,
``StagingInput`` prefetches another input source into a ``StagingArea``, ``TFDatasetInput``
reads a ``tf.data.Dataset`` and ``DummyConstantInput`` produces constant zeros.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import tensorflow as tf

from trainbus.callbacks.base import Callback
from trainbus.dataflow import dataflow_len, is_dataflow, repeat_forever
from trainbus.tfutils.dependency import dependency_of_fetches
from trainbus.tfutils.tower import _to_spec
from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["InputSource", "PlaceholderInput", "FeedInput", "QueueInput", "StagingInput", "TFDatasetInput",
           "DummyConstantInput"]


def _placeholder(spec: Any) -> Any:
    """The placeholder named after ``spec``: reused if the graph already has it."""
    g = tf1.get_default_graph()
    try:
        op = g.get_operation_by_name(spec.name)
        if op.type == "Placeholder":
            t = op.outputs[0]
            if t.dtype == spec.dtype and t.shape.is_compatible_with(spec.shape):
                return t
    except KeyError:
        pass
    return tf1.placeholder(spec.dtype, shape=spec.shape, name=spec.name)


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
        self._setup_done = True
        return self.get_callbacks()

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
                run_enqueue(*dp)
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


class QueueInput(FeedInput):
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
        with self.cached_name_scope():
            self._all_placehdrs = [tf1.placeholder(s.dtype, shape=s.shape, name=s.name) for s in input_signature]
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


class StagingInput(InputSource):
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


class TFDatasetInput(InputSource):
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
                raise ValueError(f"TFDatasetInput: input {want.name!r} wants {want.dtype.name} but the dataset gives {s.dtype.name}")
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


class DummyConstantInput(InputSource):
    """Constant zero tensors of given shapes (to measure speed without input cost).

    :param shapes: one shape per input of the signature.
    """

    def __init__(self, shapes: Sequence[Sequence[int]]) -> None:
        self.shapes = [list(s) for s in shapes]

    def _setup(self, input_signature: list[Any]) -> None:
        if len(self.shapes) != len(input_signature):
            raise ValueError(f"DummyConstantInput: {len(self.shapes)} shapes for {len(input_signature)} inputs")
        self._tensors = None

    def _get_input_tensors(self) -> list[Any]:
        return [tf.zeros(shape, dtype=s.dtype, name=f"dummy-{s.name}") for shape, s in zip(self.shapes, self._input_signature)]


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: Any) -> bool:
        return False
