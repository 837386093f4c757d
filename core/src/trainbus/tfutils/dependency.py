"""Which ops a fetch depends on (to run hooks only with the ops that need them)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

tf1 = tf.compat.v1

__all__ = ["dependency_of_targets", "dependency_of_fetches"]

_CACHE: dict[tuple, bool] = {}


def _as_op(x: Any) -> Any:
    if isinstance(x, tf.Tensor):
        return x.op
    if isinstance(x, tf1.Variable) or hasattr(x, "op") and not isinstance(x, tf.Operation):
        return x.op
    if isinstance(x, tf.Operation):
        return x
    raise TypeError(f"expected a tf.Operation, tf.Tensor or variable, got {x!r} ({type(x).__name__})")


def _ancestors_contain(targets: tuple, op: Any) -> bool:
    seen = set()
    stack = [_as_op(t) for t in targets]
    while stack:
        cur = stack.pop()
        if cur is op:
            return True
        if cur in seen:
            continue
        seen.add(cur)
        stack.extend(t.op for t in cur.inputs)
        stack.extend(cur.control_inputs)
    return False


def dependency_of_targets(targets: Any, op: Any) -> bool:
    """True if any of ``targets`` (ops or tensors) depends on ``op`` (memoized).

    :param targets: a tuple (or list) of ops or tensors.
    :param op: a ``tf.Operation`` or ``tf.Tensor``.
    """
    if isinstance(targets, (tf.Tensor, tf.Operation)):
        targets = (targets,)
    targets = tuple(targets)
    op = _as_op(op)
    key = (tuple(id(t) for t in targets), id(op))
    hit = _CACHE.get(key)
    if hit is None:
        hit = _ancestors_contain(targets, op)
        if len(_CACHE) > 100000:
            _CACHE.clear()
        _CACHE[key] = hit
    return hit


def dependency_of_fetches(fetches: Any, op: Any) -> bool:
    """True if any of ``fetches`` (anything ``Session.run`` accepts) depends on ``op``."""
    flat = []

    def walk(f: Any) -> None:
        if isinstance(f, (list, tuple)):
            for x in f:
                walk(x)
        elif isinstance(f, dict):
            for x in f.values():
                walk(x)
        elif isinstance(f, str):
            g = tf1.get_default_graph()
            flat.append(g.as_graph_element(f))
        elif f is not None:
            flat.append(f)

    walk(fetches)
    return dependency_of_targets(tuple(flat), op) if flat else False
