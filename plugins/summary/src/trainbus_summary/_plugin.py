"""Default contributions of trainbus-summary (loaded for DEFAULT_CALLBACKS; imports no TensorFlow)."""

from __future__ import annotations

from typing import Any

import trainbus


def _moving_average_summary() -> Any:
    from trainbus_summary import MovingAverageSummary

    return MovingAverageSummary()


def _merge_all_summaries() -> Any:
    from trainbus_summary import MergeAllSummaries

    return MergeAllSummaries()


_moving_average_summary.__name__ = "MovingAverageSummary"
_merge_all_summaries.__name__ = "MergeAllSummaries"


@trainbus.hookimpl
def default_callbacks() -> list[tuple[int, Any]]:
    return [(10, _moving_average_summary), (30, _merge_all_summaries)]
