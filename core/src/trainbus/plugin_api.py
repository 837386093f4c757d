"""The one module plugin distributions import trainbus internals from.

Everything here is covered by the plugin API version (:data:`PLUGIN_API_VERSION`): a plugin
written for version 1 (entry point ``"1" = "<its package>"`` in group ``trainbus.plugin_api``)
may rely on each name below keeping its meaning for every core release implementing version 1. A plugin must not import a private module of
trainbus (``trainbus._x``, ``trainbus.x._y``) or of another distribution;
``trainbus.testing.check_distribution`` reports one that does.

Importing this module imports no TensorFlow; the graph-mode helpers import it when called.

=============================  ==============================================================
name                           what
=============================  ==============================================================
``tf()``, ``tf1()``            the ``tensorflow`` module and ``tensorflow.compat.v1``, imported
                               on first call (so a plugin module imports without TensorFlow)
``hookimpl``                   the marker of hook implementations
``StopTraining``               raise it to end training after the current event
``TrainingInterrupted``        the exception a signal ends training with (exit status 128+n)
``signum_of_reason(reason)``   the signal number a stop reason names, or None
``checkpoint_report(trainer)`` the ``checkpoint``/``checkpoint_step``/``start_step``
                               arguments of a ``TrainingInterrupted`` raised in a trainer's
                               process
``PluginWarning``              the warning category of misbehaving plugins
``contribution_manager()``     the process's plugin manager for the contribution hooks
                               (``default_callbacks``, ``default_monitors``, ``sessinit_for``)
``drop_hooks(member, hooks)``  stop calling a registered callback for some hooks
``default_monitor(slot, cls)`` a ``default_monitors`` hook implementation that contributes
                               the monitor ``cls`` (``"package:Class"``, imported only when
                               ``DEFAULT_MONITORS()`` makes one) at ``slot``
``PLUGIN_API_VERSION``         the plugin API version this core implements
=============================  ==============================================================
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from trainbus.bus.hookspecs import hookimpl
from trainbus.bus.manager import PluginWarning, contribution_manager
from trainbus.bus.registry import PLUGIN_API_VERSION
from trainbus.exceptions import StopTraining
from trainbus.utils.lazytf import tf, tf1

__all__ = [
    "tf", "tf1", "hookimpl", "StopTraining", "TrainingInterrupted", "signum_of_reason", "checkpoint_report",
    "PluginWarning", "contribution_manager", "drop_hooks", "default_monitor", "PLUGIN_API_VERSION",
]


def drop_hooks(member: Any, hooks: Iterable[str]) -> None:
    """Stop calling ``member`` (a callback of the running trainer) for ``hooks``; nothing
    happens when it is not registered itself (e.g. wrapped by another callback)."""
    trainer = getattr(member, "trainer", None)
    pm = getattr(trainer, "plugin_manager", None)
    if pm is not None:
        pm.drop(member, hooks)


def default_monitor(slot: int, cls: str) -> Callable[[], list[tuple[int, Callable[[], Any]]]]:
    """A ``default_monitors`` hook implementation contributing one monitor, made with its
    default arguments, to ``DEFAULT_MONITORS()`` at ``slot`` (lower slots come first). ``cls``
    is ``"package.module:Class"``; it is imported only when a monitor is made, so the plugin
    module (loaded at every trainer setup) stays light::

        # trainbus_mything/_plugin.py, registered under [project.entry-points."trainbus.plugins"]
        from trainbus.plugin_api import default_monitor

        default_monitors = default_monitor(40, "trainbus_mything:MyWriter")
    """
    module, _, name = cls.partition(":")
    if not module or not name.isidentifier() or isinstance(slot, bool) or not isinstance(slot, int):
        raise ValueError(f"default_monitor({slot!r}, {cls!r}): give an int slot and the monitor class as "
                         "\"package.module:Class\"")

    def factory() -> Any:
        import importlib

        return getattr(importlib.import_module(module), name)()

    factory.__name__ = factory.__qualname__ = name
    factory.__doc__ = f"A new ``{name}()`` with its default arguments."

    def default_monitors() -> list[tuple[int, Callable[[], Any]]]:
        return [(slot, factory)]

    return hookimpl(default_monitors)


def __getattr__(name: str) -> Any:
    if name in ("TrainingInterrupted", "signum_of_reason", "checkpoint_report"):
        from trainbus.train import _signals as signals

        value = getattr(signals, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
