"""FullyConnected layer."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainbus.models._common import activate, add_activity_loss, default_kernel_init
from trainbus.models.registry import layer_register
from trainbus.models.utils import VariableHolder

tf1 = tf.compat.v1

__all__ = ["FullyConnected"]


@layer_register(log_shape=True, aliases={"out_dim": "units", "nl": "activation", "W_init": "kernel_initializer",
                                         "b_init": "bias_initializer"})
def FullyConnected(inputs: Any, units: int, activation: Any = None, use_bias: bool = True,
                   kernel_initializer: Any = None, bias_initializer: Any = None,
                   kernel_regularizer: Any = None, bias_regularizer: Any = None,
                   activity_regularizer: Any = None) -> Any:
    """``activation(flatten(inputs) @ W + b)``: variables ``W`` (in, units) and ``b`` (units).
    The input is flattened to 2D first.

    Regularizers as in :func:`trainbus.models.Conv2D`.

    Aliases: ``out_dim`` = ``units``, ``nl`` = ``activation``, ``W_init``/``b_init``.
    """
    if isinstance(units, bool) or not isinstance(units, int) or units < 1:
        raise ValueError(f"FullyConnected: units (out_dim) must be a positive int, got {units!r}")
    x = tf.convert_to_tensor(inputs)
    if x.shape.rank is None or x.shape.rank < 2:
        raise ValueError(f"FullyConnected: input must be at least 2D, got shape {x.shape}")
    if x.shape.rank > 2:
        dims = x.shape[1:].as_list()
        if None in dims:
            raise ValueError(f"FullyConnected: all but the first input dimension must be known, got {x.shape}")
        n = 1
        for d in dims:
            n *= d
        x = tf.reshape(x, [-1, n])
    in_dim = x.shape[1]
    if in_dim is None:
        raise ValueError(f"FullyConnected: the input dimension must be known, got {x.shape}")
    W = tf1.get_variable("W", [int(in_dim), units], dtype=x.dtype,
                         initializer=kernel_initializer or default_kernel_init(), regularizer=kernel_regularizer)
    y = tf.matmul(x, W)
    b = None
    if use_bias:
        b = tf1.get_variable("b", [units], dtype=x.dtype, initializer=bias_initializer or tf1.zeros_initializer(),
                             regularizer=bias_regularizer)
        y = tf.nn.bias_add(y, b)
    out = activate(y, activation, "FullyConnected")
    add_activity_loss(out, activity_regularizer, "FullyConnected")
    out.variables = VariableHolder(W=W, **({"b": b} if b is not None else {}))
    return out
