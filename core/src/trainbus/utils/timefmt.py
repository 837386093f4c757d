"""Durations for humans (epoch times, time left)."""

from __future__ import annotations


def human_seconds(sec: float, digits: int = 0) -> str:
    """``"0.27 sec"`` (with ``digits=2``), ``"3 min 5 sec"``, ``"2 hours 7 min"``, ``"1 days 3 hours"``."""
    sec = max(0.0, float(sec))
    if sec < 60:
        return f"{sec:.{digits}f} sec"
    m, s = divmod(int(round(sec)), 60)
    if m < 60:
        return f"{m} min {s} sec"
    h, m = divmod(m, 60)
    if h < 24:
        return f"{h} hours {m} min"
    d, h = divmod(h, 24)
    return f"{d} days {h} hours"
