"""Describe a model: its trainable variables as a table, tensor shapes as short strings."""

from __future__ import annotations

from typing import Any, Sequence

import tensorflow as tf

from trainbus.tfutils.common import get_op_tensor_name
from trainbus.utils.table import format_table
from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["describe_trainable_vars", "get_shape_str", "format_table"]


def describe_trainable_vars() -> str | None:
    """Log (and return) a table of the trainable variables of the default graph: name, shape,
    number of elements, and the device and dtype columns when they are not all the same
    (dtype: not all float32), then the number of variables, of parameters and their size in MB.

    Variables whose name starts with ``tower`` are skipped: data-parallel trainers build them
    as copies of the first tower's. Returns None (with a warning) when there are none.
    """
    train_vars = tf1.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES)
    if not train_vars:
        logger.warning("describe_trainable_vars: the graph has no trainable variables.")
        return None
    rows = []
    total = total_bytes = 0
    for v in train_vars:
        if v.name.startswith("tower"):
            continue
        shape = v.get_shape()
        n = shape.num_elements()
        if n is None:
            logger.warning(f"describe_trainable_vars: the shape of {v.name} is not fully defined ({shape}); "
                           "it counts as 0 parameters.")
            n = 0
        shape_str = str(shape.as_list()) if shape.rank is not None else "<unknown>"
        dtype = v.dtype.base_dtype
        total += n
        total_bytes += n * dtype.size
        rows.append([get_op_tensor_name(v.name)[0], shape_str, n, v.device, dtype.name])
    headers = ["name", "shape", "#elements", "device", "dtype"]
    if {r[4] for r in rows} <= {"float32"}:
        headers.pop(4)
        rows = [r[:4] for r in rows]
    if len({r[3] for r in rows}) <= 1:
        headers.pop(3)
        rows = [r[:3] + r[4:] for r in rows]
    text = (f"List of Trainable Variables:\n{format_table(rows, headers)}\n"
            f"Number of trainable variables: {len(rows)}\n"
            f"Number of parameters (elements): {total}\n"
            f"Storage space needed for all trainable variables: {total_bytes / 1024.0 ** 2:.02f}MB")
    logger.info(text)
    return text


def get_shape_str(tensors: Any) -> str:
    """The static shape of a tensor or variable as ``[?, 28, 28, 1]`` (unknown dimensions as
    ``?``); for a list or tuple, the shapes joined with ``", "``."""
    if isinstance(tensors, (list, tuple)):
        return ", ".join(get_shape_str(t) for t in tensors)
    if not isinstance(tensors, (tf.Tensor, tf.Variable)):
        raise TypeError(f"get_shape_str: expected a tf.Tensor, a tf.Variable or a list of them, got {tensors!r} "
                        f"of type {type(tensors).__name__}")
    shape = tensors.get_shape()
    if shape.rank is None:
        return "<unknown>"
    return str(shape.as_list()).replace("None", "?")
