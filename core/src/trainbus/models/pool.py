"""Pooling layers."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from trainbus.models._common import data_format_nhwc, pair, padding_upper
from trainbus.models.registry import layer_register
from trainbus.models.shape_utils import StaticDynamicShape

__all__ = ["MaxPooling", "FixedUnPooling", "AvgPooling", "GlobalAvgPooling"]

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


@layer_register(log_shape=True)
def FixedUnPooling(x: Any, shape: Any, unpool_mat: Any = None, data_format: str = "channels_last") -> Any:
    """Unpool by a fixed matrix: each input pixel ``v`` becomes the block ``v * unpool_mat``
    (a Kronecker product over the spatial axes).

    :param shape: the block size, an int or ``(h, w)``.
    :param unpool_mat: an ``(h, w)`` np.ndarray or tensor; default 1 at the top-left corner and
        0 elsewhere (zero-filled unpooling).
    :return: a 4D tensor with spatial size ``(H * h, W * w)``.
    """
    fmt = data_format_nhwc(data_format, "FixedUnPooling")
    sh = pair(shape, "shape", "FixedUnPooling")
    if x.shape.rank != 4:
        raise ValueError(f"FixedUnPooling: input must be 4D ({fmt}), got shape {x.shape}")
    if unpool_mat is None:
        mat = np.zeros(sh, dtype="float32")
        mat[0][0] = 1
        unpool_mat = tf.constant(mat, name="unpool_mat")
    elif isinstance(unpool_mat, np.ndarray):
        unpool_mat = tf.constant(unpool_mat, name="unpool_mat")
    if unpool_mat.shape.as_list() != list(sh):
        raise ValueError(f"FixedUnPooling: unpool_mat has shape {unpool_mat.shape.as_list()}, expected {list(sh)} "
                         "(= shape)")
    unpool_mat = tf.cast(unpool_mat, x.dtype)
    hax, wax = (1, 2) if fmt == "NHWC" else (2, 3)
    out_shape = StaticDynamicShape(x)
    out_shape.apply(hax, lambda v: v * sh[0])
    out_shape.apply(wax, lambda v: v * sh[1])
    if fmt == "NHWC":
        blocks = tf.expand_dims(tf.expand_dims(x, 2), 4) * tf.reshape(unpool_mat, [1, 1, sh[0], 1, sh[1], 1])
    else:
        blocks = tf.expand_dims(tf.expand_dims(x, 3), 5) * tf.reshape(unpool_mat, [1, 1, 1, sh[0], 1, sh[1]])
    dyn = out_shape.get_dynamic()
    out = tf.reshape(blocks, tf.stack([-1] + dyn[1:]), name="output")
    out.set_shape(out_shape.get_static())
    return out


def _bilinear_kernel(size: int) -> np.ndarray:
    """The 2D bilinear interpolation kernel of width ``size`` (Caffe's "bilinear" filler)."""
    f = np.ceil(size / 2.0)
    c = (2 * f - 1 - f % 2) / (2.0 * f)
    line = 1 - np.abs(np.arange(size) / f - c)
    return np.outer(line, line).astype("float32")


@layer_register(log_shape=True)
def BilinearUpSample(x: Any, shape: int) -> Any:
    """Upsample an NHWC tensor by the integer factor ``shape`` with a fixed bilinear
    transposed convolution (Caffe's "bilinear" deconvolution; edges padded symmetrically).
    Each channel is upsampled on its own.

    :return: NHWC with spatial size ``(H * shape, W * shape)``.
    """
    if x.shape.rank != 4:
        raise ValueError(f"BilinearUpSample: input must be 4D NHWC, got shape {x.shape}")
    ch = x.shape[3]
    if ch is None:
        raise ValueError(f"BilinearUpSample: the number of channels of {x.shape} must be known")
    if isinstance(shape, bool) or int(shape) != shape or int(shape) < 1:
        raise ValueError(f"BilinearUpSample: shape (the factor) must be a positive int, got {shape!r}")
    s = int(shape)
    if s == 1:
        return tf.identity(x, name="output")
    k = 2 * s
    w = np.zeros((k, k, int(ch), int(ch)), dtype="float32")
    kern = _bilinear_kernel(k)
    for i in range(int(ch)):
        w[:, :, i, i] = kern
    weight = tf.constant(w, dtype=x.dtype, name="bilinear_upsample_filter")
    padded = tf.pad(x, [[0, 0], [s - 1, s - 1], [s - 1, s - 1], [0, 0]], mode="SYMMETRIC")
    out_shape = tf.shape(padded) * tf.constant([1, s, s, 1], tf.int32)
    up = tf.nn.conv2d_transpose(padded, weight, out_shape, [1, s, s, 1], "SAME")
    edge = s * (s - 1)
    up = up[:, edge:-edge, edge:-edge, :]
    static = x.shape.as_list()
    up.set_shape([static[0], None if static[1] is None else static[1] * s,
                  None if static[2] is None else static[2] * s, static[3]])
    return tf.identity(up, name="output")
