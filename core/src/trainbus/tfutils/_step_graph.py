"""The trainer's ``global_step`` variable and its increment, built as one imported GraphDef.

Every training makes them before its first step: ``tf.compat.v1.train.get_or_create_global_step()``
(five nodes and a variable, through the variable store and the distribution-strategy machinery)
and ``global_step.assign_add(1, read_value=False)`` (a constant and the update), about 5 ms on
the development machine, which the same seven nodes written as ``NodeDef``s and added with one
``import_graph_def`` cut to about 2 ms (medians of 20 fresh processes: 5.3 and 1.8 ms). The
result is the graph TensorFlow's constructors build: the same node names, op types, inputs and
attributes, the same names recorded as in use, the same Python ``ResourceVariable`` (in
``GLOBAL_VARIABLES`` and ``GLOBAL_STEP``, not trainable, aggregated ``ONLY_FIRST_REPLICA``, known
to the variable store). A test builds both ways and compares them node by node.

It is used only where the global step does not exist yet, resource variables are on, the
variable's names are free, and nothing around changes how ops are made (see
``_graph_import.plain_context``); anywhere else, and on a TensorFlow that refuses the nodes, the
trainer makes them TensorFlow's way.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainbus.tfutils._graph_import import (Nodes, import_nodes, mark_names, names_free, plain_context, resource_variable,
                                            variable_scopes, variable_store_usable)

tf1 = tf.compat.v1

__all__ = ["usable", "build"]

_NAME = "global_step"


def usable(graph: Any) -> bool:
    """Whether ``graph`` has no global step yet and the import would build what TensorFlow's
    constructors build here."""
    if graph.get_collection(tf1.GraphKeys.GLOBAL_STEP) or not tf1.resource_variables_enabled():
        return False
    return plain_context(graph) and variable_store_usable()


def build(graph: Any) -> Any:
    """Import the ``global_step`` variable and its increment into ``graph`` (see ``usable``);
    returns the increment op, or None, with the graph unchanged, when a name the variable needs
    is taken or this TensorFlow refuses the nodes."""
    from tensorflow.python.ops import variable_scope

    n = Nodes()
    n.variable(_NAME, _NAME, coloc_reads=False, dtype=tf.int64)
    scopes = variable_scopes(_NAME)
    if not names_free(graph, [node.name for node in n.graph_def.node] + list(scopes)):
        return None
    if _NAME in variable_scope._get_default_variable_store()._vars:
        return None
    names_before = dict(graph._names_in_use)
    with graph.name_scope(None):
        # the increment's names, marked as TensorFlow marks them (after the variable's)
        const, update = graph.unique_name("Const"), graph.unique_name("AssignAddVariableOp")
    n.const(const, 1, tf.int64)
    n.add(update, "AssignAddVariableOp", (_NAME, const), dtype=tf.int64.as_datatype_enum)
    if not import_nodes(n.graph_def):
        graph._names_in_use.clear()
        graph._names_in_use.update(names_before)  # the import added nothing; the names are free again
        return None
    mark_names(graph, scopes)
    variable = resource_variable(graph, _NAME, tf.int64, tf.VariableAggregation.ONLY_FIRST_REPLICA)
    graph.add_to_collection(tf1.GraphKeys.GLOBAL_VARIABLES, variable)
    graph.add_to_collection(tf1.GraphKeys.GLOBAL_STEP, variable)
    return graph.get_operation_by_name(update)
