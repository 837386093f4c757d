"""Contribution of ``trainbus-monitor-tfevents`` to ``DEFAULT_MONITORS()`` (slot 10).

Loaded at every trainer setup, so it imports nothing heavy: the monitor class is imported
only when ``DEFAULT_MONITORS()`` makes one.
"""

from __future__ import annotations

from typing import Any

import trainbus


def TFEventWriter() -> Any:
    """A new ``TFEventWriter()`` with its default arguments."""
    from trainbus_monitor_tfevents import TFEventWriter as cls

    return cls()


@trainbus.hookimpl
def default_monitors() -> list[tuple[int, Any]]:
    return [(10, TFEventWriter)]
