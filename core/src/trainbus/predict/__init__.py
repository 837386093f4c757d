"""Predictors: run a trained model's inference graph.

=================================  ====================================================================
``PredictConfig``                  what to build and load (``trainbus.predict.config``)
``PredictorBase``                  ``predictor(*inputs) -> outputs`` (``trainbus.predict.base``)
``OnlinePredictor``                given tensors in an existing session
``OfflinePredictor``               a ``PredictConfig`` built in its own graph and session
``AsyncPredictorBase``             ``put_task(dp) -> Future``
``MultiThreadAsyncPredictor``      threads batching queued datapoints (``trainbus.predict.concurrency``)
``DatasetPredictorBase``           runs over a DataFlow (``trainbus.predict.dataset``)
``SimpleDatasetPredictor``         one ``OfflinePredictor`` over a DataFlow
``MultiProcessDatasetPredictor``   worker processes over a DataFlow
``FeedfreePredictor``              inputs from an ``InputSource`` (``trainbus.predict.feedfree``)
``MultiTowerOfflinePredictor``     one tower per device, one predictor each (``trainbus.predict.multigpu``)
``DataParallelOfflinePredictor``   one predictor running every tower at once
=================================  ====================================================================

The names are imported on first use, from their modules.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    "PredictConfig": "config",
    "PredictorBase": "base", "AsyncPredictorBase": "base", "OnlinePredictor": "base", "OfflinePredictor": "base",
    "MultiThreadAsyncPredictor": "concurrency",
    "DatasetPredictorBase": "dataset", "SimpleDatasetPredictor": "dataset", "MultiProcessDatasetPredictor": "dataset",
    "FeedfreePredictor": "feedfree",
    "MultiTowerOfflinePredictor": "multigpu", "DataParallelOfflinePredictor": "multigpu",
}

__all__ = list(_NAMES)


def __getattr__(name: str) -> Any:
    mod = _NAMES.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES})
