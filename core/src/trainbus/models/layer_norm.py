"""LayerNorm and InstanceNorm layers."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainbus.models._common import data_format_nhwc, hold_norm_variables
from trainbus.models.registry import layer_register
from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["LayerNorm", "InstanceNorm"]


def _affine(ch: int, new_shape: list[int], ndims: int, center: bool, scale: bool, gamma_initializer: Any,
            dtype: Any) -> tuple[Any, Any, Any, Any]:
    """``beta`` then ``gamma`` (created in that order), reshaped for broadcasting; constants
    0 / 1 when turned off."""
    if center:
        beta_v = tf1.get_variable("beta", [ch], dtype=dtype, initializer=tf1.zeros_initializer())
        beta = tf.reshape(beta_v, new_shape)
    else:
        beta_v, beta = None, tf.zeros([1] * ndims, dtype=dtype, name="beta")
    if scale:
        gamma_v = tf1.get_variable("gamma", [ch], dtype=dtype, initializer=gamma_initializer or tf1.ones_initializer())
        gamma = tf.reshape(gamma_v, new_shape)
    else:
        gamma_v, gamma = None, tf.ones([1] * ndims, dtype=dtype, name="gamma")
    return beta_v, beta, gamma_v, gamma


@layer_register(aliases={"use_bias": "center", "use_scale": "scale", "gamma_init": "gamma_initializer"})
def LayerNorm(x: Any, epsilon: float = 1e-5, *, center: bool = True, scale: bool = True,
              gamma_initializer: Any = None, data_format: str = "channels_last") -> Any:
    """Layer normalization (Ba et al. 2016): each sample is normalized over all its axes, then
    ``* gamma + beta`` per channel.

    :param x: a 2D ``(N, C)`` or 4D tensor laid out as ``data_format``.
    :param center, scale: use ``beta`` / ``gamma`` (aliases ``use_bias`` / ``use_scale``).

    Variables: ``beta``, ``gamma`` (shape ``[C]``).
    """
    fmt = data_format_nhwc(data_format, "LayerNorm")
    shape = x.shape.as_list() if x.shape.rank is not None else None
    if shape is None or len(shape) not in (2, 4):
        raise ValueError(f"LayerNorm: input must be 2D or 4D, got shape {x.shape}")
    ndims = len(shape)
    mean, var = tf.nn.moments(x, list(range(1, ndims)), keepdims=True)
    if ndims == 2:
        chan, new_shape = shape[1], [1, shape[1]]
    elif fmt == "NCHW":
        chan, new_shape = shape[1], [1, shape[1], 1, 1]
    else:
        chan, new_shape = shape[3], [1, 1, 1, shape[3]]
    if chan is None:
        raise ValueError(f"LayerNorm: the number of channels of {x.shape} must be known")
    beta_v, beta, gamma_v, gamma = _affine(chan, new_shape, ndims, center, scale, gamma_initializer,
                                           x.dtype.base_dtype)
    out = tf.nn.batch_normalization(x, mean, var, beta, gamma, epsilon, name="output")
    return hold_norm_variables(out, beta_v, gamma_v)


@layer_register(aliases={"gamma_init": "gamma_initializer"})
def InstanceNorm(x: Any, epsilon: float = 1e-5, *, center: bool = True, scale: bool = True,
                 gamma_initializer: Any = None, data_format: str = "channels_last", use_affine: bool | None = None
                 ) -> Any:
    """Instance normalization (Ulyanov et al. 2016): each channel of each sample is normalized
    over its spatial axes, then ``* gamma + beta`` per channel.

    :param x: a 4D tensor laid out as ``data_format``.
    :param use_affine: older spelling; sets both ``center`` and ``scale``.

    Variables: ``beta``, ``gamma`` (shape ``[C]``).
    """
    fmt = data_format_nhwc(data_format, "InstanceNorm")
    shape = x.shape.as_list() if x.shape.rank is not None else None
    if shape is None or len(shape) != 4:
        raise ValueError(f"InstanceNorm: input must be 4D, got shape {x.shape}")
    if use_affine is not None:
        logger.warn("InstanceNorm(use_affine=...) is deprecated: use center= and scale=")
        center = scale = bool(use_affine)
    if fmt == "NHWC":
        axes, ch = [1, 2], shape[3]
        new_shape = [1, 1, 1, ch]
    else:
        axes, ch = [2, 3], shape[1]
        new_shape = [1, ch, 1, 1]
    if ch is None:
        raise ValueError(f"InstanceNorm: the number of channels of {x.shape} must be known")
    mean, var = tf.nn.moments(x, axes, keepdims=True)
    beta_v, beta, gamma_v, gamma = _affine(ch, new_shape, 4, center, scale, gamma_initializer, x.dtype.base_dtype)
    out = tf.nn.batch_normalization(x, mean, var, beta, gamma, epsilon, name="output")
    return hold_norm_variables(out, beta_v, gamma_v)
