"""Replace what ``tf.compat.v1.get_variable`` returns: custom getters, frozen and remapped
variables."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

import tensorflow as tf

tf1 = tf.compat.v1

__all__ = ["custom_getter_scope", "freeze_variables", "remap_variables"]


@contextmanager
def custom_getter_scope(custom_getter: Callable[..., Any]) -> Iterator[Any]:
    """A context in which ``tf.compat.v1.get_variable`` goes through ``custom_getter``
    (same signature as in ``tf.compat.v1.get_variable``). The current variable scope and
    name scope are kept. Yields the variable scope.
    """
    if not callable(custom_getter):
        raise TypeError(f"custom_getter_scope needs a callable custom_getter, got {custom_getter!r}")
    scope = tf1.get_variable_scope()
    ns = tf1.get_default_graph().get_name_scope()
    with tf1.variable_scope(scope, custom_getter=custom_getter, auxiliary_name_scope=False) as vs:
        with tf1.name_scope(ns + "/" if ns else None):
            yield vs


def remap_variables(fn: Callable[[Any], Any]) -> Any:
    """A context in which every variable returned by ``get_variable`` is mapped by ``fn``.

    :param fn: ``tf.Variable -> tf.Tensor``.

    Example::

        with remap_variables(lambda var: tf.round(var)):
            x = FullyConnected('fc', x, 1000)   # fc/W and fc/b are used rounded
    """
    if not callable(fn):
        raise TypeError(f"remap_variables needs a callable, got {fn!r}")

    def getter(getter: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(getter(*args, **kwargs))

    return custom_getter_scope(getter)


def freeze_variables(stop_gradient: bool = True, skip_collection: bool = False) -> Any:
    """A context that freezes the variables ``get_variable`` returns inside it.

    :param stop_gradient: return ``tf.stop_gradient(var)`` (a Tensor, not a Variable) so that
        uses inside the context give it no gradient. Uses elsewhere (by name, by collection,
        e.g. weight decay) still do.
    :param skip_collection: create the variable outside ``TRAINABLE_VARIABLES`` (it goes to
        ``MODEL_VARIABLES`` instead), so trainers do not train it at all. Only effective when
        the variable is created inside the context.

    Example::

        with freeze_variables(stop_gradient=False, skip_collection=True):
            x = FullyConnected('fc', x, 1000)   # fc/* is not trained
    """

    def getter(getter: Any, *args: Any, **kwargs: Any) -> Any:
        trainable = kwargs.get("trainable", True)
        name = args[0] if args else kwargs.get("name")
        if skip_collection:
            kwargs["trainable"] = False
        v = getter(*args, **kwargs)
        if trainable and skip_collection:
            coll = tf1.get_collection_ref(tf1.GraphKeys.MODEL_VARIABLES)
            if all(x is not v for x in coll):
                coll.append(v)
        if trainable and stop_gradient:
            v = tf.stop_gradient(v, name="freezed_" + str(name).split("/")[-1])
        return v

    return custom_getter_scope(getter)
