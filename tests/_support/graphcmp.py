"""Comparing a graph trainbus imported with the one TensorFlow's constructors built
(``tests/tfutils/test_tfutils_*_graph.py``)."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator


def assert_same_nodes(tensorflows: Any, imported: Any, collections: bool = True) -> None:
    """The two graphs have the same nodes in the same order (every field of every ``NodeDef``),
    the same record of names in use (names made later are chosen the same way) and, with
    ``collections``, the same collections by name."""
    ns, nf = tensorflows.as_graph_def().node, imported.as_graph_def().node
    assert [n.name for n in nf] == [n.name for n in ns]
    for a, b in zip(ns, nf):
        assert a == b, f"node {a.name} differs:\nTensorFlow's:\n{a}\nimported:\n{b}"
    assert imported._names_in_use == tensorflows._names_in_use
    if collections:
        assert sorted(imported.get_all_collection_keys()) == sorted(tensorflows.get_all_collection_keys())
        for key in tensorflows.get_all_collection_keys():
            assert [getattr(x, "name", x) for x in imported.get_collection(key)] == \
                [getattr(x, "name", x) for x in tensorflows.get_collection(key)], key


def var_attrs(v: Any, graph: Any) -> dict:
    """Every attribute of the Python variable ``v`` of ``graph``, objects by their names."""
    out = {}
    for key, val in vars(v).items():
        if key == "_variable_read":  # only gates a warning about XLA sharding set after a read
            continue
        if key == "_graph_key":
            val = val == graph._graph_key
        out[key] = getattr(val, "name", val)
    return out


@contextlib.contextmanager
def built_by_tensorflow(fast_path: Any, slow: bool = True) -> Iterator[None]:
    """With ``slow``, the graph-import module ``fast_path`` says it is not usable meanwhile, so the
    code under test builds its nodes with TensorFlow's constructors; else nothing changes."""
    saved = fast_path.usable
    if slow:
        fast_path.usable = lambda *args: False
    try:
        yield
    finally:
        fast_path.usable = saved
