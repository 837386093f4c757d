"""Build callbacks, monitors, trainers and session initializers from their registered names.

The names are the entry-point names of the installed plugin distributions (the same names
users reach as ``trainbus.callbacks.<Name>``), plus the classes of the core itself::

    from trainbus import compose

    saver = compose.callback("ModelSaver", max_to_keep=2)
    printer = compose.monitor("ScalarPrinter")
    trainer = compose.trainer("SimpleTrainer")
    init = compose.session_init("SmartInit", "train_log/model-100")
    same = compose.build("trainbus.callbacks", "ModelSaver", max_to_keep=2)

Arguments are checked against the signature of the class (or factory function) BEFORE it is
called, so a misspelt keyword is an error that names the component, the argument and the
accepted parameters, not a ``TypeError`` from deep inside a constructor.

Importing this module imports no TensorFlow; resolving a name imports its plugin.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from typing import Any, Iterable

from trainbus.bus import registry as _registry

__all__ = ["build", "callback", "monitor", "trainer", "session_init", "resolve", "provider_of", "check_arguments",
           "available", "KINDS", "CompositionError", "UnknownComponentError", "ComponentArgumentError",
           "MissingPluginError"]

#: kind -> the entry-point group its names come from (the group is also the facade module)
KINDS: dict[str, str] = {
    "callback": "trainbus.callbacks",
    "monitor": "trainbus.callbacks",
    "trainer": "trainbus.train",
    "session_init": "trainbus.tfutils.sessinit",
}


class CompositionError(Exception):
    """A component could not be built from its name."""


class UnknownComponentError(CompositionError, AttributeError):
    """No installed distribution (and not the core) provides this name."""


class MissingPluginError(CompositionError, ModuleNotFoundError):
    """The name belongs to a first-party plugin distribution that is not installed."""


class ComponentArgumentError(CompositionError, TypeError):
    """The arguments do not fit the signature of the component, or it is the wrong kind of object."""


def _group(group_or_kind: str) -> str:
    if group_or_kind in KINDS:
        return KINDS[group_or_kind]
    if group_or_kind in _registry.NAME_GROUPS:
        return group_or_kind
    raise ValueError(
        f"unknown component group {group_or_kind!r}; use one of the entry-point groups "
        f"{', '.join(_registry.NAME_GROUPS)} or the kinds {', '.join(KINDS)}"
    )


def _core_names(group: str) -> list[str]:
    mod = importlib.import_module(group)
    names = set(getattr(mod, "__all__", ())) | set(getattr(mod, "_LAZY", {}))
    return sorted(n for n in names if n[:1].isupper())


def available(group_or_kind: str) -> list[str]:
    """Every name that resolves in this group now: the core's classes and the installed plugins' names."""
    group = _group(group_or_kind)
    return sorted({*_core_names(group), *_registry.installed_names((group,))})


def resolve(group_or_kind: str, name: str) -> Any:
    """The class (or factory function) registered as ``name`` in the group.

    :raises MissingPluginError: the name belongs to a first-party plugin that is not installed
        (the message says what to ``pip install``).
    :raises UnknownComponentError: nothing provides the name (the message lists close matches).
    """
    group = _group(group_or_kind)
    if not isinstance(name, str) or not name.isidentifier():
        raise UnknownComponentError(f"{name!r} is not a component name; names are class names such as 'ModelSaver'")
    module = importlib.import_module(group)
    try:
        return getattr(module, name)
    except ModuleNotFoundError as e:
        if getattr(e, "name", None) and "is provided by the" in str(e):
            raise MissingPluginError(str(e), name=e.name) from None
        raise
    except AttributeError:
        pass
    known = available(group)
    close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    raise UnknownComponentError(
        f"no installed distribution provides {group}.{name}.{hint} Run `trainbus plugins` to list the installed "
        f"names; a name from a third-party package needs that package installed in this environment."
    ) from None


def provider_of(group_or_kind: str, name: str) -> str:
    """Who provides ``name``: ``"trainbus-saver 0.1.0"``, or ``"trainbus <version> (core)"``."""
    group = _group(group_or_kind)
    found = _registry.provider((group,), name)
    if found is not None:
        dist = getattr(found[1], "dist", None)
        return f"{dist.metadata['Name']} {dist.version}" if dist is not None else "<unknown distribution>"
    import trainbus

    return f"trainbus {trainbus.__version__} (core)"


def _signature(target: Any) -> inspect.Signature:
    """The call signature of ``target``. For a class whose metaclass defines ``__call__``
    (which hides the constructor behind ``*args, **kwargs``), that of its ``__init__``."""
    custom_call = isinstance(target, type) and type(target).__call__ is not type.__call__
    if custom_call and target.__init__ is not object.__init__:
        sig = inspect.signature(target.__init__)
        return sig.replace(parameters=list(sig.parameters.values())[1:])
    return inspect.signature(target)


def _describe_signature(target: Any) -> str:
    """``Name(a, b=1, *args, **kwargs)``: the parameters with their defaults, no annotations."""
    name = getattr(target, "__name__", repr(target))
    try:
        sig = _signature(target)
    except (TypeError, ValueError):
        return f"{name}(...)"
    parts = []
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            parts.append(f"*{p.name}")
        elif p.kind is p.VAR_KEYWORD:
            parts.append(f"**{p.name}")
        elif p.default is p.empty:
            parts.append(p.name)
        else:
            parts.append(f"{p.name}={p.default!r}")
    return f"{name}({', '.join(parts)})"


def check_arguments(target: Any, args: Iterable[Any] = (), kwargs: dict[str, Any] | None = None,
                    label: str | None = None) -> inspect.BoundArguments | None:
    """Check that ``target(*args, **kwargs)`` fits the signature of ``target``, without calling it.

    :param label: how to name the component in the message (default: its name).
    :return: the bound arguments, or None when the signature cannot be read.
    :raises ComponentArgumentError: unexpected or missing arguments; the message names the
        component, the argument, the accepted parameters and close matches.
    """
    kwargs = dict(kwargs or {})
    args = tuple(args)
    label = label or getattr(target, "__name__", repr(target))
    try:
        sig = _signature(target)
    except (TypeError, ValueError):
        return None
    try:
        return sig.bind(*args, **kwargs)
    except TypeError as e:
        params = [p for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        accepts_any_kw = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
        names = [p.name for p in params]
        detail = str(e)
        hints = []
        for k in kwargs:
            if k not in names and not accepts_any_kw:
                close = difflib.get_close_matches(k, names, n=1, cutoff=0.5)
                hints.append(f"{k!r} is not a parameter" + (f" (did you mean {close[0]!r}?)" if close else ""))
        fix = "; ".join(hints) if hints else detail
        raise ComponentArgumentError(
            f"{label}: the arguments do not fit {_describe_signature(target)}: {fix}. "
            f"Accepted parameters: {', '.join(names) if names else '(none)'}."
        ) from None


_EXPECTED = {
    "callback": ("trainbus.callbacks.base", "Callback", "a Callback"),
    "monitor": ("trainbus.callbacks.monitor", "MonitorBase", "a MonitorBase (monitor)"),
    "trainer": ("trainbus.train.base", "Trainer", "a Trainer"),
    "session_init": ("trainbus.tfutils.sessinit", "SessionInit", "a SessionInit"),
}


def _check_kind(kind: str | None, obj: Any, name: str) -> None:
    if kind is None or kind not in _EXPECTED:
        return
    modname, clsname, what = _EXPECTED[kind]
    base = getattr(importlib.import_module(modname), clsname)
    if not isinstance(obj, base):
        raise ComponentArgumentError(
            f"{name} built {obj!r} ({type(obj).__name__}), which is not {what}; use it where {type(obj).__name__} "
            f"objects belong, or choose another name"
        )


def build(group_or_kind: str, name: str, *args: Any, **kwargs: Any) -> Any:
    """Resolve ``name`` in the group and call it with these arguments, after checking them
    against its signature.

    :param group_or_kind: an entry-point group (``"trainbus.callbacks"``, ``"trainbus.train"``,
        ``"trainbus.tfutils.sessinit"``) or a kind (``"callback"``, ``"monitor"``, ``"trainer"``,
        ``"session_init"``; a kind also checks the type of the result).
    """
    kind = group_or_kind if group_or_kind in KINDS else None
    target = resolve(group_or_kind, name)
    check_arguments(target, args, kwargs, label=name)
    obj = target(*args, **kwargs)
    _check_kind(kind, obj, name)
    return obj


def callback(name: str, *args: Any, **kwargs: Any) -> Any:
    """``build("callback", name, ...)``: a callback by its registered name."""
    return build("callback", name, *args, **kwargs)


def monitor(name: str, *args: Any, **kwargs: Any) -> Any:
    """``build("monitor", name, ...)``: a monitor by its registered name."""
    return build("monitor", name, *args, **kwargs)


def trainer(name: str, *args: Any, **kwargs: Any) -> Any:
    """``build("trainer", name, ...)``: a trainer strategy by its registered name."""
    return build("trainer", name, *args, **kwargs)


def session_init(name: str, *args: Any, **kwargs: Any) -> Any:
    """``build("session_init", name, ...)``: a session initializer by its registered name."""
    return build("session_init", name, *args, **kwargs)
