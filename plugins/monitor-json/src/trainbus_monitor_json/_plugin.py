"""Contribution of ``trainbus-monitor-json`` to ``DEFAULT_MONITORS()`` (slot 20).

Loaded at every trainer setup, so it imports nothing heavy: the monitor class is imported
only when ``DEFAULT_MONITORS()`` makes one.
"""

from __future__ import annotations

from typing import Any

import trainbus


def JSONWriter() -> Any:
    """A new ``JSONWriter()`` with its default arguments."""
    from trainbus_monitor_json import JSONWriter as cls

    return cls()


@trainbus.hookimpl
def default_monitors() -> list[tuple[int, Any]]:
    return [(20, JSONWriter)]
