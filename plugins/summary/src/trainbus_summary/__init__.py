"""Summary callbacks for trainbus: moving averages, merged TF summaries, sliding-window averages."""

from __future__ import annotations

from trainbus_summary._callbacks import (
    MergeAllSummaries,
    MergeAllSummaries_RunAlone,
    MergeAllSummaries_RunWithOp,
    MovingAverageSummary,
    SimpleMovingAverage,
)

__all__ = ["MovingAverageSummary", "MergeAllSummaries", "SimpleMovingAverage"]

# the two callback classes MergeAllSummaries() chooses between; importable, not entry points
_ = (MergeAllSummaries_RunAlone, MergeAllSummaries_RunWithOp)
