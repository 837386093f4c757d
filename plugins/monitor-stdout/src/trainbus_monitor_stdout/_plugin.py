"""Contribution of ``trainbus-monitor-stdout`` to ``DEFAULT_MONITORS()`` (slot 30).

Loaded at every trainer setup, so it imports nothing heavy: the monitor class is imported
only when ``DEFAULT_MONITORS()`` makes one.
"""

from __future__ import annotations

from typing import Any

import trainbus


def ScalarPrinter() -> Any:
    """A new ``ScalarPrinter()`` with its default arguments."""
    from trainbus_monitor_stdout import ScalarPrinter as cls

    return cls()


@trainbus.hookimpl
def default_monitors() -> list[tuple[int, Any]]:
    return [(30, ScalarPrinter)]
