"""``layer_register``: turn a function into a trainbus layer (variable scope, argscope,
argument aliases, shape logging)."""

from __future__ import annotations

import functools
import inspect
import weakref
from typing import Any, Callable, Mapping

import tensorflow as tf

from trainbus.tfutils.argscope import get_arg_scope
from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["layer_register", "get_registered_layer", "VariableHolder"]

_LAYER_REGISTRY: dict[str, Callable[..., Any]] = {}
_LOGGED: "weakref.WeakKeyDictionary[Any, set[str]]" = weakref.WeakKeyDictionary()


class VariableHolder:
    """Attribute access to a layer's variables: ``out.variables.W``."""

    def __init__(self, **kwargs: Any) -> None:
        self._vars = dict(kwargs)
        for k, v in kwargs.items():
            setattr(self, k, v)

    def all(self) -> list[Any]:
        """Every variable held."""
        return list(self._vars.values())


def get_registered_layer(name: str) -> Callable[..., Any] | None:
    """The registered layer called ``name``, or None."""
    return _LAYER_REGISTRY.get(name)


def _make_normalizer(layer_name: str, aliases: Mapping[str, str], params: list[str]) -> Callable[..., dict]:
    def normalize(kwargs: dict[str, Any], where: str | None = None) -> dict[str, Any]:
        out = {}
        for k, v in kwargs.items():
            canon = aliases.get(k, k)
            if canon in out:
                raise TypeError(f"{where or layer_name}: argument {canon!r} given twice "
                                f"(as {k!r} and as {canon!r} or another alias); give it once")
            out[canon] = v
        return out

    return normalize


def _should_log() -> bool:
    from trainbus.tfutils.tower import get_current_tower_context

    ctx = get_current_tower_context()
    return ctx is None or ctx.is_main_training_tower


def _shape(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        x = x[0] if x else None
    s = getattr(x, "shape", None)
    try:
        return s.as_list() if s is not None else None
    except ValueError:
        return None


def layer_register(log_shape: bool = False, use_scope: bool | None = True,
                   aliases: Mapping[str, str] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a layer function: ``Layer(name, input, ...)``.

    :param log_shape: log the input and output shapes (once per layer, in the main tower).
    :param use_scope: True: the first argument is the name, a variable scope the layer runs
        in. False: no name. None: the name is optional (given if the first argument is a str).
    :param aliases: ``{old argument name: argument name}`` accepted at calls and in argscopes.

    The layer takes default keyword arguments from :func:`trainbus.tfutils.argscope.argscope`.
    """
    aliases = dict(aliases or {})

    def deco(func: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(func)
        params = list(sig.parameters)
        normalize = _make_normalizer(func.__name__, aliases, params)

        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            args_l = list(args)
            name = None
            if use_scope:
                if not args_l or not isinstance(args_l[0], str):
                    raise TypeError(f"{func.__name__} needs a name (str) as its first argument, then the input; "
                                    f"got {args_l[:1]!r}")
                name = args_l.pop(0)
            elif use_scope is None and args_l and isinstance(args_l[0], str):
                name = args_l.pop(0)
            if not args_l and params and params[0] not in kwargs:
                raise TypeError(f"{func.__name__}({name!r}, ...) needs an input tensor")
            kwargs = normalize(kwargs, where=func.__name__)
            # positional arguments after the input become keywords so the argscope can merge
            if len(args_l) > len(params):
                raise TypeError(f"{func.__name__} takes at most {len(params)} positional arguments after the name, "
                                f"got {len(args_l)}")
            for pname, val in zip(params, args_l):
                if pname in kwargs:
                    raise TypeError(f"{func.__name__}: argument {pname!r} given positionally and by keyword")
                kwargs[pname] = val
            actual = dict(get_arg_scope().get(func.__name__, {}))
            actual.update(kwargs)
            unknown = sorted(k for k in actual if k not in sig.parameters)
            if unknown:
                raise TypeError(f"{func.__name__}{' ' + repr(name) if name else ''}: unknown argument(s) {unknown}; "
                                f"arguments are {params}, aliases {aliases}")
            if name is not None:
                with tf1.variable_scope(name) as scope:
                    out = func(**actual)
                scope_name = scope.name
            else:
                out = func(**actual)
                scope_name = func.__name__
            if log_shape and _should_log():
                g = tf1.get_default_graph()
                logged = _LOGGED.setdefault(g, set())
                if scope_name not in logged:
                    logged.add(scope_name)
                    logger.info(f"{scope_name} input: {_shape(actual.get(params[0]))}")
                    logger.info(f"{scope_name} output: {_shape(out)}")
            return out

        wrapped.symbolic_function = func  # type: ignore[attr-defined]
        wrapped.use_scope = use_scope  # type: ignore[attr-defined]
        wrapped.normalize_kwargs = normalize  # type: ignore[attr-defined]
        wrapped.aliases = dict(aliases)  # type: ignore[attr-defined]
        _LAYER_REGISTRY[func.__name__] = wrapped
        return wrapped

    return deco
