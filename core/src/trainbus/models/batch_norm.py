"""BatchNorm layer."""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.python.training import moving_averages

from trainbus.models._common import data_format_nhwc, need_tower_training
from trainbus.models.registry import VariableHolder, layer_register

tf1 = tf.compat.v1

__all__ = ["BatchNorm"]

_EMA_UPDATES = ("default", "collection", "internal", "skip")


@layer_register(log_shape=False, aliases={"decay": "momentum", "use_scale": "scale", "use_bias": "center",
                                          "gamma_init": "gamma_initializer", "beta_init": "beta_initializer"})
def BatchNorm(inputs: Any, axis: int | None = None, training: bool | None = None, momentum: float = 0.9,
              epsilon: float = 1e-5, center: bool = True, scale: bool = True, beta_initializer: Any = None,
              gamma_initializer: Any = None, data_format: str = "channels_last", ema_update: str = "default") -> Any:
    """Batch normalization over a 2D ``(N, C)`` or 4D input.

    Variables: ``beta`` (if ``center``), ``gamma`` (if ``scale``), and the moving statistics
    ``mean/EMA`` and ``variance/EMA`` (not trainable, in ``MODEL_VARIABLES``).

    :param axis: the channel axis; default 1 for 2D inputs, else from ``data_format``.
    :param training: use the batch statistics (True) or the moving ones (False); default the
        ``is_training`` of the current TowerContext.
    :param momentum: moving statistics are updated as ``m = momentum * m + (1 - momentum) * batch``
        (batch variance: the population variance of the batch).
    :param ema_update: how the moving statistics are updated when training:
        ``'default'``/``'collection'``: the update ops go to ``tf.GraphKeys.UPDATE_OPS`` (run
        them with the train op, e.g. by the ``RunUpdateOps`` callback), in the main training
        tower only; ``'internal'``: the output depends on the update ops (they run whenever
        the output is computed); ``'skip'``: never update.

    Aliases: ``decay`` = ``momentum``, ``use_scale`` = ``scale``, ``use_bias`` = ``center``,
    ``gamma_init``/``beta_init``.
    """
    from trainbus.tfutils.tower import get_current_tower_context

    if ema_update not in _EMA_UPDATES:
        raise ValueError(f"BatchNorm: ema_update={ema_update!r} must be one of {_EMA_UPDATES}")
    if not 0.0 <= float(momentum) <= 1.0:
        raise ValueError(f"BatchNorm: momentum (decay) must be in [0, 1], got {momentum!r}")
    x = tf.convert_to_tensor(inputs)
    rank = x.shape.rank
    if rank not in (2, 4):
        raise ValueError(f"BatchNorm: input must be 2D or 4D, got shape {x.shape}")
    if axis is None:
        axis = 1 if rank == 2 else (3 if data_format_nhwc(data_format, "BatchNorm") == "NHWC" else 1)
    axis = axis % rank
    nchan = x.shape[axis]
    if nchan is None:
        raise ValueError(f"BatchNorm: the channel axis {axis} of {x.shape} must be known")
    nchan = int(nchan)
    training = need_tower_training(training, "BatchNorm")
    ctx = get_current_tower_context()

    pdtype = tf.float32 if x.dtype in (tf.float16, tf.bfloat16) else x.dtype
    beta = tf1.get_variable("beta", [nchan], dtype=pdtype, initializer=beta_initializer or tf1.zeros_initializer()) \
        if center else None
    gamma = tf1.get_variable("gamma", [nchan], dtype=pdtype, initializer=gamma_initializer or tf1.ones_initializer()) \
        if scale else None
    stat_colls = [tf1.GraphKeys.GLOBAL_VARIABLES, tf1.GraphKeys.MODEL_VARIABLES]
    moving_mean = tf1.get_variable("mean/EMA", [nchan], dtype=pdtype, initializer=tf1.zeros_initializer(),
                                   trainable=False, collections=stat_colls)
    moving_var = tf1.get_variable("variance/EMA", [nchan], dtype=pdtype, initializer=tf1.ones_initializer(),
                                  trainable=False, collections=stat_colls)

    bshape = [1] * rank
    bshape[axis] = nchan

    def bc(t: Any) -> Any:
        return None if t is None else tf.reshape(t, bshape)

    xf = tf.cast(x, pdtype)
    if training:
        reduce_axes = [i for i in range(rank) if i != axis]
        mean, var = tf.nn.moments(xf, reduce_axes)
        y = tf.nn.batch_normalization(xf, bc(mean), bc(var), bc(beta), bc(gamma), epsilon)
        y = tf.cast(y, x.dtype)
        main = ctx is None or ctx.is_main_training_tower
        if ema_update != "skip" and main:
            with tf1.name_scope("EMA_update"):
                upd_mean = moving_averages.assign_moving_average(moving_mean, mean, momentum, zero_debias=False,
                                                                 name="mean_ema_op")
                upd_var = moving_averages.assign_moving_average(moving_var, var, momentum, zero_debias=False,
                                                                name="var_ema_op")
                upd_mean, upd_var = upd_mean.op, upd_var.op
            if ema_update == "internal":
                with tf.control_dependencies([upd_mean, upd_var]):
                    y = tf.identity(y)
            else:
                tf1.add_to_collection(tf1.GraphKeys.UPDATE_OPS, upd_mean)
                tf1.add_to_collection(tf1.GraphKeys.UPDATE_OPS, upd_var)
    else:
        y = tf.nn.batch_normalization(xf, bc(moving_mean), bc(moving_var), bc(beta), bc(gamma), epsilon)
        y = tf.cast(y, x.dtype)
    out = tf.identity(y, name="output")
    held = {"mean": moving_mean, "variance": moving_var}
    if beta is not None:
        held["beta"] = beta
    if gamma is not None:
        held["gamma"] = gamma
    out.variables = VariableHolder(**held)
    return out
