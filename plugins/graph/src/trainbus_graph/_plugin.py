"""Default contribution of trainbus-graph (loaded for DEFAULT_CALLBACKS; imports no TensorFlow)."""

from __future__ import annotations

from typing import Any

import trainbus


def _run_update_ops() -> Any:
    from trainbus_graph import RunUpdateOps

    return RunUpdateOps()


_run_update_ops.__name__ = "RunUpdateOps"


@trainbus.hookimpl
def default_callbacks() -> list[tuple[int, Any]]:
    return [(40, _run_update_ops)]
