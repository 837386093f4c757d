"""``layer_register``: turn a function into a trainbus layer (variable scope, argscope,
argument aliases, shape logging)."""

from __future__ import annotations

import functools
import inspect
import re
from typing import Any, Callable, Mapping

import tensorflow as tf

from trainbus.models.utils import VariableHolder  # noqa: F401 - importable from here too
from trainbus.tfutils.argscope import get_arg_scope
from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["layer_register", "disable_layer_logging"]

_LAYER_REGISTRY: dict[str, Callable[..., Any]] = {}


class _Everything:
    def __contains__(self, item: Any) -> bool:
        return True

    def add(self, item: Any) -> None:
        pass


# scope names (without the towerN/ prefix) whose shapes were logged already
_LAYER_LOGGED: Any = set()


def disable_layer_logging() -> None:
    """From now on, no layer logs its input/output shapes (e.g. before building many towers)."""
    global _LAYER_LOGGED
    _LAYER_LOGGED = _Everything()


def _register(name: str, func: Callable[..., Any]) -> None:
    if name == "tf":
        raise ValueError("layer_register: a layer cannot be named 'tf' (LinearWrap uses .tf for TensorFlow ops)")
    old = _LAYER_REGISTRY.get(name)
    if old is not None and getattr(old, "__module__", None) != getattr(func, "__module__", None):
        logger.warn(f"layer_register: layer {name!r} from {func.__module__} replaces the one from {old.__module__} "
                    "(LinearWrap and argscope now use the new one)")
    _LAYER_REGISTRY[name] = func
    if name == "Conv2DTranspose":
        _LAYER_REGISTRY["Deconv2D"] = func


def get_registered_layer(name: str) -> Callable[..., Any] | None:
    """The registered layer called ``name`` (e.g. ``'Conv2D'``), or None."""
    return _LAYER_REGISTRY.get(name)


def _make_normalizer(layer_name: str, aliases: Mapping[str, str]) -> Callable[..., dict]:
    def normalize(kwargs: dict[str, Any], where: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        given_as: dict[str, str] = {}
        for k, v in kwargs.items():
            canon = aliases.get(k, k)
            if canon in out:
                raise TypeError(f"{where or layer_name}: argument {canon!r} given twice (as {given_as[canon]!r} "
                                f"and as {k!r}); give it once")
            out[canon] = v
            given_as[canon] = k
        return out

    return normalize


def _shape_str(x: Any) -> str:
    def one(t: Any) -> str:
        s = getattr(t, "shape", None)
        try:
            return str(s.as_list()) if s is not None else repr(t)
        except ValueError:
            return "<unknown>"

    if isinstance(x, (list, tuple)):
        return ",".join(one(t) for t in x)
    return one(x)


def _is_tensor_input(x: Any) -> bool:
    if isinstance(x, (tf.Tensor, tf.Variable)):
        return True
    return isinstance(x, (list, tuple)) and len(x) > 0 and isinstance(x[0], (tf.Tensor, tf.Variable))


def layer_register(log_shape: bool = False, use_scope: bool | None = True,
                   aliases: Mapping[str, str] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a layer function ``f(inputs, ...)``.

    :param log_shape: log the input and output shapes (once per layer name, in the main tower).
    :param use_scope: True: called as ``f(name, inputs, ...)`` and run under variable scope
        ``name``. None: the name is optional (taken if the first argument is a str). False:
        called as ``f(inputs, ...)``; a str first argument still works as a name, with a warning.
    :param aliases: ``{old argument name: argument name}`` accepted at calls and in argscopes.

    The layer takes default keyword arguments from :func:`trainbus.tfutils.argscope.argscope`;
    arguments given at the call win. Positional arguments after the input map to the
    function's parameters in order. An unknown argument raises a ``TypeError`` naming the
    layer and the argument.
    """
    aliases = dict(aliases or {})
    if use_scope is not True and log_shape:
        raise ValueError("layer_register: log_shape=True needs use_scope=True (the shapes are logged per name)")

    def deco(func: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(func)
        params = list(sig.parameters.values())
        positional = [p.name for p in params
                      if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        var_pos = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
        var_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
        known = [p.name for p in params if p.kind not in (inspect.Parameter.VAR_POSITIONAL,
                                                          inspect.Parameter.VAR_KEYWORD)]
        lname = func.__name__
        normalize = _make_normalizer(lname, aliases)

        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            args_l = list(args)
            name = None
            if use_scope:
                if not args_l or not isinstance(args_l[0], str):
                    raise TypeError(f"{lname} needs a name (str) as its first argument, then the input; "
                                    f"got {args_l[:1]!r}. Did you forget the layer name?")
                name = args_l.pop(0)
            elif args_l and isinstance(args_l[0], str):
                if use_scope is False:
                    logger.warn(f"Layer {lname} is called with a name ({args_l[0]!r}) but is registered with "
                                "use_scope=False: call it without the name, or register it with use_scope=None")
                name = args_l.pop(0)
            where = f"{lname}{'(' + repr(name) + ')' if name else ''}"
            if not args_l:
                raise TypeError(f"{where} needs an input tensor after the name")
            if not _is_tensor_input(args_l[0]):
                raise ValueError(f"{where}: invalid input {args_l[0]!r}; the input must be a tf.Tensor/tf.Variable "
                                 "or a list of them")
            kwargs = normalize(kwargs, where=where)
            # positional arguments after the input become keywords so the argscope can merge
            extra: list[Any] = []
            if len(args_l) > len(positional):
                if not var_pos:
                    raise TypeError(f"{where} takes at most {len(positional) - 1} positional argument(s) after the "
                                    f"input ({', '.join(positional[1:]) or 'none'}), got {len(args_l) - 1}; "
                                    "give the others by keyword")
                extra = args_l[len(positional):]
                args_l = args_l[:len(positional)]
            for pname, val in zip(positional, args_l):
                if pname in kwargs:
                    raise TypeError(f"{where}: argument {pname!r} given positionally and by keyword")
                kwargs[pname] = val
            actual = dict(get_arg_scope().get(lname, {}))
            actual.update(kwargs)
            if not var_kw:
                unknown = sorted(k for k in actual if k not in known)
                if unknown:
                    raise TypeError(f"{where}: unknown argument(s) {unknown}; its arguments are {known[1:]}"
                                    + (f", aliases {aliases}" if aliases else ""))
            inputs = actual[positional[0]] if positional else None

            def call() -> Any:
                if extra:
                    pos = [actual.pop(p) for p in positional]
                    return func(*pos, *extra, **actual)
                return func(**actual)

            if name is None:
                return call()
            with tf1.variable_scope(name) as scope:
                scope_name = re.sub(r"tower[0-9]+/", "", scope.name)
                do_log = log_shape and scope_name not in _LAYER_LOGGED and _should_log()
                in_shape = _shape_str(inputs) if do_log else ""
                out = call()
                if do_log:
                    logger.info(f"'{scope.name}': {in_shape} --> {_shape_str(out)}")
                    _LAYER_LOGGED.add(scope_name)
            return out

        wrapped.symbolic_function = func  # type: ignore[attr-defined]
        wrapped.use_scope = use_scope  # type: ignore[attr-defined]
        wrapped.normalize_kwargs = normalize  # type: ignore[attr-defined]
        wrapped.aliases = dict(aliases)  # type: ignore[attr-defined]
        wrapped.__argscope_enabled__ = True  # type: ignore[attr-defined]
        _register(lname, wrapped)
        return wrapped

    return deco


def _should_log() -> bool:
    from trainbus.tfutils.tower import get_current_tower_context

    ctx = get_current_tower_context()
    return ctx is None or ctx.is_main_training_tower
