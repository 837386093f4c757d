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

import functools
from typing import Any

import tensorflow as tf
from tensorflow.core.framework import graph_pb2
from tensorflow.python.framework import op_def_registry

from trainbus.tfutils._graph_import import new_graph_def, plain_context

tf1 = tf.compat.v1

__all__ = ["build", "usable"]

_FLOAT = tf.float32.as_datatype_enum


@functools.lru_cache(maxsize=None)
def _var_handle_has_debug_name() -> bool:
    """Whether this TensorFlow's VarHandleOp has the ``debug_name`` attribute (2.21's has)."""
    op_def = op_def_registry.get("VarHandleOp")
    return op_def is not None and any(a.name == "debug_name" for a in op_def.attr)


def usable(graph: Any, value: Any) -> bool:
    """Whether ``value``'s average can be imported in ``graph`` as TensorFlow's constructors
    would build it here (see the module's docstring). False too on a TensorFlow whose graph
    keeps that state otherwise than 2.21's."""
    from tensorflow.python.ops import variable_scope

    if not isinstance(value, tf.Tensor) or value.dtype != tf.float32 or value.graph is not graph:
        return False
    if graph.get_name_scope():  # the nodes' names are absolute (add_moving_summary clears the scope)
        return False
    if not plain_context(graph):
        return False
    try:
        variable_scope._get_default_variable_store()._vars  # noqa: B018 - present, as build() needs
    except AttributeError:
        return False
    return tf1.resource_variables_enabled()


class _Nodes:
    """A GraphDef being written; each ``add`` returns the new node's name."""

    def __init__(self) -> None:
        self.graph_def = new_graph_def()

    def add(self, name: str, op: str, inputs: tuple = (), coloc: str | None = None, manual: bool = False,
            **attrs: Any) -> str:
        """``manual``: the node has the ``_has_manual_control_dependencies`` mark that
        TensorFlow's variable updates get."""
        node = self.graph_def.node.add()
        node.name, node.op = name, op
        node.input.extend(inputs)
        if manual:
            node.attr["_has_manual_control_dependencies"].b = True
        for key, val in attrs.items():
            if isinstance(val, bool):
                node.attr[key].b = val
            elif isinstance(val, bytes):
                node.attr[key].s = val
            elif key == "shape":
                node.attr[key].shape.SetInParent()  # a scalar
            elif isinstance(val, list):
                node.attr[key].list.SetInParent()
            else:
                node.attr[key].type = val
        if coloc is not None:
            node.attr["_class"].list.s.append(b"loc:@" + coloc.encode())
        return name

    def const(self, name: str, number: float, coloc: str | None = None) -> str:
        self.add(name, "Const", coloc=coloc, dtype=_FLOAT)
        tensor = self.graph_def.node[-1].attr["value"].tensor
        tensor.dtype = _FLOAT
        tensor.tensor_shape.SetInParent()
        tensor.float_val.append(number)
        return name

    def variable(self, name: str, coloc: str, coloc_reads: bool) -> str:
        """A scalar float32 resource variable initialized to 0, as ``get_variable`` makes it:
        its handle colocated with ``coloc``, and its initialization check and read too when
        ``coloc_reads`` (variables made under ``colocate_vars_with``)."""
        init = self.const(f"{name}/Initializer/zeros", 0.0, coloc=coloc)
        extra = {"debug_name": f"{name}/".encode()} if _var_handle_has_debug_name() else {}
        self.add(name, "VarHandleOp", coloc=coloc, container=b"", shared_name=name.encode(), shape=(),
                 allowed_devices=[], dtype=_FLOAT, **extra)
        self.add(f"{name}/IsInitialized/VarIsInitializedOp", "VarIsInitializedOp", (name,),
                 coloc=coloc if coloc_reads else None)
        self.add(f"{name}/Assign", "AssignVariableOp", (name, init), dtype=_FLOAT, validate_shape=False)
        self.add(f"{name}/Read/ReadVariableOp", "ReadVariableOp", (name,), coloc=coloc if coloc_reads else None,
                 dtype=_FLOAT)
        return name


def _plan(name: str, value_name: str, decay: float) -> tuple[graph_pb2.GraphDef, list[str], dict[str, int]]:
    """The nodes of the average of the tensor ``value_name`` kept in ``EMA/<name>``, the names
    of its three variables, and the names other than the nodes' that TensorFlow's
    constructors mark as used (name scopes), with their counts."""
    var = f"EMA/{name}"
    inner = f"EMA/EMA/{name}"
    apply = f"EMA/{name}_EMA_apply"
    n = _Nodes()
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
    scopes = {f"{v}/{part}": 1 for v in (var, biased, step) for part in ("Initializer", "IsInitialized", "Read")}
    scopes[f"{apply}/EMA/{name}"] = 1  # the variable scope of biased and local_step, opened in the update's
    # the update's reads and subtractions were named ReadVariableOp, ReadVariableOp_1, ... sub_2
    scopes.update({f"{apply}/ReadVariableOp": 5, f"{apply}/sub": 3})
    return n.graph_def, [var, biased, step], scopes


def build(graph: Any, value: Any, name: str, decay: float) -> Any:
    """Import the average of ``value`` (see ``usable``) as ``EMA/<name>`` into ``graph`` and
    return the ``EMA/<name>_EMA`` tensor that updates it; None, with the graph unchanged, when a
    name it needs is taken (TensorFlow's constructors would choose other names) or when this
    TensorFlow does not accept the nodes: then TensorFlow's constructors must build it."""
    from tensorflow.python.ops import resource_variable_ops, variable_scope

    graph_def, variables, scopes = _plan(name, value.op.name if value.value_index == 0 else value.name, decay)
    names = [node.name for node in graph_def.node] + list(scopes)
    if any(graph.unique_name(n, mark_as_used=False) != n for n in names):
        return None
    try:
        tf.graph_util.import_graph_def(graph_def, input_map={value.name: value}, name="")
    except (ValueError, TypeError, tf.errors.OpError):
        # a TensorFlow whose ops differ from these nodes (an op it does not have, an attribute of
        # another type): the import added nothing, and TensorFlow's constructors build the average
        return None
    # the names are taken as TensorFlow's constructors take them, for the names made after
    for scope, count in scopes.items():
        graph._names_in_use[scope.lower()] = count
    store = variable_scope._get_default_variable_store()
    for var in variables:
        # the Python variable, made with what ResourceVariable gives its base class after
        # building these nodes itself (the base class sets every attribute from them)
        variable = object.__new__(resource_variable_ops.ResourceVariable)
        resource_variable_ops.BaseResourceVariable.__init__(
            variable, trainable=False, shape=[], dtype=tf.float32, handle=graph.get_tensor_by_name(var + ":0"),
            synchronization=tf.VariableSynchronization.AUTO, aggregation=tf.VariableAggregation.NONE,
            distribute_strategy=None, name=var, unique_id=var, handle_name=var,
            graph_element=graph.get_tensor_by_name(var + "/Read/ReadVariableOp:0"),
            initial_value=graph.get_tensor_by_name(var + "/Initializer/zeros:0"),
            initializer_op=graph.get_operation_by_name(var + "/Assign"),
            is_initialized_op=graph.get_tensor_by_name(var + "/IsInitialized/VarIsInitializedOp:0"),
            cached_value=None, caching_device=None, validate_shape=True)
        graph.add_to_collection(tf1.GraphKeys.GLOBAL_VARIABLES, variable)
        store._vars[var] = variable
    return graph.get_tensor_by_name(f"EMA/{name}_EMA:0")
