"""Argument scopes: default keyword arguments for layers, set once for a block of code.

An argscope is a ``dict`` of ``dict``: ``{layer_name: {arg: value}}``. Scopes nest; an inner
scope overrides the outer one for the arguments it names, and an argument given explicitly at
the call always wins.
"""

from __future__ import annotations

import copy
import functools
import inspect
import threading
from collections import defaultdict
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from trainbus.utils import logger

__all__ = ["argscope", "get_arg_scope", "enable_argscope_for_module", "enable_argscope_for_function"]

_local = threading.local()


def _stack() -> list[dict[str, dict[str, Any]]]:
    st = getattr(_local, "stack", None)
    if st is None:
        st = _local.stack = []
    return st


def get_arg_scope() -> dict[str, dict[str, Any]]:
    """The current argscope: ``{layer_name: {arg: value}}`` (a copy; changing it has no effect).

    Unknown layer names map to ``{}``.
    """
    st = _stack()
    cur = st[-1] if st else {}
    out: defaultdict[str, dict[str, Any]] = defaultdict(dict)
    for k, v in cur.items():
        out[k] = dict(v)
    return out


def _layer_name(layer: Any) -> str:
    return getattr(layer, "__name__", None) or type(layer).__name__


def _check_layer(layer: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Validate ``kwargs`` against ``layer``; return them with aliases resolved."""
    if not hasattr(layer, "symbolic_function"):
        raise TypeError(
            f"argscope: {layer!r} is not a registered layer. Register it with "
            "trainbus.models.registry.layer_register() or wrap it with "
            "trainbus.tfutils.argscope.enable_argscope_for_function()")
    normalize = getattr(layer, "normalize_kwargs", None)
    if normalize is not None:
        kwargs = normalize(dict(kwargs), where=f"argscope({_layer_name(layer)}, ...)")
    target = layer.symbolic_function or layer
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):  # builtins: nothing to check
        return kwargs
    params = sig.parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return kwargs
    unknown = sorted(k for k in kwargs if k not in params)
    if unknown:
        raise TypeError(f"argscope: {_layer_name(layer)} has no argument(s) {unknown}; "
                        f"its arguments are {[p for p in params]}")
    return kwargs


@contextmanager
def argscope(layers: Any, **kwargs: Any) -> Iterator[None]:
    """A context in which every call of ``layers`` gets ``kwargs`` as default arguments.

    :param layers: a layer or a list of layers (registered with ``layer_register`` or wrapped
        by :func:`enable_argscope_for_function`).

    Example::

        with argscope(Conv2D, kernel_shape=3, nl=tf.nn.relu, out_channel=32):
            x = Conv2D('conv0', x)
            x = Conv2D('conv2', x, out_channel=64)  # overrides the argscope
    """
    if not isinstance(layers, (list, tuple)):
        layers = [layers]
    checked = [(_layer_name(layer), _check_layer(layer, kwargs)) for layer in layers]
    new_scope = copy.copy(get_arg_scope())
    for name, kw in checked:
        new_scope[name] = {**new_scope.get(name, {}), **kw}
    st = _stack()
    st.append(new_scope)
    try:
        yield
    finally:
        st.pop()


def _first_tensor(x: Any) -> Any:
    if isinstance(x, (list, tuple)):
        return x[0] if x else None
    return x


def _shape_of(x: Any) -> Any:
    shape = getattr(x, "shape", None)
    if shape is None:
        return None
    try:
        return shape.as_list()
    except (AttributeError, ValueError):
        return shape


def _should_log() -> bool:
    from trainbus.tfutils.tower import get_current_tower_context

    ctx = get_current_tower_context()
    return ctx is None or ctx.is_main_training_tower


def enable_argscope_for_function(func: Callable[..., Any], log_shape: bool = True) -> Callable[..., Any]:
    """Make ``func`` take its default keyword arguments from :func:`argscope`.

    :param func: a function mapping one or more tensors to one or more tensors.
    :param log_shape: log the shape of the first input and first output tensor (once per
        call site name).
    :return: the wrapped function; pass it to :func:`argscope` under the original name.

    Example::

        myfunc = enable_argscope_for_function(myfunc)
        with argscope(myfunc, alpha=0.3):
            y = myfunc(x)
    """
    if not callable(func):
        raise TypeError(f"enable_argscope_for_function needs a callable, got {func!r}")
    if hasattr(func, "symbolic_function"):
        return func  # already supports argscope
    name = _layer_name(func)

    @functools.wraps(func)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        actual = dict(get_arg_scope().get(name, {}))
        actual.update(kwargs)
        out = func(*args, **actual)
        if log_shape and _should_log():
            x = _first_tensor(args[0]) if args else None
            scope_name = ""
            try:
                import tensorflow as tf

                scope_name = tf.compat.v1.get_default_graph().get_name_scope()
            except Exception:  # noqa: BLE001 - logging only
                pass
            logger.info(f"{scope_name or name} ({name}) input: {_shape_of(x)} output: {_shape_of(_first_tensor(out))}")
        return out

    wrapped.symbolic_function = None  # type: ignore[attr-defined]
    return wrapped


def _resolve_lazy_module(module: Any) -> Any:
    """Load a lazily loaded module (TensorFlow's ``LazyLoader``/``KerasLazyLoader``, e.g.
    ``tf.compat.v1.layers``) and return the real module object; other modules as they are."""
    if not hasattr(module, "_tfll_parent_module_globals") and not hasattr(type(module), "_load"):
        return module
    try:
        name = object.__getattribute__(module, "__name__")
    except AttributeError:  # a Keras loader before its first use
        sub = module.__dict__.get("_tfll_submodule")
        name = f"<TensorFlow's lazily loaded Keras module {sub!r}>" if sub else repr(module)
    try:
        dir(module)  # loads the target module (and, for Keras loaders, picks the Keras package first)
        import importlib

        return importlib.import_module(module.__name__)
    except Exception as e:  # noqa: BLE001 - reported with the module name and a fix
        hint = ""
        if "keras" in f"{name} {e}".lower() or "layers" in name:
            hint = (" With Keras 3, tf.compat.v1.layers does not exist: install the tf_keras package and set "
                    "TF_USE_LEGACY_KERAS=1 before importing TensorFlow, or use trainbus.models' layers.")
        raise ImportError(f"enable_argscope_for_module: could not load the lazily loaded module {name} "
                          f"({type(e).__name__}: {e}).{hint}") from e


def enable_argscope_for_module(module: Any, log_shape: bool = True) -> list[str]:
    """Replace every public function of ``module`` by its argscope-enabled version
    (:func:`enable_argscope_for_function`). This monkey-patches the module.

    Lazily loaded modules (such as ``tf.compat.v1.layers``) are loaded first and patched both in
    the loaded module and on the lazy loader. Functions that already support argscope are kept.

    :param log_shape: log input/output shapes of each call.
    :return: the names of the functions that now support argscope.
    :raises ImportError: a lazily loaded module cannot be loaded.
    :raises ValueError: the module has no public function (nothing would be patched).

    Example::

        enable_argscope_for_module(mymodule)
        with argscope(mymodule.dense, use_bias=False):
            y = mymodule.dense(x, 10)
    """
    if not inspect.ismodule(module):
        raise TypeError(f"enable_argscope_for_module needs a module, got {module!r}")
    real = _resolve_lazy_module(module)
    targets = [real] if real is module else [real, module]
    patched: list[str] = []
    for name, obj in sorted(vars(real).items()):
        if name.startswith("_") or not inspect.isfunction(obj):
            continue
        new = enable_argscope_for_function(obj, log_shape=log_shape)
        for target in targets:
            if getattr(target, name, None) is not new:
                setattr(target, name, new)
        patched.append(name)
    if not patched:
        raise ValueError(f"enable_argscope_for_module: module {getattr(real, '__name__', real)!r} has no public "
                         "functions, so nothing was patched; pass the module that defines the functions "
                         "(e.g. tf.compat.v1.layers, not tf.compat.v1)")
    return patched
