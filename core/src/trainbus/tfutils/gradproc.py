"""Gradient processors: transform ``[(grad, var)]`` before the optimizer applies them."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["GradientProcessor", "FilterNoneGrad"]


class GradientProcessor:
    """Base class: ``process(grads)`` runs ``_process`` under the processor's name scope.
    Subclasses override ``_process(grads)``."""

    _name_scope: str | None = None

    def process(self, grads: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        """Process a list of ``(grad, var)``; returns a list of the same kind."""
        name = self._name_scope or type(self).__name__
        with tf1.name_scope(name):
            return self._process(list(grads))

    def _process(self, grads: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        raise TypeError(f"{type(self).__name__} must implement _process(grads)")


class FilterNoneGrad(GradientProcessor):
    """Drop ``(None, var)`` pairs with a warning instead of crashing."""

    def __init__(self, verbose: bool = True) -> None:
        self._verbose = verbose

    def _process(self, grads: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        kept, dropped = [], []
        for g, v in grads:
            (dropped if g is None else kept).append((g, v))
        if self._verbose and dropped:
            logger.warning(f"No gradient w.r.t {len(dropped)} trainable variables: {', '.join(v.op.name for _, v in dropped)}")
        return kept
