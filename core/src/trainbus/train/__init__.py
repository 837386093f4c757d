"""Trainers, ``TrainConfig`` and the training interface (tensorpack's ``train``).

The base classes and the one-device trainers (``SimpleTrainer``, ``NoOpTrainer``) live in the
core; the other trainer strategies (``SyncMultiGPUTrainerReplicated``, ``HorovodTrainer``, ...)
come from installed plugin distributions and resolve here by name. A core name always wins over
a plugin's entry point of the same name (a ``trainbus-trainers-single`` left installed from an
older checkout is never loaded). Importing this package does not import TensorFlow.
"""

from __future__ import annotations

from trainbus.bus import registry as _registry
from trainbus._defaults import DEFAULT_CALLBACKS, DEFAULT_MONITORS
from trainbus.exceptions import StopTraining

_CORE_ALL = ["StopTraining", "Trainer", "TowerTrainer", "SingleCostTrainer", "TrainConfig", "AutoResumeTrainConfig",
           "launch_train_with_config", "DEFAULT_CALLBACKS", "DEFAULT_MONITORS", "ModelDesc", "ModelDescBase",
           "TrainingInterrupted", "SimpleTrainer", "NoOpTrainer", "QueueInputTrainer"]

_LAZY = {
    "Trainer": "trainbus.train.base",
    "TowerTrainer": "trainbus.train.tower",
    "SingleCostTrainer": "trainbus.train.tower",
    "TrainConfig": "trainbus.train.config",
    "AutoResumeTrainConfig": "trainbus.train.config",
    "launch_train_with_config": "trainbus.train.interface",
    "apply_default_prefetch": "trainbus.train.interface",
    "ModelDesc": "trainbus.train.model_desc",
    "ModelDescBase": "trainbus.train.model_desc",
    "TrainingInterrupted": "trainbus.train._signals",
    "SimpleTrainer": "trainbus.train.simple",
    "NoOpTrainer": "trainbus.train.simple",
    "QueueInputTrainer": "trainbus.train.simple",
}
# ``__all__`` is computed on access: the names above, then every installed plugin's names
__getattr__, __dir__ = _registry.make_module_getattr(__name__, (__name__,), globals(), _CORE_ALL, lazy=_LAZY)
