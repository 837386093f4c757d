"""The calling order per hook of a set of members, as a trainer would register them."""

from __future__ import annotations

from typing import Any, Sequence

from trainbus.bus.manager import TrainbusPluginManager

__all__ = ["describe_order"]


def describe_order(callbacks: Sequence[Any], monitors: Sequence[Any] = ()) -> str:
    """The calling order per hook for these callbacks and monitors (as a trainer would
    register them; ambient plugins included)."""
    pm = TrainbusPluginManager()
    pm.load_ambient()
    pm.register_ordered([*callbacks, *monitors])
    return pm.describe_hooks()
