"""RunOp, RunUpdateOps, ProcessTensors, DumpTensors, DumpTensorAsImage, CheckNumerics.

TensorFlow is imported lazily (``trainbus.plugin_api.tf1()``), so collecting
``DEFAULT_CALLBACKS()`` does not import it.
"""

from __future__ import annotations

import io
import os
from typing import Any, Callable, Sequence

import numpy as np

from trainbus.callbacks.base import Callback
from trainbus import plugin_api as _tf
from trainbus.utils import logger
from trainbus.utils.fs import atomic_write_bytes

__all__ = ["RunOp", "RunUpdateOps", "ProcessTensors", "DumpTensors", "DumpTensorAsImage", "CheckNumerics"]


def _logger_dir(who: str) -> str:
    d = logger.get_logger_dir()
    if d is None:
        raise RuntimeError(f"{who} writes under the log directory, but none is set; call "
                           "trainbus.utils.logger.set_logger_dir(dir) (or logger.auto_set_dir()) before training")
    return d


class RunOp(Callback):
    """Run an operation before training, on every trigger (after each epoch by default), and/or
    with every training step.

    :param op: a ``tf.Operation`` (or a tensor, whose op is run), or a function returning one;
        the function is called in ``setup_graph``, after the model's graph has been built.
    :param run_before: run the op once before training.
    :param run_as_trigger: run the op on every ``trigger()`` call.
    :param run_step: run the op with every step, in the same ``Session.run`` as the training op.
    :param verbose: log each time the op runs.

    Example (update a target network every epoch)::

        RunOp(lambda: tf.group(*[t.assign(s) for s, t in pairs], name='update_target'))
    """

    def __init__(self, op: Any, run_before: bool = True, run_as_trigger: bool = True, run_step: bool = False,
                 verbose: bool = False) -> None:
        if not callable(op):
            tf = _tf.tf()
            if not isinstance(op, (tf.Operation, tf.Tensor)):
                raise TypeError(f"{type(self).__name__}: op must be a tf.Operation or a function returning one, "
                                f"got {op!r} of type {type(op).__name__}")
            self.setup_func: Callable[[], Any] = lambda: op
        else:
            self.setup_func = op
        self.run_before = bool(run_before)
        self.run_as_trigger = bool(run_as_trigger)
        self.run_step = bool(run_step)
        self.verbose = bool(verbose)
        self._op: Any = None
        self._fetch: Any = None

    def hooks_used(self) -> frozenset[str]:
        used = set(super().hooks_used())
        if not self.run_before:
            used.discard("before_train")
        if not self.run_as_trigger:
            used.discard("trigger_epoch")
        if not self.run_step:
            used.discard("before_run")
        return frozenset(used)

    def _make_op(self) -> Any:
        tf = _tf.tf()
        op = self.setup_func()
        if isinstance(op, tf.Tensor):
            op = op.op
        if op is not None and not isinstance(op, tf.Operation):
            raise TypeError(f"{self}: the op function returned {op!r} ({type(op).__name__}), not a tf.Operation")
        if op is not None and op.graph is not self.graph:
            raise ValueError(f"{self}: the op {op.name} is not in the trainer's graph")
        return op

    def _setup_graph(self) -> None:
        self._op = self._make_op()
        if self._op is None:  # nothing to run (e.g. an empty collection)
            self._drop_hooks("before_train", "before_run", "trigger_epoch")
            return
        if self.run_step:
            self._fetch = _tf.tf1().train.SessionRunArgs(fetches=self._op)

    def _print(self) -> None:
        if self.verbose:
            logger.info(f"Running Op {self._op.name} ...")

    def _run(self) -> None:
        if self._op is not None:
            self._print()
            self.trainer.sess.run(self._op)

    def _before_train(self) -> None:
        if self.run_before:
            self._run()

    def _trigger(self) -> None:
        if self.run_as_trigger:
            self._run()

    def _before_run(self, ctx: Any) -> Any:
        if self._fetch is not None:
            self._print()
        return self._fetch

    def __str__(self) -> str:
        name = getattr(self._op, "name", None)
        return f"{type(self).__name__}({name})" if name else type(self).__name__


class RunUpdateOps(RunOp):
    """Run the ops of a collection (``tf.GraphKeys.UPDATE_OPS`` by default) with every training
    step, in the same ``Session.run`` as the training op (through ``before_run``). With an empty
    collection it does nothing and costs nothing per step.

    Mind models with several sub-networks: perhaps not all their updates should run every step.
    One of ``DEFAULT_CALLBACKS()``.

    :param collection: the collection of ops to run; default ``tf.GraphKeys.UPDATE_OPS``.
    """

    def __init__(self, collection: str | None = None) -> None:
        if collection is not None and not isinstance(collection, str):
            raise TypeError(f"RunUpdateOps: collection must be a collection name (str) or None, got {collection!r}")
        self._collection = collection
        super().__init__(self._group_collection, run_before=False, run_as_trigger=False, run_step=True)

    def _group_collection(self) -> Any:
        tf = _tf.tf()
        key = self._collection if self._collection is not None else _tf.tf1().GraphKeys.UPDATE_OPS
        label = "UPDATE_OPS" if self._collection is None else key
        items = self.graph.get_collection(key)
        if not items:
            logger.info(f"[RunUpdateOps] collection {label} is empty; nothing to run.")
            return None
        logger.info(f"[RunUpdateOps] applying collection {label} of {len(items)} ops with every step.")
        ops = [x if isinstance(x, tf.Operation) else x.op for x in items]
        with _tf.tf1().name_scope(None):
            return tf.group(*ops, name="update_ops")


class ProcessTensors(Callback):
    """Fetch tensors with every training step (same ``Session.run``) and call ``fn`` on their
    values, e.g. to print them or save them.

    :param names: names of the tensors.
    :param fn: called as ``fn(*values)`` after each step.

    Example::

        ProcessTensors(['mycost1', 'mycost2'], lambda c1, c2: print(c1, c2, c1 + c2))
    """

    def __init__(self, names: Sequence[str], fn: Callable[..., Any]) -> None:
        if isinstance(names, str) or not isinstance(names, (list, tuple)) or not names \
                or not all(isinstance(n, str) for n in names):
            raise TypeError(f"{type(self).__name__}: names must be a non-empty list of tensor names, got {names!r}")
        if not callable(fn):
            raise TypeError(f"{type(self).__name__}: fn must be callable, got {fn!r}")
        self._names = list(names)
        self._fn = fn
        self._fetch: Any = None

    def _setup_graph(self) -> None:
        tensors = self.get_tensors_maybe_in_tower(self._names)
        self._fetch = _tf.tf1().train.SessionRunArgs(fetches=tensors)

    def _before_run(self, ctx: Any) -> Any:
        return self._fetch

    def _after_run(self, ctx: Any, run_values: Any) -> None:
        self._fn(*run_values.results)


class DumpTensors(ProcessTensors):
    """Fetch tensors with every step and write them to ``DumpTensor-<global_step>.npz`` under
    the log directory. Load a dump with ``dict(np.load(filename).items())``; the keys are the
    given names.

    :param names: names of the tensors.
    """

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__(names, self._dump)
        self._dir: str | None = None

    def _setup_graph(self) -> None:
        self._dir = _logger_dir("DumpTensors")
        super()._setup_graph()

    def _dump(self, *values: Any) -> None:
        buf = io.BytesIO()
        np.savez(buf, **{name: val for name, val in zip(self._names, values)})
        atomic_write_bytes(os.path.join(self._dir, f"DumpTensor-{self.global_step}.npz"), buf.getvalue())


class DumpTensorAsImage(Callback):
    """Write the value of a tensor as PNG image(s) under the log directory on every trigger
    (after each epoch by default), and put it to the monitors as an image.

    The tensor must be evaluable on its own: it must not depend on the inputs (e.g. a weight),
    or the inputs must not be fed (then evaluating it takes a datapoint from the input pipeline).

    :param tensor_name: the tensor's name.
    :param prefix: file name prefix; default the op name (``/`` become ``-``). Files are
        ``<prefix>-ep<epoch:03d>.png``, or ``<prefix>-ep<epoch:03d>-<i>.png`` for the i-th image
        of a batch.
    :param map_func: maps the value to an image (HW or HWC) or a batch/list of images; default
        identity. A 4D value or a list is a batch.
    :param scale: multiplies pixel values after ``map_func``; the result is clipped to [0, 255].
    """

    def __init__(self, tensor_name: str, prefix: str | None = None, map_func: Callable[[Any], Any] | None = None,
                 scale: float = 255) -> None:
        from trainbus.tfutils.common import get_op_tensor_name

        if not isinstance(tensor_name, str):
            raise TypeError(f"DumpTensorAsImage: tensor_name must be a str, got {tensor_name!r}")
        if map_func is not None and not callable(map_func):
            raise TypeError(f"DumpTensorAsImage: map_func must be callable or None, got {map_func!r}")
        op_name, self.tensor_name = get_op_tensor_name(tensor_name)
        self.prefix = (op_name if prefix is None else str(prefix)).replace("/", "-")
        self.func = map_func
        self.scale = float(scale)
        self._dir: str | None = None

    def _setup_graph(self) -> None:
        self._dir = _logger_dir("DumpTensorAsImage")
        self._tensor = self.get_tensors_maybe_in_tower([self.tensor_name])[0]

    def _trigger(self) -> None:
        tf = _tf.tf()
        try:
            val = self.trainer.sess.run(self._tensor)
        except tf.errors.InvalidArgumentError as e:
            raise RuntimeError(f"DumpTensorAsImage could not evaluate {self.tensor_name} on its own: {e.message}. "
                               "It must not depend on fed inputs; fetch it with ProcessTensors instead.") from e
        if self.func is not None:
            val = self.func(val)
        if isinstance(val, (list, tuple)) or np.ndim(val) == 4:
            images = [self._to_pixels(im) for im in val]
            for idx, im in enumerate(images):
                self._dump(im, idx)
        else:
            images = [self._to_pixels(val)]
            self._dump(images[0], None)
        if len({im.shape for im in images}) == 1:
            self.trainer.monitors.put_image(self.prefix, np.stack([_as_hwc(im) for im in images]))

    def _to_pixels(self, im: Any) -> np.ndarray:
        arr = np.asarray(im, dtype="float64")
        if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[-1] not in (1, 3, 4)):
            raise ValueError(f"DumpTensorAsImage({self.tensor_name}): each image must be HW or HWC with 1, 3 or 4 "
                             f"channels, got shape {arr.shape}; use map_func to turn the value into images")
        return np.clip(arr * self.scale, 0, 255).astype("uint8")

    def _dump(self, im: np.ndarray, idx: int | None) -> None:
        from trainbus.utils.image import encode_png

        suffix = "" if idx is None else f"-{idx}"
        fname = os.path.join(self._dir, f"{self.prefix}-ep{self.epoch_num:03d}{suffix}.png")
        atomic_write_bytes(fname, encode_png(im))


def _as_hwc(im: np.ndarray) -> np.ndarray:
    return im[:, :, np.newaxis] if im.ndim == 2 else im


class CheckNumerics(RunOp):
    """Check every floating-point variable of the graph for NaN and Inf, and raise an error
    (``tf.errors.InvalidArgumentError``) naming the variable if one is found.

    :param run_as_trigger: check on every trigger (after each epoch by default).
    :param run_step: check with every training step (in the same ``Session.run``).
    """

    def __init__(self, run_as_trigger: bool = True, run_step: bool = False) -> None:
        super().__init__(self._build, run_before=False, run_as_trigger=run_as_trigger, run_step=run_step)

    def _build(self) -> Any:
        tf = _tf.tf()
        tf1 = _tf.tf1()
        variables = []
        seen = set()
        for v in self.graph.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES) + \
                self.graph.get_collection(tf1.GraphKeys.LOCAL_VARIABLES):
            if v.name in seen or not v.dtype.base_dtype.is_floating:
                continue
            seen.add(v.name)
            variables.append(v)
        if not variables:
            logger.warning("CheckNumerics: the graph has no floating-point variables to check.")
            return None
        checks = []
        for v in variables:
            name = v.op.name
            with tf1.name_scope(None), tf1.name_scope("CheckNumerics/"):
                value = v.read_value() if hasattr(v, "read_value") else tf.convert_to_tensor(v)
                checks.append(tf.debugging.check_numerics(
                    value, f"CheckNumerics: variable '{name}' has NaN or Inf values").op)
        with tf1.name_scope(None):
            return tf.group(*checks, name="CheckNumerics_all")
