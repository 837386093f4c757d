"""trainbus: tensorpack's training system on TensorFlow 2 (compat.v1 graph mode), as a
pluggy event bus whose callbacks, monitors, trainers and session initializers are plugins.

``import trainbus`` imports no TensorFlow. Names are found lazily: the core's own
(``trainbus.ModelDesc``, ``trainbus.TrainConfig``, ``trainbus.Callback``, ...) and every
name an installed plugin provides (``trainbus.ModelSaver``, ``trainbus.SyncMultiGPUTrainer``,
``trainbus.SmartInit``, ...).
"""

from __future__ import annotations

import importlib

from trainbus.bus import modpaths as _modpaths, registry as _registry
from trainbus.exceptions import PluginAPIVersionError, PluginConflictError, PluginLoadError, StopTraining
from trainbus.bus.registry import PLUGIN_API_VERSION
from trainbus._gcfreeze import freeze_tensorflow_objects as _freeze_tensorflow_objects

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: `import trainbus` stays light
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

# Names bound at import. ``__all__`` itself is computed on access (``__getattr__`` below), so
# ``import trainbus`` reads no entry-point metadata while ``from trainbus import *`` still
# gets every name, plugins included.
_CORE_ALL = ["hookimpl", "hookspec", "StopTraining", "PluginConflictError", "PluginLoadError", "PluginAPIVersionError",
             "PLUGIN_API_VERSION", "__version__"]

_LAZY_MODULES = {
    "callbacks", "train", "tfutils", "dataflow", "input_source", "predict", "utils", "models", "testing",
    "compose", "runfile", "compat", "graph_builder", "contrib", "plugin_api", "checkpoint", "show",
}
_LAZY = {
    # pluggy's markers: pluggy is imported when a plugin module or a training first needs it
    "hookimpl": "trainbus.bus.hookspecs", "hookspec": "trainbus.bus.hookspecs",
    "ModelDesc": "trainbus.train", "ModelDescBase": "trainbus.train", "Trainer": "trainbus.train",
    "TowerTrainer": "trainbus.train", "SingleCostTrainer": "trainbus.train", "TrainConfig": "trainbus.train",
    "AutoResumeTrainConfig": "trainbus.train", "launch_train_with_config": "trainbus.train",
    "DEFAULT_CALLBACKS": "trainbus.train", "DEFAULT_MONITORS": "trainbus.train",
    "SimpleTrainer": "trainbus.train", "NoOpTrainer": "trainbus.train", "QueueInputTrainer": "trainbus.train",
    "Callback": "trainbus.callbacks", "ProxyCallback": "trainbus.callbacks", "CallbackFactory": "trainbus.callbacks",
    "Callbacks": "trainbus.callbacks", "PeriodicTrigger": "trainbus.callbacks", "PeriodicCallback": "trainbus.callbacks",
    "EnableCallbackIf": "trainbus.callbacks", "MonitorBase": "trainbus.callbacks", "Monitors": "trainbus.callbacks",
    "SessionInit": "trainbus.tfutils.sessinit", "JustCurrentSession": "trainbus.tfutils.sessinit",
    "ChainInit": "trainbus.tfutils.sessinit", "TowerContext": "trainbus.tfutils", "TowerFunc": "trainbus.tfutils",
    "get_current_tower_context": "trainbus.tfutils", "argscope": "trainbus.tfutils", "get_arg_scope": "trainbus.tfutils",
    "get_default_sess_config": "trainbus.tfutils", "get_global_step_var": "trainbus.tfutils",
    "get_global_step_value": "trainbus.tfutils",
    "DataFlow": "trainbus.dataflow", "RNGDataFlow": "trainbus.dataflow",
    "InputSource": "trainbus.input_source", "FeedInput": "trainbus.input_source", "QueueInput": "trainbus.input_source",
    "StagingInput": "trainbus.input_source", "TFDatasetInput": "trainbus.input_source",
    "DummyConstantInput": "trainbus.input_source",
    "PredictConfig": "trainbus.predict", "OnlinePredictor": "trainbus.predict", "OfflinePredictor": "trainbus.predict",
    "logger": "trainbus.utils",
    "tfv1": "trainbus.compat", "is_tfv2": "trainbus.compat",
}
_plugin_getattr, _plugin_dir = _registry.make_module_getattr(__name__, _registry.NAME_GROUPS, globals())


#: the subpackages whose ``__all__`` ``from trainbus import *`` binds, in the order tensorpack's
#: star import binds them (a later one wins a name two of them export)
_STAR_MODULES = ("utils", "dataflow", "models", "callbacks", "tfutils", "train", "input_source", "predict")
#: module names tensorpack's star import also binds
_STAR_EXTRA = ("compat", "tfv1")
#: ... and those a plugin distribution provides, bound when it is installed (``graph_builder``:
#: trainbus-trainers-multigpu)
_STAR_PLUGIN_MODULES = ("graph_builder",)

_modpaths.install()
# TensorFlow imported first (the usual script): its objects go to the collector's permanent generation
_freeze_tensorflow_objects()


#: (the entry-point scan they were computed from, ``__all__``, name -> the subpackage in
#: _STAR_MODULES that exports it): computed once per scan, as ``from trainbus import *`` asks
#: for ``__all__`` three times and every name it binds is looked up
_STAR: list[Any] = [None, (), {}]


def _star_table() -> tuple[tuple[str, ...], dict[str, str]]:
    scan = _registry.scan()
    if _STAR[0] is not scan:
        declared = _modpaths.declared_modules()
        plugin_modules = [m for m in _STAR_PLUGIN_MODULES if f"{__name__}.{m}" in declared]
        names = dict.fromkeys([*_CORE_ALL, *_STAR_MODULES, *_STAR_EXTRA, *plugin_modules, *_LAZY])
        owners: dict[str, str] = {}
        for sub in _STAR_MODULES:
            exported = importlib.import_module(f"{__name__}.{sub}").__all__
            names.update(dict.fromkeys(exported))
            owners.update(dict.fromkeys(exported, sub))  # a later subpackage wins a name two export
        names.update(dict.fromkeys(_registry.installed_names(_registry.NAME_GROUPS)))
        _STAR[:] = [scan, tuple(names), owners]
    return _STAR[1], _STAR[2]


def _star_names() -> list[str]:
    """``__all__``: the core's names, the subpackages and what each of them exports (plugin
    names included: each subpackage lists what installed distributions declare). Imports the
    subpackages (and so TensorFlow), as ``from tensorpack import *`` does."""
    return list(_star_table()[0])


def __getattr__(name: str) -> Any:
    if name == "__all__":
        return _star_names()
    if name in _LAZY_MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    try:
        return _plugin_getattr(name)
    except AttributeError:
        if name.startswith("_"):  # private submodules (``from trainbus import _defaults``) import as files
            raise
    sub = _star_table()[1].get(name)  # a name a subpackage exports (e.g. trainbus.Conv2D, trainbus.get_rng)
    if sub is not None:
        value = getattr(importlib.import_module(f"{__name__}.{sub}"), name)
        globals()[name] = value
        return value
    # ``from trainbus import Nmae``: an ImportError naming the closest names; else AttributeError
    _registry._raise_missing(__name__, name, lambda: [*__dir__(), *_star_names()])


def __dir__() -> list[str]:
    return sorted({*_plugin_dir(), *_LAZY, *_LAZY_MODULES})
