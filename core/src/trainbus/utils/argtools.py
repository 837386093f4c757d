"""Decorators and small argument helpers: memoization, shapes, logging a message once, calling a method once."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from trainbus.utils import logger

__all__ = ["map_arg", "memoized", "memoized_method", "graph_memoized", "shape2d", "shape4d",
           "memoized_ignoreargs", "log_once", "call_only_once"]


def map_arg(**maps: Callable[[Any], Any]) -> Callable[[Callable], Callable]:
    """Decorator: before calling the function, replace the named arguments by ``map_func(value)``.

    ``@map_arg(shape=shape2d)`` makes ``f(shape=3)`` call ``f(shape=[3, 3])``. Arguments are matched by name
    whether they are passed by position or by keyword; an argument that is not passed (its default is used) is
    not mapped.
    """
    def deco(func: Callable) -> Callable:
        sig = inspect.signature(func)
        unknown = [k for k in maps if k not in sig.parameters]
        if unknown:
            raise TypeError(f"map_arg: {func.__qualname__}{sig} has no argument named {', '.join(unknown)}")

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            bound = sig.bind_partial(*args, **kwargs)
            for name, fn in maps.items():
                if name in bound.arguments:
                    bound.arguments[name] = fn(bound.arguments[name])
            return func(*bound.args, **bound.kwargs)
        return wrapper
    return deco


memoized = functools.lru_cache(maxsize=None)
"""``functools.lru_cache(maxsize=None)``: cache results per arguments (arguments must be hashable).

The cache keeps every argument and result alive for the life of the process.
"""


def graph_memoized(func: Callable) -> Callable:
    """Like :data:`memoized`, with one cache per TensorFlow default graph (the graph is part of the key)."""
    @functools.lru_cache(maxsize=None)
    def with_graph(graph: Any, args: tuple, kwargs: tuple) -> Any:
        return func(*args, **dict(kwargs))

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from trainbus.utils import lazytf as _tf

        graph = _tf.tf1().get_default_graph()
        return with_graph(graph, args, tuple(sorted(kwargs.items())))
    wrapper.cache_clear = with_graph.cache_clear  # type: ignore[attr-defined]
    return wrapper


_MEMOIZED_NOARGS: dict[Callable, Any] = {}


def memoized_ignoreargs(func: Callable) -> Callable:
    """Decorator: compute the result at the first call, then return it for every call whatever the arguments."""
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if func not in _MEMOIZED_NOARGS:
            _MEMOIZED_NOARGS[func] = func(*args, **kwargs)
        return _MEMOIZED_NOARGS[func]
    return wrapper


def shape2d(a: int | list | tuple) -> list:
    """A 2D shape: ``[a, a]`` for an int, ``list(a)`` for a list or tuple of length 2.

    Raises ``ValueError`` for a sequence of another length and ``TypeError`` for anything else.
    """
    if type(a) is int:
        return [a, a]
    if isinstance(a, (list, tuple)):
        if len(a) != 2:
            raise ValueError(f"shape2d: expected an int or a list/tuple of 2 ints, got {a!r} of length {len(a)}")
        return list(a)
    raise TypeError(f"shape2d: expected an int or a list/tuple of 2 ints, got {a!r} ({type(a).__name__})")


def get_data_format(data_format: str, keras_mode: bool = True) -> str:
    """Translate between ``'NHWC'``/``'NCHW'`` and Keras' ``'channels_last'``/``'channels_first'``.

    :param keras_mode: True returns the Keras name, False the TensorFlow one. Either name is accepted as input.
    """
    to_keras = {"NCHW": "channels_first", "NHWC": "channels_last"}
    to_tf = {v: k for k, v in to_keras.items()}
    table = to_keras if keras_mode else to_tf
    ret = table.get(data_format, data_format)
    if ret not in table.values():
        raise ValueError(f"unknown data_format {data_format!r}: use 'NHWC' / 'channels_last' or "
                         "'NCHW' / 'channels_first'")
    return ret


def shape4d(a: int | list | tuple, data_format: str = "NHWC") -> list:
    """A 4D shape from a 2D one: ``[1, h, w, 1]`` for ``'NHWC'``, ``[1, 1, h, w]`` for ``'NCHW'``."""
    s2d = shape2d(a)
    if get_data_format(data_format, False) == "NHWC":
        return [1] + s2d + [1]
    return [1, 1] + s2d


@memoized
def log_once(message: str, func: str = "info") -> None:
    """Log ``message`` with ``logger.<func>`` (``"info"``, ``"warn"``, ``"error"``, ...) the first time only."""
    getattr(logger, func)(message)


def call_only_once(func: Callable) -> Callable:
    """Decorate a method (or a property's getter/setter) so it can be called only once per instance.

    A second call on the same object raises ``RuntimeError`` naming the class and the method.
    """
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        self = args[0]
        if func.__name__ not in dir(self):
            raise TypeError(f"call_only_once: {func.__qualname__} must be a method or property of the class of "
                            "its first argument")
        cache = self.__dict__.setdefault("_CALL_ONLY_ONCE_CACHE", set())
        if func in cache:
            cls = type(self)
            kind = "Method" if inspect.isfunction(inspect.getattr_static(cls, func.__name__, None)) else "Property"
            raise RuntimeError(f"{kind} {cls.__name__}.{func.__name__} can only be called once per object!")
        cache.add(func)
        return func(*args, **kwargs)
    return wrapper


def memoized_method(func: Callable) -> Callable:
    """Decorator: cache a method's results per instance and arguments (the cache lives on the instance).

    Arguments must be hashable. A result of ``None`` is cached too.
    """
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        self = args[0]
        if func.__name__ not in dir(self):
            raise TypeError(f"memoized_method: {func.__qualname__} must be a method of the class of its first argument")
        cache = self.__dict__.setdefault("_MEMOIZED_CACHE", {})
        key = (func,) + args[1:] + tuple(sorted(kwargs.items()))
        try:
            return cache[key]
        except KeyError:
            pass
        value = cache[key] = func(*args, **kwargs)
        return value
    return wrapper
