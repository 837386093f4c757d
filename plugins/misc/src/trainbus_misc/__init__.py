"""Utility callbacks for trainbus."""

from __future__ import annotations

from trainbus_misc._misc import EarlyStopping, EstimatedTimeLeft, InjectShell, SendStat, StartProcOrThread

__all__ = ["SendStat", "InjectShell", "EstimatedTimeLeft", "StartProcOrThread", "EarlyStopping"]
