"""``DEFAULT_CALLBACKS()`` / ``DEFAULT_MONITORS()``: collected from installed plugins through
the contribution hooks, in tensorpack's documented order. No TensorFlow import here."""

from __future__ import annotations

import warnings
from typing import Any

from trainbus.bus.manager import PluginWarning, contribution_manager

__all__ = ["DEFAULT_CALLBACKS", "DEFAULT_MONITORS", "EXPECTED_CALLBACKS", "EXPECTED_MONITORS"]

#: (slot, class name, distribution) of tensorpack's documented defaults
EXPECTED_CALLBACKS = (
    (10, "MovingAverageSummary", "trainbus-summary"),
    (20, "ProgressBar", "trainbus-steps"),
    (30, "MergeAllSummaries", "trainbus-summary"),
    (40, "RunUpdateOps", "trainbus-graph"),
)
EXPECTED_MONITORS = (
    (10, "TFEventWriter", "trainbus-monitor-tfevents"),
    (20, "JSONWriter", "trainbus-monitor-json"),
    (30, "ScalarPrinter", "trainbus-monitor-stdout"),
)


def _collect(hook: str, expected: tuple, label: str) -> list[Any]:
    pm = contribution_manager()
    entries: list[tuple[int, Any]] = []
    for contributed in getattr(pm.hook, hook)():
        for slot, factory in contributed:
            entries.append((slot, factory))
    entries.sort(key=lambda e: e[0])
    made = [m for m in (factory() for _, factory in entries) if m is not None]  # None: a guarded factory failed
    # a factory function (e.g. MergeAllSummaries) counts under its own name too
    names = {type(x).__name__ for x in made} | {getattr(f, "__name__", "") for _, f in entries}
    missing = [(name, dist) for _, name, dist in expected if name not in names]
    if missing:
        from trainbus.bus.registry import install_hint

        names = ", ".join(f"{name} ({dist})" for name, dist in missing)
        dists = " ".join(dict.fromkeys(dist for _, dist in missing))  # each once, in order
        warnings.warn(f"{label}() is missing {names}: their distributions are not installed.\n"
                      f"    {install_hint(dists)}\n"
                      f"    or all the defaults with the standard bundle: {install_hint('trainbus[standard]')}",
                      PluginWarning, stacklevel=3)
    return made


def DEFAULT_CALLBACKS() -> list[Any]:
    """The default callbacks of ``TrainConfig`` and ``Trainer.train_with_defaults``:
    ``MovingAverageSummary()``, ``ProgressBar()``, ``MergeAllSummaries()``, ``RunUpdateOps()``
    (those whose plugin is installed; a warning names the missing ones)."""
    return _collect("default_callbacks", EXPECTED_CALLBACKS, "DEFAULT_CALLBACKS")


def DEFAULT_MONITORS() -> list[Any]:
    """The default monitors: ``TFEventWriter()``, ``JSONWriter()``, ``ScalarPrinter()``
    (those whose plugin is installed; a warning names the missing ones)."""
    return _collect("default_monitors", EXPECTED_MONITORS, "DEFAULT_MONITORS")
