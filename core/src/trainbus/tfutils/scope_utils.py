"""Decorators and contexts for name scopes and variable scopes."""

from __future__ import annotations

import functools
import weakref
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import tensorflow as tf

from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["auto_reuse_variable_scope", "cached_name_scope", "under_name_scope", "under_variable_scope"]

# graph -> {name: the name scope string that was opened for it}
_NS_CACHE: "weakref.WeakKeyDictionary[Any, dict[str, str]]" = weakref.WeakKeyDictionary()


def auto_reuse_variable_scope(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator: the first call of ``func`` under a variable scope creates variables as
    usual; every later call under the same variable scope (in the same graph) reuses them.

    Example::

        @auto_reuse_variable_scope
        def head(x):
            return FullyConnected('fc', x, 10)

        head(x1)   # creates fc/W
        head(x2)   # reuses fc/W
    """
    used: "weakref.WeakKeyDictionary[Any, set[str]]" = weakref.WeakKeyDictionary()

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        scope = tf1.get_variable_scope()
        g = tf1.get_default_graph()
        seen = used.setdefault(g, set())
        if scope.name in seen:
            with tf1.variable_scope(scope, reuse=True, auxiliary_name_scope=False):
                return func(*args, **kwargs)
        seen.add(scope.name)
        return func(*args, **kwargs)

    return wrapper


@contextmanager
def cached_name_scope(name: str, top_level: bool = True) -> Iterator[str]:
    """Open name scope ``name`` the first time and re-enter the very same scope afterwards
    (instead of ``name_1``, ``name_2``, ...). Yields the scope string (ending in ``/``).

    :param name: the scope name.
    :param top_level: the scope is always a top-level one, whatever the caller's name
        scope; with False it is nested under the caller's current name scope.
    """
    if not name or not isinstance(name, str):
        raise ValueError(f"cached_name_scope needs a non-empty name, got {name!r}")
    g = tf1.get_default_graph()
    if not top_level:
        cur = g.get_name_scope()
        if cur:
            name = cur + "/" + name
    cache = _NS_CACHE.setdefault(g, {})
    ns = cache.get(name)
    if ns is None:
        with tf1.name_scope(None):
            with tf1.name_scope(name) as ns:
                pass
        cache[name] = ns
    with tf1.name_scope(ns):
        yield ns


def under_name_scope(name_scope: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator factory: the decorated function runs under a name scope, named by (first
    found) the ``name_scope=`` keyword of the call, the ``name_scope`` argument of the
    decorator, or the function's name. When the scope given at the call is taken, TF makes a
    unique one and a warning says so.

    Example::

        @under_name_scope()
        def rms(x):
            return tf.sqrt(tf.reduce_mean(tf.square(x)))

        rms(t)                      # under name scope 'rms'
        rms(t, name_scope='scope')  # under name scope 'scope'
    """
    if callable(name_scope):
        raise TypeError("under_name_scope is a decorator factory: write @under_name_scope(), not @under_name_scope")

    def deco(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            explicit = "name_scope" in kwargs
            scopename = kwargs.pop("name_scope", None) or name_scope or func.__name__
            with tf1.name_scope(scopename) as opened:
                if explicit:
                    if opened.rstrip("/").split("/")[-1] != scopename.rstrip("/").split("/")[-1]:
                        logger.warning(f"under_name_scope: name scope {scopename!r} is taken; "
                                       f"{func.__name__} runs under {opened!r} instead")
                return func(*args, **kwargs)

        return wrapper

    return deco


def under_variable_scope() -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator factory: the decorated function runs under a new variable scope named after
    the function. Pass ``reuse=True`` (or ``tf.compat.v1.AUTO_REUSE``) at the call to reuse
    the variables of an earlier call.

    Example::

        @under_variable_scope()
        def mid_level(x):
            return FullyConnected('fc', x, 1)   # variable mid_level/fc/W
    """

    def deco(func: Callable[..., Any]) -> Callable[..., Any]:
        name = func.__name__

        @functools.wraps(func)
        def wrapper(*args: Any, reuse: Any = None, **kwargs: Any) -> Any:
            with tf1.variable_scope(name, reuse=reuse):
                return func(*args, **kwargs)

        return wrapper

    return deco
