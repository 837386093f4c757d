"""Summaries of tensors, parameters, activations and moving averages (tensorpack's
``tfutils.summary``).

Every function here is a no-op when called while a tower other than the main training
tower is being built (inference towers, the second GPU's tower, ...), so a tower function
can call them unconditionally. Outside any tower context they do add summaries.
"""

from __future__ import annotations

import re
import weakref
from typing import Any, Sequence

import tensorflow as tf
from tensorflow.python.training import moving_averages

from trainbus.tfutils import _ema_graph
from trainbus.tfutils.tower import MOVING_SUMMARY_OPS_KEY, get_current_tower_context
from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["add_tensor_summary", "add_param_summary", "add_activation_summary", "add_moving_summary",
           "MOVING_SUMMARY_OPS_KEY", "create_scalar_summary", "create_image_summary"]

#: The collection ``add_moving_summary`` puts its EMA-maintaining tensors in, and that
#: ``MovingAverageSummary`` runs by default.

#: Summary types of :func:`add_tensor_summary`.
SUMMARY_TYPES = ("scalar", "histogram", "sparsity", "mean", "rms")

_TOWER_PREFIX = re.compile(r"tower[0-9]+/")


def _in_other_tower() -> bool:
    ctx = get_current_tower_context()
    return ctx is not None and not ctx.is_main_training_tower


def _check_types(types: Any, where: str) -> list[str]:
    if isinstance(types, str):
        raise TypeError(f"{where}: types must be a list of summary types, got the string {types!r}; "
                        f"write [{types!r}]")
    try:
        types = list(types)
    except TypeError:
        raise TypeError(f"{where}: types must be a list of summary types, got {types!r}") from None
    bad = [t for t in types if t not in SUMMARY_TYPES]
    if bad:
        raise ValueError(f"{where}: unknown summary type(s) {bad}; choose from {list(SUMMARY_TYPES)}")
    return types


def _check_collections(collections: Any, where: str) -> list[str] | None:
    if collections is None:
        return None
    if isinstance(collections, str):
        raise TypeError(f"{where}: collections must be a list of collection names, got the string "
                        f"{collections!r}; write [{collections!r}]")
    return list(collections)


def add_tensor_summary(x: Any, types: Sequence[str], name: str | None = None, collections: Sequence[str] | None = None,
                       main_tower_only: bool = True) -> None:
    """Summarize a tensor in several ways.

    :param x: the tensor.
    :param types: any of ``scalar`` (the value itself, tag ``<name>-summary``), ``histogram``
        (``<name>-histogram``), ``sparsity`` (fraction of zeros, ``<name>-sparsity``), ``mean``
        (``<name>-mean``) and ``rms`` (root mean square, ``<name>-rms``).
    :param name: the summary name; defaults to the op name of ``x``.
    :param collections: collections of the summary ops (default ``tf.GraphKeys.SUMMARIES``).
    :param main_tower_only: do nothing when called under a tower other than the main training tower.

    Example::

        with tf.name_scope('mysummaries'):  # keeps TensorBoard tidy
            add_tensor_summary(tensor, ['histogram', 'rms', 'sparsity'], name='mytensor')
    """
    types = _check_types(types, "add_tensor_summary")
    collections = _check_collections(collections, "add_tensor_summary")
    if main_tower_only and _in_other_tower():
        return
    if name is None:
        name = x.op.name
    makers = {
        "scalar": lambda: tf1.summary.scalar(name + "-summary", x, collections=collections),
        "histogram": lambda: tf1.summary.histogram(name + "-histogram", x, collections=collections),
        "sparsity": lambda: tf1.summary.scalar(name + "-sparsity", tf.nn.zero_fraction(x), collections=collections),
        "mean": lambda: tf1.summary.scalar(name + "-mean", tf.reduce_mean(x), collections=collections),
        "rms": lambda: tf1.summary.scalar(
            name + "-rms", tf.sqrt(tf.reduce_mean(tf.square(tf.cast(x, tf.float32)))), collections=collections),
    }
    done = set()
    for t in types:
        if t not in done:
            makers[t]()
            done.add(t)


def add_activation_summary(x: Any, types: Sequence[str] | None = None, name: str | None = None,
                           collections: Sequence[str] | None = None) -> None:
    """:func:`add_tensor_summary` under the (reused) top-level name scope ``activation-summary``.
    A no-op outside the main training tower.

    :param types: default ``['sparsity', 'rms', 'histogram']``.
    :param name: default the name of ``x``.
    """
    if types is None:
        types = ["sparsity", "rms", "histogram"]
    types = _check_types(types, "add_activation_summary")
    if _in_other_tower():
        return
    ndim = x.get_shape().ndims
    if ndim is not None and ndim < 2:
        logger.warning(f"add_activation_summary: {x.name} has rank {ndim}; activations of rank < 2 are not summarized")
        return
    with tf1.name_scope("activation-summary/"):
        add_tensor_summary(x, types, name=name, collections=collections)


def add_param_summary(*summary_lists: Any, collections: Sequence[str] | None = None) -> None:
    """Summarize every trainable variable whose name matches a regex, under the (reused)
    top-level name scope ``param-summary``. A no-op outside the main training tower.

    :param summary_lists: each a ``(regex, [summary types])`` pair; the regex must match the
        whole variable name (``$`` is implied).
    :param collections: collections of the summary ops.

    Example::

        add_param_summary(('.*/W', ['histogram', 'rms']), ('.*/gamma', ['scalar']))
    """
    checked = []
    for i, item in enumerate(summary_lists):
        if not isinstance(item, (tuple, list)) or len(item) != 2 or not isinstance(item[0], str):
            raise TypeError(f"add_param_summary: argument {i} must be a (regex, [summary types]) pair, got {item!r}")
        rgx = item[0] if item[0].endswith("$") else item[0] + "$"
        try:
            compiled = re.compile(rgx)
        except re.error as e:
            raise ValueError(f"add_param_summary: invalid regex {item[0]!r}: {e}") from None
        checked.append((compiled, _check_types(item[1], "add_param_summary")))
    collections = _check_collections(collections, "add_param_summary")
    if _in_other_tower():
        return
    params = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES)
    with tf1.name_scope("param-summary/"):
        for p in params:
            name = p.op.name
            for rgx, types in checked:
                if rgx.match(name):
                    add_tensor_summary(p, types, name=name, collections=collections)


_EMA_SCOPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _ema_scope() -> Any:
    """The top-level variable scope ``EMA`` of the default graph, created once per graph."""
    g = tf1.get_default_graph()
    vs = _EMA_SCOPES.get(g)
    if vs is None:
        with tf1.variable_scope(tf1.VariableScope(reuse=False, name=""), auxiliary_name_scope=False):
            with tf1.variable_scope("EMA") as vs:
                pass
        _EMA_SCOPES[g] = vs
    return vs


def add_moving_summary(*args: Any, decay: float = 0.95, collection: str | None = MOVING_SUMMARY_OPS_KEY,
                       summary_collections: Sequence[str] | None = None) -> list[Any]:
    """Summarize the exponential moving average of scalar tensors. A no-op (returning ``[]``)
    outside the main training tower.

    Each tensor ``x`` gets a non-trainable variable ``EMA/<x's name>`` kept by
    ``assign_moving_average`` (zero-debiased) and a scalar summary ``<x's name>-summary`` of
    the average, which monitors receive as the scalar ``<x's name>`` (e.g. ``cost``).

    :param args: scalar tensors.
    :param decay: the decay of the moving average.
    :param collection: the collection to add the EMA-maintaining tensors to (None: none); the
        default is run at every step by the default ``MovingAverageSummary`` callback.
    :param summary_collections: collections of the summary ops (default ``tf.GraphKeys.SUMMARIES``).
    :returns: the EMA-maintaining tensors (evaluating one updates its average).
    """
    if not 0.0 <= float(decay) < 1.0:
        raise ValueError(f"add_moving_summary: decay must be in [0, 1), got {decay!r}")
    summary_collections = _check_collections(summary_collections, "add_moving_summary")
    if collection is not None and not isinstance(collection, str):
        raise TypeError(f"add_moving_summary: collection must be a collection name (str) or None, got {collection!r}")
    for x in args:
        if isinstance(x, (list, tuple)):
            raise TypeError("add_moving_summary takes tensors as separate arguments: add_moving_summary(*tensors)")
        if not isinstance(x, (tf.Tensor, tf.Variable)):
            raise TypeError(f"add_moving_summary: expected scalar tf.Tensors, got {x!r} of type {type(x).__name__}")
        if x.get_shape().ndims != 0:
            raise ValueError(f"add_moving_summary: only scalar tensors can be summarized; {x.name} has shape {x.get_shape()}")
    if _in_other_tower():
        return []
    if tf1.get_variable_scope().reuse is True:
        logger.warning("add_moving_summary() was called under a reuse=True variable scope and does nothing there.")
        return []
    graph = tf1.get_default_graph()
    ema_tensors = []
    for x in args:
        name = _TOWER_PREFIX.sub("", x.op.name)
        with tf1.name_scope(None):
            value = x if x.dtype.is_floating else tf.cast(x, tf.float32)
            vs = _ema_scope()
            with tf1.variable_scope(vs, auxiliary_name_scope=False):
                full = f"{vs.name}/{name}:0"
                if any(v.name == full for v in tf1.global_variables()):
                    raise ValueError(f"add_moving_summary: a moving summary named {name!r} already exists in this graph "
                                     "(EMA/" + name + "); give the tensor another name with tf.identity(x, name=...)")
                ema = None
                if vs.original_name_scope == "EMA/" and _ema_graph.usable(graph, value):
                    ema = _ema_graph.build(graph, value, name, decay)  # the same graph, ~5x faster
                if ema is None:
                    ema_var = tf1.get_variable(name, shape=value.shape, dtype=value.dtype.base_dtype,
                                               initializer=tf1.zeros_initializer(), trainable=False)
                    with tf1.name_scope(vs.original_name_scope):
                        updated = moving_averages.assign_moving_average(
                            ema_var, value, decay, zero_debias=True, name=name + "_EMA_apply")
                        ema = tf.identity(updated, name=name + "_EMA")
            tf1.summary.scalar(name + "-summary", ema, collections=summary_collections)
        ema_tensors.append(ema)
    if collection is not None:
        for t in ema_tensors:
            graph.add_to_collection(collection, t)
    return ema_tensors


def create_scalar_summary(name: str, v: Any) -> Any:
    """A ``tf.compat.v1.Summary`` holding one scalar."""
    if not isinstance(name, str):
        raise TypeError(f"create_scalar_summary: name must be a str, got {name!r}")
    s = tf1.Summary()
    s.value.add(tag=name, simple_value=float(v))
    return s


def create_image_summary(name: str, val: Any) -> Any:
    """A ``tf.compat.v1.Summary`` of an NHWC batch of images in [0, 255] (3 channels: RGB)."""
    import numpy as np

    from trainbus.utils.image import image_summary

    arr = np.asarray(val)
    if arr.ndim != 4:
        raise ValueError(f"create_image_summary({name!r}): expected an NHWC array, got shape {arr.shape}")
    return image_summary(name, arr)
