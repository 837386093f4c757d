"""A ``tf.compat.v1.train.Saver`` whose restore ops are added as one imported GraphDef.

A ``Saver`` builds, for every variable it restores, an ``Identity`` of the value read from the
checkpoint and an ``AssignVariableOp`` (for resource variables), then one ``NoOp`` that groups
the assignments. Built through TensorFlow's Python op constructors these are about 0.25 ms per
node on the development machine: some 0.1-0.15 s per 200 variables, per ``Saver``, before the
first step (``ModelSaver`` builds one, a restore at startup another). Written out as
``NodeDef``s and added with one ``import_graph_def`` they cost about a third of that.

The builder here (:class:`ImportingSaverBuilder`) is TensorFlow's own bulk builder with only
that part replaced, and only where the result is the same graph: the same node names, op
types, inputs, devices and attributes, the same record of names in use. That is where every
variable is a plain resource variable saved whole (no partition slice), the read values'
shapes are unknown (as ``RestoreV2`` gives them), no reshape is asked for, the names are free
and nothing around the ``Saver`` changes how ops are made (control dependencies, a device or
colocation scope, a control-flow context, a function). Anywhere else, and on a TensorFlow that
refuses the nodes, TensorFlow's builder builds them; the save ops are always TensorFlow's.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf
from tensorflow.python.training import saver as saver_lib
from tensorflow.python.training.saving import saveable_object_util

from trainbus.tfutils._graph_import import Nodes, import_nodes, mark_names, names_free, plain_context

tf1 = tf.compat.v1

__all__ = ["ImportingSaverBuilder", "restore_importable", "make_saver"]


def restore_importable(graph: Any, saveables: list, tensors: list, reshape: bool) -> bool:
    """Whether the restore ops of ``saveables`` (read from the checkpoint as ``tensors``) can
    be imported into ``graph`` as TensorFlow's builder would make them here."""
    if reshape or not saveables or len(saveables) != len(tensors) or not plain_context(graph):
        return False
    for saveable, value in zip(saveables, tensors):
        if type(saveable) is not saveable_object_util.ResourceVariableSaveable or len(saveable.specs) != 1:
            return False
        if saveable.specs[0].slice_spec or value.shape.rank is not None:
            return False
        handle = saveable.handle_op
        if not isinstance(handle, tf.Tensor) or handle.graph is not graph or handle.dtype != tf.resource:
            return False
        if value.dtype != saveable.specs[0].dtype:
            return False
    return True


def _plan(scope: str, saveables: list, tensors: list, group_name: str | None) -> tuple[Any, list[str]]:
    """The ``Identity`` and ``AssignVariableOp`` nodes (names relative to ``scope``, which
    ends with ``/``) and, when ``group_name`` is given (every variable on one device), the
    ``NoOp`` grouping them; returns the GraphDef and the assignments' names."""
    n = Nodes()
    assigns = []
    for i, (saveable, value) in enumerate(zip(saveables, tensors)):
        suffix = f"_{i}" if i else ""
        device = saveable._var_device
        dtype = value.dtype.as_datatype_enum
        ident = n.add(f"{scope}Identity{suffix}", "Identity", (value.op.name if value.value_index == 0 else value.name,),
                      device=device, T=dtype)
        handle = saveable.handle_op
        # with a group, group() marks each op it makes a control input of
        assigns.append(n.add(f"{scope}AssignVariableOp{suffix}", "AssignVariableOp",
                             (handle.op.name if handle.value_index == 0 else handle.name, ident),
                             manual=group_name is not None, device=device, validate_shape=False, dtype=dtype))
    if group_name is not None:
        n.add(f"{scope}{group_name}", "NoOp", ["^" + name for name in assigns], device=saveables[0]._var_device)
    return n.graph_def, assigns


def _import_restore_ops(graph: Any, saveables: list, tensors: list, name: str) -> Any:
    """The restore op of ``saveables`` imported into ``graph``, or None (nothing added) when a
    name it needs is taken or this TensorFlow refuses the nodes."""
    scope = graph.get_name_scope()
    scope = scope + "/" if scope else ""
    devices = {s._var_device for s in saveables}
    grouped = len(devices) == 1 and bool(name) and "/" not in name
    graph_def, assigns = _plan(scope, saveables, tensors, name if grouped else None)
    if not names_free(graph, [node.name for node in graph_def.node]):
        return None
    input_map = {}
    for saveable, value in zip(saveables, tensors):
        input_map[value.name] = value
        input_map[saveable.handle_op.name] = saveable.handle_op
    if not import_nodes(graph_def, input_map):
        return None  # all or nothing: the graph is unchanged
    # TensorFlow's constructors count the repeated base names
    mark_names(graph, {f"{scope}Identity": len(saveables), f"{scope}AssignVariableOp": len(saveables)})
    if grouped:
        return graph.get_operation_by_name(f"{scope}{name}")
    from tensorflow.python.ops import control_flow_ops

    return control_flow_ops.group(*(graph.get_operation_by_name(a) for a in assigns), name=name)


class ImportingSaverBuilder(saver_lib.BulkSaverBuilder):
    """TensorFlow's bulk saver builder, whose per-variable restore ops are imported as one
    GraphDef where that gives the same graph (see the module's docstring)."""

    #: how many restore ops this process built each way (``"imported"``, ``"tensorflow"``)
    counts = {"imported": 0, "tensorflow": 0}

    def _AddRestoreOps(self, filename_tensor: Any, saveables: list, restore_sequentially: bool, reshape: bool,
                       preferred_shard: int = -1, name: str = "restore_all") -> Any:
        if reshape:
            ImportingSaverBuilder.counts["tensorflow"] += 1
            return super()._AddRestoreOps(filename_tensor, saveables, restore_sequentially, reshape,
                                          preferred_shard=preferred_shard, name=name)
        graph = filename_tensor.graph
        tensors = self.bulk_restore(filename_tensor, saveables, preferred_shard, restore_sequentially)
        if restore_importable(graph, saveables, tensors, reshape):
            op = _import_restore_ops(graph, saveables, tensors, name)
            if op is not None:
                ImportingSaverBuilder.counts["imported"] += 1
                return op
        # TensorFlow's builder, from the bulk restore made above (as its own code goes on)
        ImportingSaverBuilder.counts["tensorflow"] += 1
        from tensorflow.python.ops import control_flow_ops

        assigns, i = [], 0
        for saveable in saveables:
            n = len(saveable.specs)
            assigns.append(saveable.restore(tensors[i:i + n], None))
            i += n
        return control_flow_ops.group(*assigns, name=name)


def make_saver(var_list: Any = None, **kwargs: Any) -> Any:
    """``tf.compat.v1.train.Saver(var_list, **kwargs)`` built with :class:`ImportingSaverBuilder`
    (unless ``kwargs`` gives a ``builder`` or a ``saver_def``)."""
    if "builder" not in kwargs and kwargs.get("saver_def") is None:
        version = kwargs.get("write_version", tf1.train.SaverDef.V2)
        kwargs["builder"] = ImportingSaverBuilder(version)
    return tf1.train.Saver(var_list=var_list, **kwargs)
