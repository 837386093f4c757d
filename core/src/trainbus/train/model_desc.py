"""``ModelDesc``: describe a model by its inputs, its graph (returning the cost) and its optimizer."""

from __future__ import annotations

import functools
from typing import Any

import tensorflow as tf

from trainbus.tfutils.tower import _to_spec

tf1 = tf.compat.v1

__all__ = ["ModelDescBase", "ModelDesc"]


class ModelDescBase:
    """A model without an optimizer (enough for inference)."""

    @functools.lru_cache(maxsize=None)
    def get_input_signature(self) -> list[Any]:
        """``inputs()`` as a list of ``tf.TensorSpec`` (placeholders are converted)."""
        with tf.Graph().as_default():
            inputs = self.inputs()
        if not isinstance(inputs, (list, tuple)) or not inputs:
            raise TypeError(f"{type(self).__name__}.inputs() must return a non-empty list of tf.TensorSpec, got {inputs!r}")
        return [_to_spec(x) for x in inputs]

    @property
    def input_names(self) -> list[str]:
        return [s.name for s in self.get_input_signature()]

    def inputs(self) -> list[Any]:
        """Return the list of ``tf.TensorSpec`` the model takes (with names)."""
        raise TypeError(f"{type(self).__name__} must override inputs() to return a list of tf.TensorSpec")

    def build_graph(self, *args: Any) -> Any:
        """Build the model from input tensors (one per ``inputs()``); return the cost."""
        raise TypeError(f"{type(self).__name__} must override build_graph(*inputs)")


class ModelDesc(ModelDescBase):
    """A model for single-cost training: ``inputs()``, ``build_graph(*inputs)`` returning the
    cost tensor, and ``optimizer()`` returning a ``tf.compat.v1.train.Optimizer``."""

    @functools.lru_cache(maxsize=None)
    def get_optimizer(self) -> Any:
        """``optimizer()``, called once and memoized."""
        opt = self.optimizer()
        if not isinstance(opt, tf1.train.Optimizer):
            raise TypeError(f"{type(self).__name__}.optimizer() must return a tf.compat.v1.train.Optimizer, got {opt!r}")
        return opt

    def optimizer(self) -> Any:
        """Return the optimizer (called once, in the training graph)."""
        raise TypeError(f"{type(self).__name__} must override optimizer() to train with it")
