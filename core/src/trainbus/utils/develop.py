"""Helpers for library code: deprecation warnings and placeholders for objects whose dependency is missing."""

from __future__ import annotations

import functools
import inspect
from collections import defaultdict
from datetime import datetime
from typing import Any, Callable

from trainbus.utils import logger

__all__ = ["log_deprecated", "deprecated", "HIDE_DOC", "create_dummy_class", "create_dummy_func"]


def create_dummy_class(klass: str, dependency: str) -> type:
    """A stand-in for the class ``klass`` when ``dependency`` cannot be imported: instantiating it raises
    ``ImportError`` and reading a class attribute raises ``AttributeError``, both naming the dependency."""
    msg = f"Cannot import '{dependency}', therefore '{klass}' is not available (pip install {dependency})"

    class _DummyMeta(type):
        def __getattr__(cls, name: str) -> Any:
            raise AttributeError(msg)

    class _Dummy(metaclass=_DummyMeta):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise ImportError(msg)

    _Dummy.__name__ = _Dummy.__qualname__ = klass
    return _Dummy


def create_dummy_func(func: str, dependency: str | list[str] | tuple[str, ...]) -> Callable[..., Any]:
    """A stand-in for the function ``func`` when ``dependency`` (a name or several) cannot be imported: calling it
    raises ``ImportError`` naming them."""
    if isinstance(dependency, (list, tuple)):
        dependency = ",".join(dependency)

    def _dummy(*args: Any, **kwargs: Any) -> Any:
        raise ImportError(f"Cannot import '{dependency}', therefore '{func}' is not available")
    _dummy.__name__ = _dummy.__qualname__ = func
    return _dummy


_DEPRECATED_LOG_NUM: defaultdict[str, int] = defaultdict(int)


def log_deprecated(name: str = "", text: str = "", eos: str = "", max_num_warnings: int | None = None) -> None:
    """Log a ``[Deprecated]`` warning.

    :param name: the deprecated thing (function, argument, ...).
    :param text: what to do instead.
    :param eos: end of service as ``"YYYY-MM-DD"``: "``name`` will be deprecated after <day month>".
    :param max_num_warnings: log the same message at most this many times.
    """
    if not name and not text:
        raise ValueError("log_deprecated: give the deprecated name, an explanation text, or both")
    if eos:
        try:
            eos = "after " + datetime(*map(int, eos.split("-"))).strftime("%d %b")  # type: ignore[misc]
        except (TypeError, ValueError):
            raise ValueError(f"log_deprecated(eos={eos!r}): the end of service must be a 'YYYY-MM-DD' date") from None
    if name:
        msg = f"{name} will be deprecated {eos}. {text}" if eos else f"{name} was deprecated. {text}"
    else:
        msg = text + (f" Legacy period ends {eos}" if eos else "")
    if max_num_warnings is not None:
        if _DEPRECATED_LOG_NUM[msg] >= max_num_warnings:
            return
        _DEPRECATED_LOG_NUM[msg] += 1
    logger.warning("[Deprecated] " + msg)


def deprecated(text: str = "", eos: str = "", max_num_warnings: int | None = None) -> Callable[[Callable], Callable]:
    """Decorator: each call of the function logs :func:`log_deprecated` with its name and the caller's
    ``file:line``, then runs it.

    ``@deprecated("Use bar() instead.", "2030-01-01")``
    """
    def deco(func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            caller = inspect.currentframe().f_back  # type: ignore[union-attr]
            where = f"{caller.f_code.co_filename}:{caller.f_lineno}" if caller else "?"
            log_deprecated(f"{func.__name__} [{where}]", text, eos, max_num_warnings=max_num_warnings)
            return func(*args, **kwargs)
        return wrapper
    return deco


def HIDE_DOC(func: Callable) -> Callable:
    """Mark ``func`` to be left out of generated API docs (sets ``func.__HIDE_SPHINX_DOC__``)."""
    func.__HIDE_SPHINX_DOC__ = True  # type: ignore[attr-defined]
    return func
