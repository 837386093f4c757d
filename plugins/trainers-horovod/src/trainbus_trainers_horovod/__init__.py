"""Horovod trainer strategy for trainbus: one process per device, all-reduced gradients."""

from __future__ import annotations

from trainbus_trainers_horovod.trainer import HorovodTrainer, VariableMismatchError

__all__ = ["HorovodTrainer", "VariableMismatchError"]
