"""Back up, restore and freeze graph collections."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterable, Iterator

import tensorflow as tf

tf1 = tf.compat.v1

__all__ = ["backup_collection", "restore_collection", "freeze_collection"]


def _keys(keys: Iterable[str] | str | None) -> list[str]:
    if keys is None:
        return list(tf1.get_default_graph().get_all_collection_keys())
    if isinstance(keys, str):
        return [keys]
    return list(keys)


def backup_collection(keys: Iterable[str] | None = None) -> dict[str, list[Any]]:
    """Copy the content of collections of the default graph.

    :param keys: collection keys to back up; default: every key of the graph.
    :return: ``{key: list of items}``, for :func:`restore_collection`.
    """
    g = tf1.get_default_graph()
    return {k: list(g.get_collection(k)) for k in _keys(keys)}


def restore_collection(backup: dict[str, list[Any]]) -> None:
    """Put the collections named in ``backup`` back to the content it holds.

    :param backup: what :func:`backup_collection` returned.
    """
    if not isinstance(backup, dict):
        raise TypeError(f"restore_collection needs the dict returned by backup_collection(), got {backup!r}")
    g = tf1.get_default_graph()
    for k, items in backup.items():
        ref = g.get_collection_ref(k)
        ref[:] = list(items)


@contextmanager
def freeze_collection(keys: Iterable[str]) -> Iterator[None]:
    """A context at whose end the collections ``keys`` are restored to their content at entry
    (items added inside are dropped, items removed inside come back).

    :param keys: collection keys to freeze.
    """
    backup = backup_collection(_keys(keys))
    try:
        yield
    finally:
        restore_collection(backup)
