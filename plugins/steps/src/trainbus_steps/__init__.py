"""Per-step callbacks for trainbus: ProgressBar, TensorPrinter, SessionRunTimeout."""

from __future__ import annotations

from trainbus_steps._steps import ProgressBar, SessionRunTimeout, TensorPrinter

__all__ = ["ProgressBar", "TensorPrinter", "SessionRunTimeout"]
