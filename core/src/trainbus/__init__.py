"""trainbus: tensorpack's training system on TensorFlow 2 (compat.v1 graph mode), as a
pluggy event bus whose callbacks, monitors, trainers and session initializers are plugins.

``import trainbus`` imports no TensorFlow. Names are found lazily: the core's own
(``trainbus.ModelDesc``, ``trainbus.TrainConfig``, ``trainbus.Callback``, ...) and every
name an installed plugin provides (``trainbus.ModelSaver``, ``trainbus.SimpleTrainer``,
``trainbus.SmartInit``, ...).
"""

from __future__ import annotations

import importlib
from typing import Any

from trainbus import _registry
from trainbus._exceptions import PluginAPIVersionError, PluginConflictError, PluginLoadError, StopTraining
from trainbus._registry import PLUGIN_API_VERSION
from trainbus.hookspecs import hookimpl, hookspec

__version__ = "0.1.0"

# Names bound at import. ``__all__`` itself is computed on access (``__getattr__`` below), so
# ``import trainbus`` reads no entry-point metadata while ``from trainbus import *`` still
# gets every name, plugins included.
_CORE_ALL = ["hookimpl", "hookspec", "StopTraining", "PluginConflictError", "PluginLoadError", "PluginAPIVersionError",
             "PLUGIN_API_VERSION", "__version__"]

_LAZY_MODULES = {
    "callbacks", "train", "tfutils", "dataflow", "input_source", "predict", "utils", "models", "testing", "hookspecs",
    "compose", "config_file",
}
_LAZY = {
    "ModelDesc": "trainbus.train", "ModelDescBase": "trainbus.train", "Trainer": "trainbus.train",
    "TowerTrainer": "trainbus.train", "SingleCostTrainer": "trainbus.train", "TrainConfig": "trainbus.train",
    "AutoResumeTrainConfig": "trainbus.train", "launch_train_with_config": "trainbus.train",
    "DEFAULT_CALLBACKS": "trainbus.train", "DEFAULT_MONITORS": "trainbus.train",
    "Callback": "trainbus.callbacks", "ProxyCallback": "trainbus.callbacks", "CallbackFactory": "trainbus.callbacks",
    "Callbacks": "trainbus.callbacks", "PeriodicTrigger": "trainbus.callbacks", "PeriodicCallback": "trainbus.callbacks",
    "EnableCallbackIf": "trainbus.callbacks", "MonitorBase": "trainbus.callbacks", "Monitors": "trainbus.callbacks",
    "SessionInit": "trainbus.tfutils.sessinit", "JustCurrentSession": "trainbus.tfutils.sessinit",
    "ChainInit": "trainbus.tfutils.sessinit", "TowerContext": "trainbus.tfutils", "TowerFunc": "trainbus.tfutils",
    "get_current_tower_context": "trainbus.tfutils", "argscope": "trainbus.tfutils", "get_arg_scope": "trainbus.tfutils",
    "get_default_sess_config": "trainbus.tfutils", "get_global_step_var": "trainbus.tfutils",
    "get_global_step_value": "trainbus.tfutils",
    "DataFlow": "trainbus.dataflow", "RNGDataFlow": "trainbus.dataflow", "DataFromList": "trainbus.dataflow",
    "DataFromGenerator": "trainbus.dataflow", "FakeData": "trainbus.dataflow", "BatchData": "trainbus.dataflow",
    "MapData": "trainbus.dataflow",
    "InputSource": "trainbus.input_source", "FeedInput": "trainbus.input_source", "QueueInput": "trainbus.input_source",
    "StagingInput": "trainbus.input_source", "TFDatasetInput": "trainbus.input_source",
    "DummyConstantInput": "trainbus.input_source",
    "PredictConfig": "trainbus.predict", "OnlinePredictor": "trainbus.predict", "OfflinePredictor": "trainbus.predict",
    "logger": "trainbus.utils",
}
_plugin_getattr, _plugin_dir = _registry.make_module_getattr(__name__, _registry.NAME_GROUPS, globals())


#: the subpackages ``from trainbus import *`` binds (as ``from tensorpack import *`` does)
_STAR_MODULES = ("callbacks", "train", "tfutils", "dataflow", "input_source", "predict", "utils", "models")


def _star_names() -> list[str]:
    """``__all__``: the core's names, its lazy names and subpackages, and every name an
    installed plugin distribution declares (read from entry-point metadata, importing
    nothing; ``import *`` then imports each on demand)."""
    names = [*_CORE_ALL, *_STAR_MODULES, *_LAZY]
    seen = set(names)
    names += [n for n in _registry.installed_names(_registry.NAME_GROUPS) if n not in seen]
    return names


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return _star_names()
    if name in _LAZY_MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    return _plugin_getattr(name)


def __dir__() -> list[str]:
    return sorted({*_plugin_dir(), *_LAZY, *_LAZY_MODULES})
