"""Nonlinearities with parameters or structure: Maxout, PReLU, BNReLU, LeakyReLU."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainbus.models.batch_norm import BatchNorm
from trainbus.models.registry import layer_register
from trainbus.models.utils import VariableHolder
from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["Maxout", "PReLU", "BNReLU"]


@layer_register(use_scope=None)
def Maxout(x: Any, num_unit: int) -> Any:
    """Maxout (Goodfellow et al. 2013): the channels are split into groups of ``num_unit``
    consecutive channels and each group is reduced by max.

    :param x: an NHWC or NC tensor with a known number of channels C.
    :param num_unit: group size; must divide C.
    :return: NHW(C / num_unit) or N(C / num_unit), named ``output``.
    """
    shape = x.shape.as_list() if x.shape.rank is not None else None
    if shape is None or len(shape) not in (2, 4):
        raise ValueError(f"Maxout: input must be 2D (NC) or 4D (NHWC), got shape {x.shape}")
    ch = shape[-1]
    if isinstance(num_unit, bool) or not isinstance(num_unit, int) or num_unit < 1:
        raise ValueError(f"Maxout: num_unit must be a positive int, got {num_unit!r}")
    if ch is None or ch % num_unit:
        raise ValueError(f"Maxout: num_unit={num_unit} must divide the number of channels ({ch}) of {x.shape}")
    if len(shape) == 4:
        dyn = tf.shape(x)
        h = shape[1] if shape[1] is not None else dyn[1]
        w = shape[2] if shape[2] is not None else dyn[2]
        y = tf.reshape(x, tf.stack([-1, h, w, ch // num_unit, num_unit]))
        return tf.reduce_max(y, 4, name="output")
    y = tf.reshape(x, [-1, ch // num_unit, num_unit])
    return tf.reduce_max(y, 2, name="output")


@layer_register()
def PReLU(x: Any, init: float = 0.001, name: str | None = None) -> Any:
    """Parametric ReLU (He et al. 2015): ``x`` where positive, ``alpha * x`` elsewhere, with
    a learned scalar ``alpha``.

    :param init: the initial value of ``alpha``.
    :param name: older argument naming the output tensor (default ``output``).

    Variable: ``alpha`` (a scalar).
    """
    if name is not None:
        logger.warn("PReLU(name=...) is deprecated: the output tensor is named 'output'")
    alpha = tf1.get_variable("alpha", [], dtype=x.dtype.base_dtype, initializer=tf1.constant_initializer(init))
    y = (1 + alpha) * x + (1 - alpha) * tf.abs(x)
    out = tf.multiply(y, 0.5, name=name or "output")
    out.variables = VariableHolder(alpha=alpha)
    return out


@layer_register(use_scope=None)
def BNReLU(x: Any, name: str | None = None) -> Any:
    """``relu(BatchNorm('bn', x))``: the BatchNorm variables are ``<scope>/bn/...``.

    :param name: older argument naming the output tensor.
    """
    if name is not None:
        logger.warn("BNReLU(name=...) is deprecated: give the layer a name instead, BNReLU('name', x)")
    x = BatchNorm("bn", x)
    return tf.nn.relu(x, name=name)


@layer_register(use_scope=None)
def LeakyReLU(x: Any, alpha: float, name: str = "output") -> Any:
    """``max(x, alpha * x)`` (Maas et al. 2013); the same as ``tf.nn.leaky_relu`` for
    ``0 <= alpha <= 1``. Kept for models written with tensorpack's older ``LeakyReLU`` layer.
    """
    return tf.maximum(x, alpha * x, name=name)
