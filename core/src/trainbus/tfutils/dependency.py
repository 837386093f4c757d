"""Which ops a fetch depends on (to run hooks only with the ops that need them)."""

from __future__ import annotations

import weakref
from typing import Any, Iterator

import tensorflow as tf

tf1 = tf.compat.v1

__all__ = ["dependency_of_targets", "dependency_of_fetches"]
# also here, outside tensorpack's names: ancestor_ops

# graph -> {(target op names, op name): bool}; keyed by names so that nothing keeps the graph alive
_CACHE: "weakref.WeakKeyDictionary[Any, dict[tuple, bool]]" = weakref.WeakKeyDictionary()
_MAX_PER_GRAPH = 100000


def _as_op(x: Any) -> Any:
    if isinstance(x, tf.Operation):
        return x
    if isinstance(x, tf.Tensor):
        return x.op
    op = getattr(x, "op", None)  # variables
    if isinstance(op, tf.Operation):
        return op
    raise TypeError(f"expected a tf.Operation, tf.Tensor or variable, got {x!r} ({type(x).__name__})")


def ancestor_ops(ops: Any) -> Iterator[Any]:
    """Each of ``ops`` and every op they depend on (through data or control edges), once each,
    as the walk reaches them: a caller that has its answer can stop early."""
    seen: set[Any] = set()
    stack = list(ops)
    while stack:
        cur = stack.pop()
        if cur in seen:
            continue
        seen.add(cur)
        yield cur
        stack.extend(t.op for t in cur.inputs)
        stack.extend(cur.control_inputs)


def _ancestors_contain(targets: tuple, op: Any) -> bool:
    return any(cur is op for cur in ancestor_ops(targets))


def dependency_of_targets(targets: Any, op: Any) -> bool:
    """True if any of ``targets`` (ops, tensors or variables) depends on ``op`` (through data
    or control edges). The result is memoized per graph.

    :param targets: a tuple (or list) of ops or tensors, or one of them.
    :param op: a ``tf.Operation`` or ``tf.Tensor``.
    """
    if not isinstance(targets, (list, tuple)):
        targets = (targets,)
    ops = tuple(_as_op(t) for t in targets)
    op = _as_op(op)
    if not ops:
        return False
    key = (tuple(o.name for o in ops), op.name)
    cache = _CACHE.setdefault(op.graph, {})
    hit = cache.get(key)
    if hit is None:
        hit = _ancestors_contain(ops, op)
        if len(cache) > _MAX_PER_GRAPH:
            cache.clear()
        cache[key] = hit
    return hit


def dependency_of_fetches(fetches: Any, op: Any) -> bool:
    """True if any of ``fetches`` (anything ``Session.run`` accepts: nested lists, tuples,
    dicts, names) depends on ``op``."""
    flat: list[Any] = []
    graph = _as_op(op).graph

    def walk(f: Any) -> None:
        if isinstance(f, (list, tuple)):
            for x in f:
                walk(x)
        elif isinstance(f, dict):
            for x in f.values():
                walk(x)
        elif isinstance(f, str):
            flat.append(graph.as_graph_element(f))
        elif f is not None:
            flat.append(f)

    walk(fetches)
    return dependency_of_targets(tuple(flat), op) if flat else False
