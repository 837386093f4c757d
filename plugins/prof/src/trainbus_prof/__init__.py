"""Profiling and resource-tracking callbacks for trainbus."""

from __future__ import annotations

from trainbus_prof._gpuutil import GPUUtilizationTracker
from trainbus_prof._prof import GPUMemoryTracker, GraphProfiler, HostMemoryTracker, ThroughputTracker

__all__ = ["GPUUtilizationTracker", "GraphProfiler", "GPUMemoryTracker", "PeakMemoryTracker", "HostMemoryTracker",
           "ThroughputTracker"]

#: tensorpack's other name for the GPU memory tracker
PeakMemoryTracker = GPUMemoryTracker
