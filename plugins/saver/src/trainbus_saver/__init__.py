"""Checkpoint callbacks for trainbus: ModelSaver, MinSaver, MaxSaver."""

from __future__ import annotations

from trainbus_saver._saver import MaxSaver, MinSaver, ModelSaver

__all__ = ["ModelSaver", "MinSaver", "MaxSaver"]
