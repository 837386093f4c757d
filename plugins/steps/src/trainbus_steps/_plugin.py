"""Contributes ``ProgressBar`` to ``DEFAULT_CALLBACKS()`` (slot 20). Imports nothing heavy."""

from __future__ import annotations

from typing import Any

import trainbus


def _progress_bar() -> Any:
    from trainbus_steps import ProgressBar

    return ProgressBar()


@trainbus.hookimpl
def default_callbacks() -> list[tuple[int, Any]]:
    return [(20, _progress_bar)]
