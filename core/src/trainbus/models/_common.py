"""Argument helpers shared by the layers."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainbus.models.utils import VariableHolder

tf1 = tf.compat.v1


def data_format_nhwc(fmt: str, layer: str) -> str:
    """``'NHWC'`` or ``'NCHW'`` from any of the accepted spellings."""
    f = str(fmt).lower()
    if f in ("channels_last", "nhwc"):
        return "NHWC"
    if f in ("channels_first", "nchw"):
        return "NCHW"
    raise ValueError(f"{layer}: data_format {fmt!r} is not one of 'channels_last'/'NHWC', 'channels_first'/'NCHW'")


def padding_upper(padding: str, layer: str) -> str:
    p = str(padding).upper()
    if p not in ("SAME", "VALID"):
        raise ValueError(f"{layer}: padding {padding!r} must be 'same' or 'valid'")
    return p


def pair(x: Any, what: str, layer: str) -> tuple[int, int]:
    """``(a, b)`` from an int or a 2-sequence of ints."""
    if isinstance(x, bool):
        raise TypeError(f"{layer}: {what} must be an int or a pair of ints, got {x!r}")
    if isinstance(x, int):
        return (x, x)
    try:
        a, b = x
        return (int(a), int(b))
    except (TypeError, ValueError):
        raise TypeError(f"{layer}: {what} must be an int or a pair of ints, got {x!r}") from None


def channel_dim(x: Any, fmt: str, layer: str) -> int:
    axis = 3 if fmt == "NHWC" else 1
    if x.shape.rank != 4:
        raise ValueError(f"{layer}: input must be 4D ({fmt}), got shape {x.shape}")
    c = x.shape[axis]
    if c is None:
        raise ValueError(f"{layer}: the number of input channels (axis {axis} of {x.shape}) must be known")
    return int(c)


def default_kernel_init() -> Any:
    return tf1.variance_scaling_initializer(scale=2.0, distribution="untruncated_normal")


def activate(x: Any, activation: Any, layer: str) -> Any:
    if activation is None:
        return tf.identity(x, name="output")
    if not callable(activation):
        raise TypeError(f"{layer}: activation must be callable (e.g. tf.nn.relu) or None, got {activation!r}")
    y = activation(x)
    return tf.identity(y, name="output")


def add_activity_loss(out: Any, regularizer: Any, layer: str) -> None:
    """Add ``regularizer(out) / batch_size`` to ``REGULARIZATION_LOSSES`` (as ``tf.layers`` does)."""
    if regularizer is None:
        return
    if not callable(regularizer):
        raise TypeError(f"{layer}: activity_regularizer must be callable (tensor -> scalar), got {regularizer!r}")
    with tf1.name_scope("ActivityRegularizer"):
        loss = tf.cast(regularizer(out), out.dtype)
        loss = loss / tf.cast(tf.shape(out)[0], loss.dtype)
    tf1.add_to_collection(tf1.GraphKeys.REGULARIZATION_LOSSES, loss)


def need_tower_training(training: Any, layer: str) -> bool:
    from trainbus.tfutils.tower import get_current_tower_context

    if training is not None:
        return bool(training)
    ctx = get_current_tower_context()
    if ctx is None:
        raise ValueError(f"{layer} is called outside a TowerContext and without training=...: "
                         "build it under trainbus.tfutils.TowerContext(name, is_training=...) "
                         "or pass training=True/False")
    return bool(ctx.is_training)


def hold_norm_variables(out: Any, beta: Any, gamma: Any) -> Any:
    """Attach ``out.variables``, a ``VariableHolder`` with ``gamma`` and ``beta`` (each left out
    when None), as the normalization layers do; returns ``out``."""
    vh = out.variables = VariableHolder()
    if gamma is not None:
        vh.gamma = gamma
    if beta is not None:
        vh.beta = beta
    return out
