"""``QueueInput``'s moving average of its queue's size, built as one imported GraphDef.

Every training fed by a ``QueueInput`` (what ``TrainConfig(dataflow=...)`` makes) keeps a
zero-debiased moving average of the number of datapoints waiting in the queue, updated with each
step and summarized as ``<scope>/queue_size``: 33 nodes and two variables made through
TensorFlow's Python constructors, about 18 ms on the development machine before the first step.
The same nodes, written as ``NodeDef``s and added with one ``import_graph_def``, cost a fraction
of that. The result is the graph the constructors build: the same node names, op types, inputs,
attributes and colocations, the same names recorded as in use, the two variables in no
collection (as ``tf.compat.v1.Variable(..., collections=[])`` leaves them; nothing keeps their
Python objects, so none is made) and the summary in ``SUMMARIES``. A test builds both ways and
compares them node by node.

It is used only where the two cannot differ: resource variables, the queue's size an int32
tensor of this graph, every name still free, and nothing around that changes how ops are made
(see ``_graph_import.plain_context``). Anywhere else, and on a TensorFlow that refuses the nodes,
the caller builds the average TensorFlow's way.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainbus.tfutils._graph_import import Nodes, import_nodes, mark_names, names_free, plain_context, variable_scopes

tf1 = tf.compat.v1

__all__ = ["usable", "build"]

_FLOAT = tf.float32.as_datatype_enum


def usable(graph: Any, size: Any) -> bool:
    """Whether the average of the queue size ``size`` can be imported in ``graph`` as
    TensorFlow's constructors would build it here (see the module's docstring)."""
    if not isinstance(size, tf.Tensor) or size.dtype != tf.int32 or size.graph is not graph:
        return False
    return plain_context(graph) and tf1.resource_variables_enabled()


def _plan(scope: str, size_name: str, decay: float) -> tuple[Any, dict[str, int]]:
    """The nodes of the average of ``size_name`` under the absolute name scope ``scope``, and
    the names other than the nodes' that TensorFlow's constructors mark as used, with their counts."""
    n = Nodes()
    s = f"{scope}/queue_size"
    n.add(s, "Cast", (size_name,), Truncate=False, SrcT=tf.int32.as_datatype_enum, DstT=_FLOAT)
    biased, count = f"{s}_biased", f"{s}_count"
    n.variable(biased, biased, coloc_reads=False, made_by="Variable")
    n.variable(count, count, coloc_reads=False, made_by="Variable")
    n.add(f"{s}_init", "NoOp", ("^" + biased + "/Assign", "^" + count + "/Assign"))
    # biased = biased * decay + size * (1 - decay)
    read = n.add(f"{scope}/ReadVariableOp", "ReadVariableOp", (biased,), dtype=_FLOAT)
    kept = n.add(f"{scope}/mul", "Mul", (read, n.const(f"{scope}/mul/y", decay)), T=_FLOAT)
    added = n.add(f"{scope}/mul_1", "Mul", (s, n.const(f"{scope}/mul_1/y", 1.0 - decay)), T=_FLOAT)
    total = n.add(f"{scope}/add", "AddV2", (kept, added), T=_FLOAT)
    upd_biased = n.add(f"{scope}/AssignVariableOp", "AssignVariableOp", (biased, total), manual=True,
                       dtype=_FLOAT, validate_shape=True)
    n.add(f"{scope}/ReadVariableOp_1", "ReadVariableOp", (biased, "^" + upd_biased), dtype=_FLOAT)
    # count += 1
    upd_count = n.add(f"{scope}/AssignAddVariableOp", "AssignAddVariableOp", (count, n.const(f"{scope}/Const", 1.0)),
                      manual=True, dtype=_FLOAT)
    n.add(f"{scope}/ReadVariableOp_2", "ReadVariableOp", (count, "^" + upd_count), dtype=_FLOAT)
    # the average: biased / (1 - decay ** count)
    base = n.const(f"{scope}/Pow/x", decay)
    steps = n.add(f"{scope}/Pow/ReadVariableOp", "ReadVariableOp", (count, "^" + upd_count), dtype=_FLOAT)
    power = n.add(f"{scope}/Pow", "Pow", (base, steps), T=_FLOAT)
    factor = n.add(f"{scope}/sub", "Sub", (n.const(f"{scope}/sub/x", 1.0), power), T=_FLOAT)
    new_biased = n.add(f"{scope}/ReadVariableOp_3", "ReadVariableOp", (biased, "^" + upd_biased), dtype=_FLOAT)
    average = n.add(f"{scope}/truediv", "RealDiv", (new_biased, factor), T=_FLOAT)
    ema = n.add(f"{s}_EMA", "Identity", (average,), T=_FLOAT)
    # its summary, tagged with the summary's own name
    tag = f"{s}-summary"
    n.add(tag, "ScalarSummary", (n.const(f"{tag}/tags", tag, tf.string), ema), T=_FLOAT)
    names = {k: c for v in (biased, count) for k, c in variable_scopes(v).items()}
    # the update's reads and products were named ReadVariableOp .. ReadVariableOp_3, mul and mul_1
    names.update({f"{scope}/ReadVariableOp": 4, f"{scope}/mul": 2})
    return n.graph_def, names


def build(graph: Any, scope: str, size: Any, decay: float) -> tuple[Any, Any] | None:
    """Import the average of the queue size ``size`` (see ``usable``) under the absolute name
    scope ``scope`` into ``graph``: returns (the op initializing its two variables, the
    ``<scope>/queue_size_EMA`` tensor that updates it), with its summary in ``SUMMARIES``; None,
    with the graph unchanged, when a name it needs is taken (TensorFlow's constructors would
    choose other names) or when this TensorFlow does not accept the nodes."""
    graph_def, names = _plan(scope, size.op.name if size.value_index == 0 else size.name, decay)
    if not names_free(graph, [node.name for node in graph_def.node] + list(names)):
        return None
    if not import_nodes(graph_def, {size.name: size}):
        return None
    # the names are taken as TensorFlow's constructors take them; the two variables are in no
    # collection and the constructors' Python objects of them were dropped at once: none is made
    mark_names(graph, names)
    graph.add_to_collection(tf1.GraphKeys.SUMMARIES, graph.get_tensor_by_name(f"{scope}/queue_size-summary:0"))
    init = graph.get_operation_by_name(f"{scope}/queue_size_init")
    return init, graph.get_tensor_by_name(f"{scope}/queue_size_EMA:0")
