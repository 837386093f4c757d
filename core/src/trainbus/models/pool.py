"""Pooling layers."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainbus.models._common import data_format_nhwc, pair, padding_upper
from trainbus.models.registry import layer_register

__all__ = ["MaxPooling", "AvgPooling", "GlobalAvgPooling"]

_ALIASES = {"shape": "pool_size", "stride": "strides"}


def _pool(kind: str, inputs: Any, pool_size: Any, strides: Any, padding: str, data_format: str) -> Any:
    fmt = data_format_nhwc(data_format, kind)
    pad = padding_upper(padding, kind)
    k = pair(pool_size, "pool_size", kind)
    s = k if strides is None else pair(strides, "strides", kind)
    x = tf.convert_to_tensor(inputs)
    if x.shape.rank != 4:
        raise ValueError(f"{kind}: input must be 4D ({fmt}), got shape {x.shape}")
    nd = (lambda v: [1, v[0], v[1], 1]) if fmt == "NHWC" else (lambda v: [1, 1, v[0], v[1]])
    op = tf.nn.max_pool2d if kind == "MaxPooling" else tf.nn.avg_pool2d
    return tf.identity(op(x, nd(k), nd(s), pad, data_format=fmt), name="output")


@layer_register(log_shape=True, aliases=_ALIASES)
def MaxPooling(inputs: Any, pool_size: Any, strides: Any = None, padding: str = "valid",
               data_format: str = "channels_last") -> Any:
    """Max pooling; ``strides`` defaults to ``pool_size``. Aliases: ``shape``, ``stride``."""
    return _pool("MaxPooling", inputs, pool_size, strides, padding, data_format)


@layer_register(log_shape=True, aliases=_ALIASES)
def AvgPooling(inputs: Any, pool_size: Any, strides: Any = None, padding: str = "valid",
               data_format: str = "channels_last") -> Any:
    """Average pooling; ``strides`` defaults to ``pool_size``. Aliases: ``shape``, ``stride``."""
    return _pool("AvgPooling", inputs, pool_size, strides, padding, data_format)


@layer_register(log_shape=True)
def GlobalAvgPooling(x: Any, data_format: str = "channels_last") -> Any:
    """Mean over the spatial axes of a 4D tensor: ``(N, C)``."""
    fmt = data_format_nhwc(data_format, "GlobalAvgPooling")
    x = tf.convert_to_tensor(x)
    if x.shape.rank != 4:
        raise ValueError(f"GlobalAvgPooling: input must be 4D ({fmt}), got shape {x.shape}")
    axes = [1, 2] if fmt == "NHWC" else [2, 3]
    return tf.reduce_mean(x, axes, name="output")
