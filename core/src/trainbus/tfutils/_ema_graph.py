"""``add_moving_summary``'s moving average of one scalar, built as one imported GraphDef.

``assign_moving_average(..., zero_debias=True)`` builds 36 ops and three variables through
TensorFlow's Python op constructors, the variable store and the distribution-strategy merge
call: about 25 ms per summarized tensor on the development machine, the largest single cost of
a small model's setup after the model itself. The same nodes, written out as ``NodeDef``s and
added with ``import_graph_def``, cost about 5 ms. The result is the same graph: the same node
names, op types, inputs, attributes and colocations, the same three resource variables (in
``GLOBAL_VARIABLES``, not trainable, known to the variable store), so checkpoints, the
initializer and ``get_variable(..., reuse=True)`` see no difference. A test builds both ways and
compares them node by node.

It is used only where the two ways cannot differ: a float32 tensor, resource variables, names
that are all still free (else TensorFlow's own constructors would pick other ones), and no
context that changes how ops are created (control dependencies, a device or colocation scope,
a control-flow context, a function being built, a variable creator, a distribution strategy).
Anywhere else, and on a TensorFlow that refuses the nodes, the caller builds the average
TensorFlow's way.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.core.framework import graph_pb2

from trainbus.tfutils._graph_import import (Nodes, import_nodes, mark_names, names_free, plain_context, resource_variable,
                                            variable_scopes, variable_store_usable)

tf1 = tf.compat.v1

__all__ = ["build", "usable"]

_FLOAT = tf.float32.as_datatype_enum


def usable(graph: Any, value: Any) -> bool:
    """Whether ``value``'s average can be imported in ``graph`` as TensorFlow's constructors
    would build it here (see the module's docstring). False too on a TensorFlow whose graph
    keeps that state otherwise than 2.21's."""
    if not isinstance(value, tf.Tensor) or value.dtype != tf.float32 or value.graph is not graph:
        return False
    if graph.get_name_scope():  # the nodes' names are absolute (add_moving_summary clears the scope)
        return False
    return plain_context(graph) and variable_store_usable() and tf1.resource_variables_enabled()


def _plan(name: str, value_name: str, decay: float) -> tuple[graph_pb2.GraphDef, list[str], dict[str, int]]:
    """The nodes of the average of the tensor ``value_name`` kept in ``EMA/<name>``, the names
    of its three variables, and the names other than the nodes' that TensorFlow's
    constructors mark as used (name scopes), with their counts."""
    var = f"EMA/{name}"
    inner = f"EMA/EMA/{name}"
    apply = f"EMA/{name}_EMA_apply"
    n = Nodes()
    n.variable(var, var, coloc_reads=False)
    rate = n.const(f"{apply}/decay", 1.0 - decay)
    biased, step = f"{inner}/biased", f"{inner}/local_step"
    n.variable(biased, var, coloc_reads=True)
    n.variable(step, var, coloc_reads=True)
    # biased -= (biased - value) * (1 - decay)
    read = n.add(f"{apply}/ReadVariableOp", "ReadVariableOp", (biased,), dtype=_FLOAT)
    sub = n.add(f"{apply}/sub", "Sub", (read, value_name), T=_FLOAT)
    mul = n.add(f"{apply}/mul", "Mul", (sub, rate), T=_FLOAT)
    upd_biased = n.add(f"{apply}/AssignSubVariableOp", "AssignSubVariableOp", (biased, mul),
                       manual=True, dtype=_FLOAT)
    n.add(f"{apply}/ReadVariableOp_1", "ReadVariableOp", (biased, "^" + upd_biased), dtype=_FLOAT)
    one = n.const(f"{apply}/Const", 1.0)
    upd_step = n.add(f"{apply}/AssignAddVariableOp", "AssignAddVariableOp", (step, one),
                     manual=True, dtype=_FLOAT)
    n.add(f"{apply}/ReadVariableOp_2", "ReadVariableOp", (step, "^" + upd_step), dtype=_FLOAT)
    # the average: biased / (1 - decay ** local_step)
    keep = n.add(f"{apply}/sub_1", "Sub", (n.const(f"{apply}/sub_1/x", 1.0), rate), T=_FLOAT)
    steps = n.add(f"{apply}/Pow/ReadVariableOp", "ReadVariableOp", (step, "^" + upd_step), dtype=_FLOAT)
    power = n.add(f"{apply}/Pow", "Pow", (keep, steps), T=_FLOAT)
    factor = n.add(f"{apply}/sub_2", "Sub", (n.const(f"{apply}/sub_2/x", 1.0), power), T=_FLOAT)
    new_biased = n.add(f"{apply}/ReadVariableOp_3", "ReadVariableOp", (biased, "^" + upd_biased), dtype=_FLOAT)
    average = n.add(f"{apply}/truediv", "RealDiv", (new_biased, factor), T=_FLOAT)
    n.add(apply, "AssignVariableOp", (var, average), dtype=_FLOAT, manual=True, validate_shape=True)
    n.add(f"{apply}/ReadVariableOp_4", "ReadVariableOp", (var, "^" + apply), dtype=_FLOAT)
    ema_read = n.add(f"EMA/{name}_EMA/ReadVariableOp", "ReadVariableOp", (var, "^" + apply), dtype=_FLOAT)
    n.add(f"EMA/{name}_EMA", "Identity", (ema_read,), T=_FLOAT)
    scopes = {k: c for v in (var, biased, step) for k, c in variable_scopes(v).items()}
    scopes[f"{apply}/EMA/{name}"] = 1  # the variable scope of biased and local_step, opened in the update's
    # the update's reads and subtractions were named ReadVariableOp, ReadVariableOp_1, ... sub_2
    scopes.update({f"{apply}/ReadVariableOp": 5, f"{apply}/sub": 3})
    return n.graph_def, [var, biased, step], scopes


def build(graph: Any, value: Any, name: str, decay: float) -> Any:
    """Import the average of ``value`` (see ``usable``) as ``EMA/<name>`` into ``graph`` and
    return the ``EMA/<name>_EMA`` tensor that updates it; None, with the graph unchanged, when a
    name it needs is taken (TensorFlow's constructors would choose other names) or when this
    TensorFlow does not accept the nodes: then TensorFlow's constructors must build it."""
    graph_def, variables, scopes = _plan(name, value.op.name if value.value_index == 0 else value.name, decay)
    if not names_free(graph, [node.name for node in graph_def.node] + list(scopes)):
        return None
    if not import_nodes(graph_def, {value.name: value}):
        return None  # refused: TensorFlow's constructors build the average
    mark_names(graph, scopes)  # the names are taken as TensorFlow's constructors take them
    for var in variables:
        graph.add_to_collection(tf1.GraphKeys.GLOBAL_VARIABLES, resource_variable(graph, var))
    return graph.get_tensor_by_name(f"EMA/{name}_EMA:0")
