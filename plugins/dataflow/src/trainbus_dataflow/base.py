"""The DataFlow base classes (``trainbus.dataflow.base``).

These are the core's own objects, re-exported: ``trainbus_dataflow.base.DataFlow is
trainbus.dataflow.DataFlow``, so ``isinstance`` agrees whichever path a class was imported from.
"""

from __future__ import annotations

from trainbus.dataflow import (DataFlow, DataFlowReentrantGuard, DataFlowTerminated, ProxyDataFlow, RNGDataFlow,
                               get_rng)

__all__ = ["DataFlow", "ProxyDataFlow", "RNGDataFlow", "DataFlowTerminated", "DataFlowReentrantGuard", "get_rng"]
