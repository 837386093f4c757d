"""BatchNorm and BatchRenorm layers."""

from __future__ import annotations

import re
import weakref
from typing import Any

import tensorflow as tf
from tensorflow.python.training import moving_averages

from trainbus.models._common import data_format_nhwc, hold_norm_variables, need_tower_training
from trainbus.models.registry import layer_register
from trainbus.models.utils import VariableHolder
from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["BatchNorm", "BatchRenorm"]

_EMA_UPDATES = ("default", "collection", "internal", "skip")
_WARNED: "weakref.WeakKeyDictionary[Any, set[str]]" = weakref.WeakKeyDictionary()
_BN_ALIASES = {"use_bias": "center", "use_scale": "scale", "gamma_init": "gamma_initializer",
               "beta_init": "beta_initializer", "decay": "momentum", "use_local_stat": "training"}


def _is_main_tower(ctx: Any) -> bool:
    return ctx is None or bool(ctx.is_main_training_tower)


def _param_dtype(x: Any) -> Any:
    return tf.float32 if x.dtype in (tf.float16, tf.bfloat16) else x.dtype.base_dtype


def _stat_variables(nchan: int, dtype: Any, ctx: Any) -> tuple[Any, Any]:
    mean = tf1.get_variable("mean/EMA", [nchan], dtype=dtype, initializer=tf1.zeros_initializer(), trainable=False)
    var = tf1.get_variable("variance/EMA", [nchan], dtype=dtype, initializer=tf1.ones_initializer(), trainable=False)
    if _is_main_tower(ctx):
        for v in (mean, var):
            if v not in tf1.get_collection(tf1.GraphKeys.MODEL_VARIABLES):
                tf1.add_to_collection(tf1.GraphKeys.MODEL_VARIABLES, v)
    return mean, var


def _ema_ops(moving_mean: Any, moving_var: Any, mean: Any, var: Any, momentum: float) -> list[Any]:
    up_mean = moving_averages.assign_moving_average(moving_mean, mean, momentum, zero_debias=False,
                                                    name="mean_ema_op")
    up_var = moving_averages.assign_moving_average(moving_var, var, momentum, zero_debias=False, name="var_ema_op")
    return [up_mean.op, up_var.op]


def _sync_moments(x: Any, red_axis: list[int], sync: str, ctx: Any) -> tuple[Any, Any]:
    """Mean and variance of the whole batch across towers (``'nccl'``) or Horovod ranks."""
    mean = tf.reduce_mean(x, axis=red_axis)
    mean_sq = tf.reduce_mean(tf.square(x), axis=red_axis)
    if sync == "nccl":
        n = int(getattr(ctx, "total", 1) or 1)
        if n == 1:
            logger.warn("BatchNorm(sync_statistics='nccl') is used with only one tower: statistics are local")
        else:
            from tensorflow.python.ops import gen_nccl_ops

            shared = re.sub(r"tower[0-9]+/", "", tf1.get_variable_scope().name)
            mean = gen_nccl_ops.nccl_all_reduce(input=mean, reduction="sum", num_devices=n,
                                                shared_name=shared + "_NCCL_mean") * (1.0 / n)
            mean_sq = gen_nccl_ops.nccl_all_reduce(input=mean_sq, reduction="sum", num_devices=n,
                                                   shared_name=shared + "_NCCL_mean_square") * (1.0 / n)
    else:
        import horovod.tensorflow as hvd

        if hvd.size() == 1:
            logger.warn("BatchNorm(sync_statistics='horovod') is used with only one process: statistics are local")
        else:
            mean = hvd.allreduce(mean, op=hvd.Average)
            mean_sq = hvd.allreduce(mean_sq, op=hvd.Average)
    return mean, mean_sq - tf.square(mean)


@layer_register(aliases=_BN_ALIASES)
def BatchNorm(inputs: Any, axis: int | None = None, *, training: bool | None = None, momentum: float = 0.9,
              epsilon: float = 1e-5, center: bool = True, scale: bool = True, beta_initializer: Any = None,
              gamma_initializer: Any = None, virtual_batch_size: int | None = None,
              data_format: str = "channels_last", ema_update: str = "default",
              sync_statistics: str | None = None) -> Any:
    """Batch normalization over a 2D ``(N, C)`` or 4D input.

    Variables: ``gamma`` (if ``scale``), ``beta`` (if ``center``), and the moving statistics
    ``mean/EMA`` and ``variance/EMA`` (not trainable; in ``MODEL_VARIABLES`` when built in the
    main training tower).

    :param axis: the channel axis (1 or 3); default 1 for 2D inputs, else from ``data_format``.
    :param training: normalize with the batch statistics (True) or the moving ones (False);
        default the ``is_training`` of the current TowerContext.
    :param momentum: moving statistics are updated as ``m = momentum * m + (1 - momentum) * batch``.
        The output is normalized with the batch's population variance; the moving variance of a
        4D (or float16) input follows the unbiased batch variance (``n / (n - 1)`` times it, ``n``
        values per channel), of a 2D input the population variance, as TensorFlow's fused and
        plain batch norm kernels behind tensorpack's layer do.
    :param virtual_batch_size: "ghost" batch norm: when training, normalize each group of this
        many samples with its own statistics (the batch size must be a multiple of it); the
        moving statistics follow the first group and are updated inside the layer.
    :param ema_update: how the moving statistics are updated when training (in the main
        training tower, or in any tower that is not a training tower):
        ``'default'``/``'collection'``: the two update ops go to ``tf.GraphKeys.UPDATE_OPS``
        (run them with the train op, e.g. by ``RunUpdateOps``); ``'internal'``: the output
        depends on the updates; ``'skip'``: never update.
    :param sync_statistics: None, ``'nccl'`` (average the statistics over the towers of a
        multi-GPU trainer) or ``'horovod'`` (over the Horovod ranks). The statistics are
        ``E[x]`` and ``E[x^2]`` averaged across devices, so every device needs the same batch
        size. Updates are then always ``'internal'``.

    Aliases: ``decay`` = ``momentum``, ``use_scale`` = ``scale``, ``use_bias`` = ``center``,
    ``gamma_init``/``beta_init`` = the initializers, ``use_local_stat`` = ``training``.
    """
    from trainbus.tfutils.tower import get_current_tower_context

    if ema_update not in _EMA_UPDATES:
        raise ValueError(f"BatchNorm: ema_update={ema_update!r} must be one of {_EMA_UPDATES}")
    if ema_update == "default":
        ema_update = "collection"
    if sync_statistics is not None:
        sync_statistics = str(sync_statistics).lower()
        if sync_statistics not in ("nccl", "horovod"):
            raise ValueError(f"BatchNorm: sync_statistics={sync_statistics!r} must be None, 'nccl' or 'horovod'")
    if not 0.0 <= float(momentum) <= 1.0:
        raise ValueError(f"BatchNorm: momentum (decay) must be in [0, 1], got {momentum!r}")
    x = inputs
    shape = x.shape.as_list() if x.shape.rank is not None else None
    if shape is None or len(shape) not in (2, 4):
        raise ValueError(f"BatchNorm: input must be 2D or 4D, got shape {x.shape}")
    ndims = len(shape)
    fmt = data_format_nhwc(data_format, "BatchNorm")
    if axis is None:
        axis = 1 if ndims == 2 else (3 if fmt == "NHWC" else 1)
    if axis not in (1, 3) or axis >= ndims:
        raise ValueError(f"BatchNorm: axis={axis!r} must be 1 (2D or NCHW input) or 3 (NHWC input) for shape {shape}")
    nchan = shape[axis]
    if nchan is None:
        raise ValueError(f"BatchNorm: the channel axis {axis} of {x.shape} must be known")
    training = need_tower_training(training, "BatchNorm")
    ctx = get_current_tower_context()
    if not training:
        virtual_batch_size = None
    if sync_statistics is not None and virtual_batch_size is not None:
        raise ValueError("BatchNorm: sync_statistics and virtual_batch_size cannot be used together")
    if ctx is not None and not training and ctx.is_training and ctx.is_main_training_tower:
        warned = _WARNED.setdefault(tf1.get_default_graph(), set())
        if "frozen" not in warned:
            warned.add("frozen")
            logger.warn("Some BatchNorm layer uses the moving mean/variance while training (training=False): "
                        "its statistics stay fixed and only gamma/beta train")
    do_update = training and (ctx is None or ctx.is_main_training_tower or not ctx.is_training) \
        and ema_update != "skip"
    pdtype = _param_dtype(x)
    red_axis = [i for i in range(ndims) if i != axis]
    bshape = [1] * ndims
    bshape[axis] = nchan

    def bc(t: Any) -> Any:
        return tf.reshape(t, bshape)

    if sync_statistics is None and virtual_batch_size is None:
        gamma = tf1.get_variable("gamma", [nchan], dtype=pdtype,
                                 initializer=gamma_initializer or tf1.ones_initializer()) if scale else None
        beta = tf1.get_variable("beta", [nchan], dtype=pdtype,
                                initializer=beta_initializer or tf1.zeros_initializer()) if center else None
        moving_mean, moving_var = _stat_variables(nchan, pdtype, ctx)
        xf = tf.cast(x, pdtype)
        g = None if gamma is None else bc(gamma)
        b = None if beta is None else bc(beta)
        if training:
            mean, var = tf.nn.moments(xf, red_axis)
            y = tf.nn.batch_normalization(xf, bc(mean), bc(var), b, g, epsilon)
        else:
            y = tf.nn.batch_normalization(xf, bc(moving_mean), bc(moving_var), b, g, epsilon)
        y = tf.cast(y, x.dtype)
        if do_update:
            ema_var = var
            if ndims == 4 or x.dtype == tf.float16:
                # tensorpack normalizes 4D (and fp16) inputs with TF's fused kernel, whose batch variance for
                # the moving average carries Bessel's correction: n / (n - 1) with n values per channel
                n = tf.cast(tf.size(xf) // nchan, pdtype)
                ema_var = var * n / tf.maximum(n - 1, 1)
            updates = _ema_ops(moving_mean, moving_var, mean, ema_var, momentum)
            if ema_update == "internal":
                with tf.control_dependencies(updates):
                    out = tf.identity(y, name="output")
            else:
                for op in updates:
                    tf1.add_to_collection(tf1.GraphKeys.UPDATE_OPS, op)
                out = tf.identity(y, name="output")
        else:
            out = tf.identity(y, name="output")
    else:
        beta = tf1.get_variable("beta", [nchan], dtype=pdtype,
                                initializer=beta_initializer or tf1.zeros_initializer()) if center else None
        gamma = tf1.get_variable("gamma", [nchan], dtype=pdtype,
                                 initializer=gamma_initializer or tf1.ones_initializer()) if scale else None
        moving_mean, moving_var = _stat_variables(nchan, pdtype, ctx)
        b = tf.zeros([nchan], dtype=pdtype, name="beta") if beta is None else beta
        g = tf.ones([nchan], dtype=pdtype, name="gamma") if gamma is None else gamma
        xf = tf.cast(x, pdtype)
        if sync_statistics is not None:
            mean_vec, var_vec = _sync_moments(xf, red_axis, sync_statistics, ctx)
            y = tf.nn.batch_normalization(xf, bc(mean_vec), bc(var_vec), bc(b), bc(g), epsilon)
        else:
            vbs = int(virtual_batch_size)
            if vbs < 1 or (shape[0] is not None and shape[0] % vbs):
                raise ValueError(f"BatchNorm: virtual_batch_size={virtual_batch_size!r} must divide the batch size "
                                 f"{shape[0]}")
            dyn = tf.shape(xf)
            grouped = tf.reshape(xf, tf.concat([[-1, vbs], dyn[1:]], axis=0))
            gshape = [1] * (ndims + 1)
            gshape[axis + 1] = nchan
            mean, var = tf.nn.moments(grouped, [a + 1 for a in red_axis], keepdims=True)
            mean_vec = tf.reshape(mean[0], [nchan])
            var_vec = tf.reshape(var[0], [nchan])
            y = tf.nn.batch_normalization(grouped, mean, var, tf.reshape(b, gshape), tf.reshape(g, gshape), epsilon)
            y = tf.reshape(y, dyn)
            y.set_shape(x.shape)
        y = tf.cast(y, x.dtype)
        if do_update:
            with tf.control_dependencies(_ema_ops(moving_mean, moving_var, mean_vec, var_vec, momentum)):
                out = tf.identity(y, name="output")
        else:
            out = tf.identity(y, name="output")
    vh = out.variables = VariableHolder(moving_mean=moving_mean, mean=moving_mean, moving_variance=moving_var,
                                        variance=moving_var)
    if gamma is not None:
        vh.gamma = gamma
    if beta is not None:
        vh.beta = beta
    return out


@layer_register(aliases={"use_bias": "center", "use_scale": "scale", "gamma_init": "gamma_initializer",
                         "decay": "momentum"})
def BatchRenorm(x: Any, rmax: Any, dmax: Any, *, momentum: float = 0.9, epsilon: float = 1e-5, center: bool = True,
                scale: bool = True, gamma_initializer: Any = None, data_format: str = "channels_last") -> Any:
    """Batch renormalization (Ioffe 2017) of a 2D ``(N, C)`` or 4D input, training or not by
    the current TowerContext.

    When training, the batch-normalized value is corrected by ``r = clip(std_B / std_R,
    1/rmax, rmax)`` and ``d = clip((mean_B - mean_R) / std_R, -dmax, dmax)`` (no gradient
    through r, d), where ``mean_R``/``std_R`` are moving averages with momentum 0.99; at
    inference it normalizes with the moving mean and variance.

    Variables: ``gamma``, ``beta``, ``moving_mean``, ``moving_variance``, ``moving_stddev``,
    ``renorm_mean``, ``renorm_stddev`` (the last five not trainable). Two update ops go to
    ``tf.GraphKeys.UPDATE_OPS`` in the main training tower.

    :param rmax, dmax: the largest allowed corrections (floats or scalar tensors).
    """
    from trainbus.tfutils.tower import get_current_tower_context

    ctx = get_current_tower_context()
    if ctx is None:
        raise ValueError("BatchRenorm must be called inside a TowerContext (it trains or not by its is_training)")
    shape = x.shape.as_list() if x.shape.rank is not None else None
    if shape is None or len(shape) not in (2, 4):
        raise ValueError(f"BatchRenorm: input must be 2D or 4D, got shape {x.shape}")
    ndims = len(shape)
    fmt = "NCHW" if ndims == 2 else data_format_nhwc(data_format, "BatchRenorm")
    axis = 1 if fmt == "NCHW" else 3
    nchan = shape[axis]
    if nchan is None:
        raise ValueError(f"BatchRenorm: the channel axis {axis} of {x.shape} must be known")
    pdtype = _param_dtype(x)
    gamma = tf1.get_variable("gamma", [nchan], dtype=pdtype,
                             initializer=gamma_initializer or tf1.ones_initializer()) if scale else None
    beta = tf1.get_variable("beta", [nchan], dtype=pdtype, initializer=tf1.zeros_initializer()) if center else None

    def stat(name: str, init: float) -> Any:
        return tf1.get_variable(name, [nchan], dtype=pdtype, initializer=tf1.constant_initializer(init),
                                trainable=False)

    moving_mean, moving_var, moving_std = stat("moving_mean", 0.0), stat("moving_variance", 1.0), \
        stat("moving_stddev", 1.0)
    renorm_mean, renorm_std = stat("renorm_mean", 0.0), stat("renorm_stddev", 1.0)
    if ctx.is_main_training_tower:
        for v in (moving_mean, moving_var, moving_std, renorm_mean, renorm_std):
            tf1.add_to_collection(tf1.GraphKeys.MODEL_VARIABLES, v)
    red_axis = [i for i in range(ndims) if i != axis]
    bshape = [1] * ndims
    bshape[axis] = nchan

    def bc(t: Any) -> Any:
        return None if t is None else tf.reshape(t, bshape)

    xf = tf.cast(x, pdtype)
    if ctx.is_training:
        mean, var = tf.nn.moments(xf, red_axis)
        std = tf.sqrt(var + epsilon)
        std_r = tf.maximum(renorm_std, tf.sqrt(tf.cast(epsilon, pdtype)))
        r = tf.clip_by_value(std / std_r, 1.0 / rmax, rmax)
        d = tf.clip_by_value((mean - renorm_mean) / std_r, -dmax, dmax)
        r = tf.stop_gradient(r, name="renorm_r")
        d = tf.stop_gradient(d, name="renorm_d")
        g = r if gamma is None else r * gamma
        off = d if gamma is None else d * gamma
        if beta is not None:
            off = off + beta
        y = tf.nn.batch_normalization(xf, bc(mean), bc(var), bc(off), bc(g), epsilon)
        if ctx.is_main_training_tower:
            with tf.control_dependencies([r, d]):
                up_rm = moving_averages.assign_moving_average(renorm_mean, mean, 0.99, zero_debias=False,
                                                              name="renorm_mean_op")
                up_rs = moving_averages.assign_moving_average(renorm_std, std, 0.99, zero_debias=False,
                                                              name="renorm_stddev_op")
            with tf.control_dependencies([up_rm, up_rs]):
                up_mean = moving_averages.assign_moving_average(moving_mean, mean, momentum, zero_debias=False,
                                                                name="mean_ema_op")
                new_std = moving_averages.assign_moving_average(moving_std, std, momentum, zero_debias=False,
                                                                name="stddev_ema_op")
                up_var = tf1.assign(moving_var, tf.nn.relu(new_std * new_std - epsilon), name="var_ema_op")
            tf1.add_to_collection(tf1.GraphKeys.UPDATE_OPS, up_mean.op)
            tf1.add_to_collection(tf1.GraphKeys.UPDATE_OPS, up_var.op)
    else:
        y = tf.nn.batch_normalization(xf, bc(moving_mean), bc(moving_var), bc(beta), bc(gamma), epsilon)
    out = tf.identity(tf.cast(y, x.dtype), name="output")
    return hold_norm_variables(out, beta, gamma)
