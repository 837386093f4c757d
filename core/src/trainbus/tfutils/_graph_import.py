"""What the graph-import fast paths (``_ema_graph``, ``_saver_graph``, ``_step_graph``,
``_queue_size_graph``) share.

Each writes nodes as ``NodeDef``s and adds them with one ``import_graph_def`` instead of
TensorFlow's Python op constructors, which cost about 0.25 ms per node on the development
machine. Each is used only where the import gives the graph the constructors would have
built; :func:`plain_context` is the part of that condition they have in common. :class:`Nodes`
writes the nodes, :func:`resource_variable` makes the Python variable of imported ones.
"""

from __future__ import annotations

import functools
from typing import Any

import tensorflow as tf
from tensorflow.core.framework import graph_pb2
from tensorflow.python.framework import op_def_registry

__all__ = ["plain_context", "new_graph_def", "names_free", "import_nodes", "mark_names", "Nodes", "variable_scopes",
           "resource_variable", "variable_store_usable"]


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


def names_free(graph: Any, names: Any) -> bool:
    """Whether TensorFlow's constructors would give each of ``names`` (absolute) as it is, i.e.
    none is taken yet in ``graph``."""
    with graph.name_scope(None):
        return all(graph.unique_name(name, mark_as_used=False) == name for name in names)


def import_nodes(graph_def: Any, input_map: dict | None = None) -> bool:
    """Add ``graph_def``'s nodes, under their own names, to the default graph; False when this
    TensorFlow refuses them (an op it does not have, an attribute of another type). The import
    is all or nothing: refused, it added nothing."""
    try:
        tf.graph_util.import_graph_def(graph_def, input_map=input_map, name="")
    except (ValueError, TypeError, tf.errors.OpError):
        return False
    return True


def mark_names(graph: Any, counts: dict[str, int]) -> None:
    """Record each of ``counts``' names (absolute) as used that many times, as TensorFlow's
    constructors leave them (the import marks each node's name once, and no name scope)."""
    for name, count in counts.items():
        graph._names_in_use[name.lower()] = count


@functools.lru_cache(maxsize=None)
def _var_handle_has_debug_name() -> bool:
    """Whether this TensorFlow's VarHandleOp has the ``debug_name`` attribute (2.21's has)."""
    op_def = op_def_registry.get("VarHandleOp")
    return op_def is not None and any(a.name == "debug_name" for a in op_def.attr)


#: the name of a variable's initial value node under ``<variable>/Initializer/``, by what made it
_INITIAL_VALUE = {"get_variable": "zeros", "Variable": "initial_value"}


class Nodes:
    """A GraphDef being written; each ``add`` returns the new node's name."""

    def __init__(self) -> None:
        self.graph_def = new_graph_def()

    def add(self, name: str, op: str, inputs: Any = (), coloc: str | None = None, manual: bool = False,
            device: str = "", **attrs: Any) -> str:
        """``manual``: the node has the ``_has_manual_control_dependencies`` mark that
        TensorFlow's variable updates get. Attributes: bool, bytes, ``shape`` (a scalar), an
        empty list, else a dtype enum."""
        node = self.graph_def.node.add()
        node.name, node.op = name, op
        if device:
            node.device = device
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

    def const(self, name: str, number: float | str, dtype: Any = tf.float32, coloc: str | None = None) -> str:
        """A scalar constant of ``dtype`` (float32, int64, or string: ``number`` is then a str)."""
        enum = dtype.as_datatype_enum
        self.add(name, "Const", coloc=coloc, dtype=enum)
        tensor = self.graph_def.node[-1].attr["value"].tensor
        tensor.dtype = enum
        tensor.tensor_shape.SetInParent()
        if dtype == tf.int64:
            tensor.int64_val.append(int(number))
        elif dtype == tf.string:
            tensor.string_val.append(str(number).encode())
        else:
            tensor.float_val.append(number)
        return name

    def variable(self, name: str, coloc: str, coloc_reads: bool, dtype: Any = tf.float32,
                 made_by: str = "get_variable") -> str:
        """A scalar resource variable of ``dtype`` initialized to 0, as ``get_variable`` makes
        it: its handle colocated with ``coloc``, and its initialization check and read too when
        ``coloc_reads`` (variables made under ``colocate_vars_with``). With ``made_by="Variable"``,
        as ``tf.compat.v1.Variable(0.0, ...)`` makes it instead: the initial value's node is
        ``Initializer/initial_value`` and the initializing assignment carries the mark of a
        variable update."""
        enum = dtype.as_datatype_enum
        init = self.const(f"{name}/Initializer/{_INITIAL_VALUE[made_by]}", 0, dtype, coloc=coloc)
        extra = {"debug_name": f"{name}/".encode()} if _var_handle_has_debug_name() else {}
        self.add(name, "VarHandleOp", coloc=coloc, container=b"", shared_name=name.encode(), shape=(),
                 allowed_devices=[], dtype=enum, **extra)
        self.add(f"{name}/IsInitialized/VarIsInitializedOp", "VarIsInitializedOp", (name,),
                 coloc=coloc if coloc_reads else None)
        self.add(f"{name}/Assign", "AssignVariableOp", (name, init), manual=made_by == "Variable", dtype=enum,
                 validate_shape=False)
        self.add(f"{name}/Read/ReadVariableOp", "ReadVariableOp", (name,), coloc=coloc if coloc_reads else None,
                 dtype=enum)
        return name


def variable_scopes(name: str) -> dict[str, int]:
    """The name scopes TensorFlow's constructors mark for the variable ``name`` besides its
    nodes' names (each once)."""
    return {f"{name}/{part}": 1 for part in ("Initializer", "IsInitialized", "Read")}


def resource_variable(graph: Any, name: str, dtype: Any = tf.float32,
                      aggregation: Any = tf.VariableAggregation.NONE) -> Any:
    """The Python ``ResourceVariable`` of the imported nodes of :meth:`Nodes.variable` ``name``
    (not trainable), made with what ``ResourceVariable`` gives its base class after building
    those nodes itself (the base class sets every attribute from them); registered in the
    variable store, so ``get_variable(..., reuse=True)`` finds it. The caller adds it to its
    collections."""
    from tensorflow.python.ops import resource_variable_ops, variable_scope

    variable = object.__new__(resource_variable_ops.ResourceVariable)
    resource_variable_ops.BaseResourceVariable.__init__(
        variable, trainable=False, shape=[], dtype=dtype, handle=graph.get_tensor_by_name(name + ":0"),
        synchronization=tf.VariableSynchronization.AUTO, aggregation=aggregation,
        distribute_strategy=None, name=name, unique_id=name, handle_name=name,
        graph_element=graph.get_tensor_by_name(name + "/Read/ReadVariableOp:0"),
        initial_value=graph.get_tensor_by_name(name + "/Initializer/zeros:0"),
        initializer_op=graph.get_operation_by_name(name + "/Assign"),
        is_initialized_op=graph.get_tensor_by_name(name + "/IsInitialized/VarIsInitializedOp:0"),
        cached_value=None, caching_device=None, validate_shape=True)
    variable_scope._get_default_variable_store()._vars[name] = variable
    return variable


def variable_store_usable() -> bool:
    """Whether the default variable store keeps its variables as 2.21's does."""
    from tensorflow.python.ops import variable_scope

    try:
        return isinstance(variable_scope._get_default_variable_store()._vars, dict)
    except AttributeError:
        return False
