"""Reading ``stats.json`` (shared by the JSON monitor and resuming)."""

from __future__ import annotations

import json
import os
from typing import Any

FILENAME = "stats.json"


class CorruptStatsError(ValueError):
    """``stats.json`` exists but cannot be parsed."""


def load_existing_json(dir: str | None) -> list[dict[str, Any]] | None:
    """The records of ``dir/stats.json``, or None if there is none."""
    if dir is None:
        return None
    fname = os.path.join(dir, FILENAME)
    if not os.path.isfile(fname):
        return None
    try:
        with open(fname, encoding="utf-8") as f:
            stats = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorruptStatsError(f"{fname} is not valid JSON ({e}); move it away (or restore it from a backup) "
                                "before resuming in this directory") from None
    if not isinstance(stats, list):
        raise CorruptStatsError(f"{fname} does not hold a list of records; move it away before resuming here")
    return stats


def load_existing_epoch_number(dir: str | None) -> int | None:
    """The ``epoch_num`` of the last record of ``dir/stats.json``, or None."""
    stats = load_existing_json(dir)
    try:
        return int(stats[-1]["epoch_num"]) if stats else None
    except (KeyError, TypeError, ValueError):
        return None
