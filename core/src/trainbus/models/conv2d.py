"""Conv2D and Conv2DTranspose layers."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainbus.models._common import (activate, add_activity_loss, channel_dim, data_format_nhwc, default_kernel_init,
                                     pair, padding_upper)
from trainbus.models.registry import layer_register
from trainbus.models.utils import VariableHolder

tf1 = tf.compat.v1

__all__ = ["Conv2D", "Deconv2D", "Conv2DTranspose"]

_ALIASES = {"out_channel": "filters", "kernel_shape": "kernel_size", "stride": "strides", "nl": "activation",
            "W_init": "kernel_initializer", "b_init": "bias_initializer"}


def _nd(v: tuple[int, int], fmt: str) -> list[int]:
    return [1, v[0], v[1], 1] if fmt == "NHWC" else [1, 1, v[0], v[1]]


@layer_register(log_shape=True, aliases=_ALIASES)
def Conv2D(inputs: Any, filters: int, kernel_size: Any, strides: Any = (1, 1), padding: str = "same",
           data_format: str = "channels_last", dilation_rate: Any = (1, 1), activation: Any = None,
           use_bias: bool = True, kernel_initializer: Any = None, bias_initializer: Any = None,
           kernel_regularizer: Any = None, bias_regularizer: Any = None, activity_regularizer: Any = None,
           split: int = 1) -> Any:
    """2D convolution: variables ``W`` (kh, kw, in_channels / split, filters) and ``b`` (filters).

    :param split: number of channel groups (grouped convolution); in and out channels must
        be divisible by it.
    :param kernel_regularizer, bias_regularizer: ``f(variable) -> scalar``; the loss goes to
        ``tf.GraphKeys.REGULARIZATION_LOSSES``. ``activity_regularizer``: ``f(output) -> scalar``,
        added there divided by the batch size.

    Aliases: ``out_channel`` = ``filters``, ``kernel_shape`` = ``kernel_size``, ``stride`` =
    ``strides``, ``nl`` = ``activation``, ``W_init``/``b_init``. ``data_format`` is
    ``'channels_last'``/``'NHWC'`` or ``'channels_first'``/``'NCHW'``.
    """
    fmt = data_format_nhwc(data_format, "Conv2D")
    pad = padding_upper(padding, "Conv2D")
    k = pair(kernel_size, "kernel_size", "Conv2D")
    s = pair(strides, "strides", "Conv2D")
    d = pair(dilation_rate, "dilation_rate", "Conv2D")
    x = tf.convert_to_tensor(inputs)
    cin = channel_dim(x, fmt, "Conv2D")
    if isinstance(filters, bool) or not isinstance(filters, int) or filters < 1:
        raise ValueError(f"Conv2D: filters (out_channel) must be a positive int, got {filters!r}")
    if split < 1 or cin % split or filters % split:
        raise ValueError(f"Conv2D: split={split} must divide input channels ({cin}) and filters ({filters})")
    W = tf1.get_variable("W", [k[0], k[1], cin // split, filters], dtype=x.dtype,
                         initializer=kernel_initializer or default_kernel_init(), regularizer=kernel_regularizer)
    if split == 1:
        y = tf.nn.conv2d(x, W, _nd(s, fmt), pad, data_format=fmt, dilations=_nd(d, fmt))
    else:
        caxis = 3 if fmt == "NHWC" else 1
        xs = tf.split(x, split, axis=caxis)
        ws = tf.split(W, split, axis=3)
        y = tf.concat([tf.nn.conv2d(xi, wi, _nd(s, fmt), pad, data_format=fmt, dilations=_nd(d, fmt))
                       for xi, wi in zip(xs, ws)], axis=caxis)
    return _bias_and_activate(y, x, W, filters, use_bias, bias_initializer, bias_regularizer, fmt, activation,
                              activity_regularizer, "Conv2D")


@layer_register(log_shape=True, aliases=_ALIASES)
def Conv2DTranspose(inputs: Any, filters: int, kernel_size: Any, strides: Any = (1, 1), padding: str = "same",
                    data_format: str = "channels_last", activation: Any = None, use_bias: bool = True,
                    kernel_initializer: Any = None, bias_initializer: Any = None,
                    kernel_regularizer: Any = None, bias_regularizer: Any = None,
                    activity_regularizer: Any = None) -> Any:
    """2D transposed convolution ("deconvolution"): variables ``W`` (kh, kw, filters,
    in_channels) and ``b`` (filters). Output spatial size: ``in * stride`` with 'same',
    ``(in - 1) * stride + kernel`` with 'valid'. Same aliases as :func:`Conv2D`.
    """
    fmt = data_format_nhwc(data_format, "Conv2DTranspose")
    pad = padding_upper(padding, "Conv2DTranspose")
    k = pair(kernel_size, "kernel_size", "Conv2DTranspose")
    s = pair(strides, "strides", "Conv2DTranspose")
    x = tf.convert_to_tensor(inputs)
    cin = channel_dim(x, fmt, "Conv2DTranspose")
    if isinstance(filters, bool) or not isinstance(filters, int) or filters < 1:
        raise ValueError(f"Conv2DTranspose: filters (out_channel) must be a positive int, got {filters!r}")
    W = tf1.get_variable("W", [k[0], k[1], filters, cin], dtype=x.dtype,
                         initializer=kernel_initializer or default_kernel_init(), regularizer=kernel_regularizer)
    hw_axes = (1, 2) if fmt == "NHWC" else (2, 3)
    dyn = tf.shape(x)
    sizes = []
    static = []
    for i, ax in enumerate(hw_axes):
        n = x.shape[ax]
        if pad == "SAME":
            sizes.append(dyn[ax] * s[i])
            static.append(None if n is None else n * s[i])
        else:
            sizes.append((dyn[ax] - 1) * s[i] + k[i])
            static.append(None if n is None else (n - 1) * s[i] + k[i])
    if fmt == "NHWC":
        out_shape = tf.stack([dyn[0], sizes[0], sizes[1], filters])
        static_shape = [x.shape[0], static[0], static[1], filters]
    else:
        out_shape = tf.stack([dyn[0], filters, sizes[0], sizes[1]])
        static_shape = [x.shape[0], filters, static[0], static[1]]
    y = tf.nn.conv2d_transpose(x, W, out_shape, _nd(s, fmt), padding=pad, data_format=fmt)
    y.set_shape(static_shape)
    return _bias_and_activate(y, x, W, filters, use_bias, bias_initializer, bias_regularizer, fmt, activation,
                              activity_regularizer, "Conv2DTranspose")


Deconv2D = Conv2DTranspose


def _bias_and_activate(y: Any, x: Any, W: Any, filters: int, use_bias: bool, bias_initializer: Any,
                       bias_regularizer: Any, fmt: str, activation: Any, activity_regularizer: Any,
                       layer: str) -> Any:
    """The common end of the convolution layers: optional bias ``b``, activation, and the
    ``.variables`` holder (``W``, ``b``)."""
    b = None
    if use_bias:
        b = tf1.get_variable("b", [filters], dtype=x.dtype, initializer=bias_initializer or tf1.zeros_initializer(),
                             regularizer=bias_regularizer)
        y = tf.nn.bias_add(y, b, data_format=fmt)
    out = activate(y, activation, layer)
    add_activity_loss(out, activity_regularizer, layer)
    out.variables = VariableHolder(W=W, **({"b": b} if b is not None else {}))
    return out
