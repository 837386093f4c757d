"""Variable renaming for code written with ``tf.layers`` naming (``kernel``, ``bias``,
``moving_mean``, ...): inside these contexts ``get_variable`` makes trainbus-named variables."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping

__all__: list[str] = []


@contextmanager
def rename_get_variable(mapping: Mapping[str, str]) -> Iterator[Any]:
    """A context in which ``tf.compat.v1.get_variable`` renames the last component of a
    variable name by ``mapping`` (``{old basename: new basename}``), e.g. ``{'kernel': 'W'}``
    turns ``conv0/kernel`` into ``conv0/W``. Yields the variable scope.
    """
    from trainbus.tfutils.varreplace import custom_getter_scope

    if not isinstance(mapping, Mapping):
        raise TypeError(f"rename_get_variable needs a dict {{old basename: new basename}}, got {mapping!r}")
    table = dict(mapping)

    def getter(getter: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        head, sep, base = name.rpartition("/")
        if base in table:
            name = head + sep + table[base]
        return getter(name, *args, **kwargs)

    with custom_getter_scope(getter) as vs:
        yield vs


def rename_tflayer_get_variable() -> Any:
    """A context renaming ``tf.layers``-style variable names to trainbus's: ``kernel`` → ``W``,
    ``bias`` → ``b``, ``moving_mean`` → ``mean/EMA``, ``moving_variance`` → ``variance/EMA``.

    Example::

        with rename_tflayer_get_variable():
            w = tf.compat.v1.get_variable('conv0/kernel', [3, 3, 1, 8])   # named 'conv0/W'
    """
    return rename_get_variable({"kernel": "W", "bias": "b", "moving_mean": "mean/EMA",
                                "moving_variance": "variance/EMA"})
