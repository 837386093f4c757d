"""What the graph-import fast paths (``_ema_graph``, ``_saver_graph``) share.

Both write nodes as ``NodeDef``s and add them with one ``import_graph_def`` instead of
TensorFlow's Python op constructors, which cost about 0.25 ms per node on the development
machine. Both are used only where the import gives the graph the constructors would have
built; :func:`plain_context` is the part of that condition they have in common.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.core.framework import graph_pb2

__all__ = ["plain_context", "new_graph_def"]


def plain_context(graph: Any) -> bool:
    """Whether nothing around the current point of ``graph`` changes how an op is made: no
    function being built, no control-flow context, no control dependencies, device or
    colocation scope, no variable creator, no distribution strategy. False too on a TensorFlow
    whose graph keeps that state otherwise than 2.21's."""
    try:
        if graph.building_function or graph._get_control_flow_context() is not None:
            return False
        if graph._control_dependencies_stack or len(graph._device_function_stack) or len(graph._colocation_stack):
            return False
        if graph._variable_creator_stack or not isinstance(graph._names_in_use, dict):
            return False
    except AttributeError:
        return False
    return not tf.distribute.has_strategy()


def new_graph_def() -> graph_pb2.GraphDef:
    """An empty ``GraphDef`` of this TensorFlow's graph version."""
    graph_def = graph_pb2.GraphDef()
    graph_def.versions.producer = tf.version.GRAPH_DEF_VERSION
    graph_def.versions.min_consumer = tf.version.GRAPH_DEF_VERSION_MIN_CONSUMER
    return graph_def
