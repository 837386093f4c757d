"""Regularization: ``regularize_cost``, ``regularize_cost_from_collection``, ``l1_regularizer``,
``l2_regularizer``, and the ``Dropout`` layer."""

from __future__ import annotations

import re
import weakref
from typing import Any, Callable

import tensorflow as tf

from trainbus.models._common import need_tower_training
from trainbus.models.registry import layer_register
from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["regularize_cost", "regularize_cost_from_collection", "l2_regularizer", "l1_regularizer", "Dropout"]

_LOGGED: "weakref.WeakKeyDictionary[Any, set[str]]" = weakref.WeakKeyDictionary()


def _log_once(msg: str) -> None:
    seen = _LOGGED.setdefault(tf1.get_default_graph(), set())
    if msg not in seen:
        seen.add(msg)
        logger.info(msg)


def _check_scale(scale: Any, what: str) -> float:
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or scale < 0:
        raise ValueError(f"{what}: scale must be a non-negative number, got {scale!r}")
    return float(scale)


def l2_regularizer(scale: float) -> Callable[[Any], Any]:
    """``f(w) = scale * sum(w ** 2) / 2`` (``scale * tf.nn.l2_loss(w)``)."""
    scale = _check_scale(scale, "l2_regularizer")

    def l2(w: Any) -> Any:
        with tf1.name_scope("l2_regularizer"):
            return tf.multiply(tf.cast(scale, w.dtype.base_dtype), tf.nn.l2_loss(w), name="value")

    return l2


def l1_regularizer(scale: float) -> Callable[[Any], Any]:
    """``f(w) = scale * sum(|w|)``."""
    scale = _check_scale(scale, "l1_regularizer")

    def l1(w: Any) -> Any:
        with tf1.name_scope("l1_regularizer"):
            return tf.multiply(tf.cast(scale, w.dtype.base_dtype), tf.reduce_sum(tf.abs(w)), name="value")

    return l1


def _as_float32(loss: Any, where: str) -> Any:
    if not loss.dtype.is_floating:
        raise TypeError(f"{where}: a regularization loss must be a float tensor, got {loss!r}")
    return loss if loss.dtype.base_dtype == tf.float32 else tf.cast(loss, tf.float32)


def _zero_cost(name: str) -> Any:
    """The float32 zero a regularizer gives when it has nothing to add."""
    return tf.constant(0, dtype=tf.float32, name="empty_" + name)


def _tower_collection(ctx: Any, key: str) -> list:
    """The collection ``key`` of the current tower when it has its own variables, else the whole graph's."""
    if ctx is not None and ctx.has_own_variables:
        return ctx.get_collection_in_tower(key)
    return tf1.get_collection(key)


def regularize_cost(regex: str, func: Callable[[Any], Any], name: str = "regularize_cost") -> Any:
    """The sum of ``func(v)`` over the trainable variables ``v`` whose name matches ``regex``
    (``re.search``), e.g. ``regularize_cost('fc.*/W', l2_regularizer(1e-5))``.

    In a tower with its own variables (replicated training) only that tower's variables count.
    In a TowerContext with ``is_training=False`` it is a zero constant (named ``empty_<name>``), as
    when nothing matches. The matched names are logged once.

    :return: a float32 scalar named ``name``.
    """
    from trainbus.tfutils.tower import get_current_tower_context

    if not isinstance(regex, str) or not regex:
        raise ValueError(f"regularize_cost: regex must be a non-empty str, got {regex!r}")
    if not callable(func):
        raise TypeError(f"regularize_cost: func must be callable (variable -> scalar tensor), got {func!r}")
    ctx = get_current_tower_context()
    if ctx is not None and not ctx.is_training:
        return _zero_cost(name)
    params = _tower_collection(ctx, tf1.GraphKeys.TRAINABLE_VARIABLES)
    names = []
    costs = []
    with tf1.name_scope(name + "_internals"):
        for p in params:
            if re.search(regex, p.op.name):
                costs.append(_as_float32(func(p), f"regularize_cost({regex!r})"))
                names.append(p.name)
    if not costs:
        return _zero_cost(name)
    prefix = (ctx.vs_name + "/") if ctx is not None and ctx.vs_name else ""
    if prefix:
        names = [n[len(prefix):] if n.startswith(prefix) else n for n in names]
    logger.info(f"regularize_cost() found {len(names)} variables to regularize.")
    _log_once(f"The following tensors will be regularized: {', '.join(names)}")
    return tf.add_n(costs, name=name)


def regularize_cost_from_collection(name: str = "regularize_cost") -> Any:
    """The sum of the losses in ``tf.GraphKeys.REGULARIZATION_LOSSES`` (those of the current
    tower only, in a tower with its own variables), cast to float32; a zero constant in a
    TowerContext with ``is_training=False`` or when there are none.
    """
    from trainbus.tfutils.tower import get_current_tower_context

    ctx = get_current_tower_context()
    if ctx is not None and not ctx.is_training:
        return _zero_cost(name)
    losses = _tower_collection(ctx, tf1.GraphKeys.REGULARIZATION_LOSSES)
    if not losses:
        return _zero_cost(name)
    logger.info(f"regularize_cost_from_collection() found {len(losses)} regularizers "
                "in REGULARIZATION_LOSSES collection.")
    return tf.add_n([_as_float32(x, "regularize_cost_from_collection") for x in losses], name=name)


@layer_register(use_scope=None)
def Dropout(x: Any, *args: Any, rate: Any = None, noise_shape: Any = None, seed: int | None = None,
            training: bool | None = None, keep_prob: Any = None, is_training: bool | None = None) -> Any:
    """Dropout, active only when training (the TowerContext's ``is_training`` unless
    ``training`` is given). The name is optional: ``Dropout(x, rate=0.5)`` or
    ``Dropout('drop', x, rate=0.5)``.

    :param rate: fraction of units dropped (default 0.5).
    :param args: one positional argument is the probability to KEEP (tensorpack's historical
        order): ``Dropout(x, 0.8)`` drops 20%. Prefer ``rate=``.
    :param keep_prob: older spelling: ``rate = 1 - keep_prob``.
    :param is_training: older spelling of ``training``.
    """
    if is_training is not None:
        if training is not None:
            raise ValueError("Dropout: give training or is_training, not both")
        training = is_training
    given = [n for n, v in (("a positional keep probability", args[0] if args else None), ("keep_prob", keep_prob),
                            ("rate", rate)) if v is not None]
    if len(args) > 1:
        raise TypeError(f"Dropout takes one positional argument after the input (the keep probability), "
                        f"got {len(args)}")
    if len(given) > 1:
        raise ValueError(f"Dropout: give only one of {given}, not both")
    if args:
        if isinstance(args[0], (int, float)) and args[0] != 0.5:
            logger.warn("Dropout: the positional argument is the probability to KEEP, not to drop "
                        "(unlike tf.nn.dropout's rate); use rate= to say the drop rate explicitly")
        rate = 1 - args[0]
    elif keep_prob is not None:
        rate = 1 - keep_prob
    elif rate is None:
        rate = 0.5
    if isinstance(rate, (int, float)) and not 0.0 <= float(rate) < 1.0:
        raise ValueError(f"Dropout: rate must be in [0, 1) (keep_prob in (0, 1]), got rate={rate!r}")
    if need_tower_training(training, "Dropout"):
        return tf.nn.dropout(x, rate=rate, noise_shape=noise_shape, seed=seed)
    return tf.identity(x)
