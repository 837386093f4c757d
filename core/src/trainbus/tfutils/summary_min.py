"""Tiny summary helper used by trainbus.testing (kept apart from tfutils.summary)."""

from __future__ import annotations

from typing import Any


def add_scalar_summary_if_available(t: Any) -> None:
    """Add a moving-average summary of ``t`` when ``tfutils.summary.add_moving_summary``
    exists, else a plain scalar summary."""
    try:
        from trainbus.tfutils.summary import add_moving_summary
    except ImportError:
        import tensorflow as tf

        tf.compat.v1.summary.scalar(t.op.name + "-summary", t)
        return
    add_moving_summary(t)
