"""Data-parallel trainer strategies for several devices in one process (trainbus)."""

from __future__ import annotations

from trainbus_trainers_multigpu.trainers import (
    AsyncMultiGPUTrainer,
    DataParallelTrainerBase,
    SyncMultiGPUTrainer,
    SyncMultiGPUTrainerParameterServer,
    SyncMultiGPUTrainerReplicated,
)

__all__ = ["SyncMultiGPUTrainer", "SyncMultiGPUTrainerReplicated", "SyncMultiGPUTrainerParameterServer",
           "AsyncMultiGPUTrainer", "DataParallelTrainerBase"]
