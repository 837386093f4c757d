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

from trainbus.bus import registry as _registry

_NAMES = {
    "PredictConfig": "config",
    "PredictorBase": "base", "AsyncPredictorBase": "base", "OnlinePredictor": "base", "OfflinePredictor": "base",
    "MultiThreadAsyncPredictor": "concurrency",
    "DatasetPredictorBase": "dataset", "SimpleDatasetPredictor": "dataset", "MultiProcessDatasetPredictor": "dataset",
    "FeedfreePredictor": "feedfree",
    "MultiTowerOfflinePredictor": "multigpu", "DataParallelOfflinePredictor": "multigpu",
}

__all__ = list(_NAMES)


__getattr__, __dir__ = _registry.make_module_getattr(
    __name__, (), globals(), lazy={name: f"{__name__}.{mod}" for name, mod in _NAMES.items()})
