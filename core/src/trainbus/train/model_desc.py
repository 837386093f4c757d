"""``ModelDesc``: describe a model by its inputs, its graph (returning the cost) and its optimizer."""

from __future__ import annotations

from typing import Any, NamedTuple

import tensorflow as tf

from trainbus.tfutils.common import get_op_tensor_name
from trainbus.tfutils.tower import get_current_tower_context

tf1 = tf.compat.v1

__all__ = ["ModelDescBase", "ModelDesc", "InputDesc"]


class InputDesc(NamedTuple):
    """The older way to describe one model input: ``InputDesc(tf.float32, [None, 28, 28], 'x')``.

    Deprecated: return ``tf.TensorSpec(shape, dtype, name)`` from ``inputs()`` instead. An
    ``InputDesc`` is accepted wherever a ``tf.TensorSpec`` is.
    """

    type: Any
    shape: Any
    name: str

    def to_tensor_spec(self) -> Any:
        """The equivalent ``tf.TensorSpec``."""
        return tf.TensorSpec(shape=self.shape, dtype=tf.as_dtype(self.type), name=self.name)

    def build_placeholder(self) -> Any:
        """A new placeholder of this type, shape and name in the default graph."""
        with tf1.name_scope(None):
            return tf1.placeholder(self.type, shape=self.shape, name=self.name)

    def build_placeholder_reuse(self) -> Any:
        """The placeholder named after this input if the default graph has one, else a new one."""
        from trainbus.input_source import build_or_reuse_placeholder

        return build_or_reuse_placeholder(self.to_tensor_spec())


def _signature_of(model: Any, inputs: Any, graph: Any) -> list[Any]:
    who = type(model).__name__
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise TypeError(f"{who}.inputs() must return a non-empty list of tf.TensorSpec (or placeholders), "
                        f"got {inputs!r}")
    specs = []
    for i, x in enumerate(inputs):
        if isinstance(x, tf.TensorSpec):
            spec = x
        elif isinstance(x, InputDesc):
            spec = x.to_tensor_spec()
        elif isinstance(x, tf.Tensor):
            if x.op.type != "Placeholder":
                raise TypeError(f"{who}.inputs()[{i}] is the tensor {x.name!r} made by a {x.op.type} op; inputs() must "
                                "return tf.TensorSpec objects or placeholders")
            if x.graph is not graph:
                raise ValueError(f"{who}.inputs()[{i}] is the placeholder {x.name!r} of another graph; create the "
                                 "placeholders inside inputs() (or return tf.TensorSpec objects)")
            spec = tf.TensorSpec(shape=x.shape, dtype=x.dtype, name=get_op_tensor_name(x.name)[0])
        else:
            raise TypeError(f"{who}.inputs()[{i}] is {x!r}; inputs() must return tf.TensorSpec objects or placeholders")
        if not spec.name:
            raise ValueError(f"{who}.inputs()[{i}] ({spec}) has no name; give every input a name, e.g. "
                             "tf.TensorSpec([None, 28, 28], tf.float32, 'input')")
        specs.append(spec)
    names = [s.name for s in specs]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"{who}.inputs() names several inputs {dup}; every input needs its own name")
    return specs


class ModelDescBase:
    """A model: ``inputs()`` describes its input tensors and ``build_graph(*inputs)`` builds it
    (the two together are a tower function). Enough for inference; see :class:`ModelDesc`
    for training with one cost and one optimizer."""

    def get_input_signature(self) -> list[Any]:
        """``inputs()`` as a list of ``tf.TensorSpec`` (placeholders are converted). ``inputs()``
        is called once, in a graph of its own; the result is kept by this model."""
        cached = self.__dict__.get("_trainbus_input_signature")
        if cached is None:
            with tf.Graph().as_default() as g:
                cached = _signature_of(self, self.inputs(), g)
            self.__dict__["_trainbus_input_signature"] = cached
        return list(cached)

    @property
    def input_names(self) -> list[str]:
        """The names of the inputs, in order."""
        return [s.name for s in self.get_input_signature()]

    def inputs(self) -> list[Any]:
        """Return the model's inputs: a list of ``tf.TensorSpec`` (or of placeholders created
        right here). Called by :meth:`get_input_signature`, not by users."""
        raise TypeError(f"{type(self).__name__} must override inputs() to return a list of tf.TensorSpec, e.g. "
                        "[tf.TensorSpec([None, 28, 28], tf.float32, 'input'), "
                        "tf.TensorSpec([None], tf.int32, 'label')]")

    def build_graph(self, *args: Any) -> Any:
        """Build the model from input tensors (one per input, in the order of ``inputs()``).
        :class:`ModelDesc` expects the cost back when training."""
        raise TypeError(f"{type(self).__name__} must override build_graph(*inputs)")

    @property
    def training(self) -> bool:
        """Whether the model is being built in a training tower (False in inference and
        predict towers). Only valid inside ``build_graph``."""
        ctx = get_current_tower_context()
        if ctx is None:
            raise RuntimeError(f"{type(self).__name__}.training is only known while the model is built under a "
                               "TowerContext (read it inside build_graph)")
        return ctx.is_training


class ModelDesc(ModelDescBase):
    """A model for single-cost training: ``inputs()``, ``build_graph(*inputs)`` returning the
    cost tensor (including any regularization) in a training tower, and ``optimizer()``
    returning a ``tf.compat.v1.train.Optimizer``."""

    def get_optimizer(self) -> Any:
        """``optimizer()``, called once and memoized."""
        opt = self.__dict__.get("_trainbus_optimizer")
        if opt is None:
            opt = self.optimizer()
            if not isinstance(opt, tf1.train.Optimizer):
                raise TypeError(f"{type(self).__name__}.optimizer() must return a tf.compat.v1.train.Optimizer, "
                                f"got {opt!r}")
            self.__dict__["_trainbus_optimizer"] = opt
        return opt

    def optimizer(self) -> Any:
        """Return the optimizer (called once, in the training graph)."""
        raise TypeError(f"{type(self).__name__} must override optimizer() to train with it")
