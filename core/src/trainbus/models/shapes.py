"""ConcatWith: ``tf.concat`` as a layer, for :class:`LinearWrap` chains."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainbus.models.registry import layer_register

__all__ = ["ConcatWith"]


@layer_register(use_scope=None)
def ConcatWith(x: Any, tensor: Any, dim: int) -> Any:
    """``tf.concat([x] + tensor, dim)``.

    :param tensor: a tensor or a list of tensors put after ``x``.
    :param dim: the axis to concatenate along.
    """
    if not isinstance(tensor, list):
        tensor = list(tensor) if isinstance(tensor, tuple) else [tensor]
    return tf.concat([x] + tensor, dim)
