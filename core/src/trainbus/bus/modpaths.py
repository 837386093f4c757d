"""tensorpack's module paths under ``trainbus``: ``import trainbus.callbacks.saver``,
``from trainbus.train.trainers import SimpleTrainer``, ``import trainbus.dataflow.imgaug``.

Three kinds of path are answered here, after the ordinary import system found no file:

* **plugin modules**: an installed distribution declares, in entry-point group
  ``trainbus.modules``, a module path it implements and the real module behind it
  (``"trainbus.dataflow.imgaug" = "trainbus_dataflow.imgaug"``). Importing the path gives that
  very module object (one module under two names, so classes are not duplicated); its
  submodules follow (``trainbus.dataflow.imgaug.crop`` is ``trainbus_dataflow.imgaug.crop``).
* **facade modules** (:data:`FACADES`): a tensorpack module whose names the core and several
  plugin distributions provide together (``trainbus.train.trainers`` holds the core's
  ``SimpleTrainer`` and ``HorovodTrainer`` from ``trainbus-trainers-horovod``).
  The module is made on first import; each name resolves on first use through its package
  (``trainbus.train``), so a missing plugin says what to ``pip install``.
* **out of scope** (:data:`OUT_OF_SCOPE`): a tensorpack module trainbus does not provide, with
  the reason, raised as ``ModuleNotFoundError``.

A first-party plugin's module path whose distribution is not installed (``trainbus.graph_builder``
without ``trainbus-trainers-multigpu``) is a ``ModuleNotFoundError`` naming what to install.

Nothing here imports TensorFlow or reads entry-point metadata before a path needs it.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

from trainbus.bus import registry as _registry
from trainbus.bus.catalogue import KNOWN_MODULES

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: `import trainbus` stays light
if TYPE_CHECKING:
    from typing import Any, Sequence

#: entry-point group through which distributions declare the module paths they implement
MODULE_GROUP = "trainbus.modules"

#: tensorpack module path (as ``trainbus.<...>``) -> (package whose attributes provide the names, names)
FACADES: dict[str, tuple[str, tuple[str, ...]]] = {
    "trainbus.callbacks.concurrency": ("trainbus.callbacks", ("StartProcOrThread",)),
    "trainbus.callbacks.graph": ("trainbus.callbacks", (
        "RunOp", "RunUpdateOps", "ProcessTensors", "DumpTensors", "DumpTensor", "DumpTensorAsImage",
        "DumpParamAsImage", "CheckNumerics")),
    "trainbus.callbacks.hooks": ("trainbus.callbacks", ("CallbackToHook", "HookToCallback", "TFLocalCLIDebugHook")),
    "trainbus.callbacks.inference": ("trainbus.callbacks", (
        "ScalarStats", "Inferencer", "ClassificationError", "BinaryClassificationStats")),
    "trainbus.callbacks.inference_runner": ("trainbus.callbacks", (
        "InferenceRunnerBase", "InferenceRunner", "DataParallelInferenceRunner")),
    "trainbus.callbacks.misc": ("trainbus.callbacks", ("SendStat", "InjectShell", "EstimatedTimeLeft")),
    "trainbus.callbacks.param": ("trainbus.callbacks", (
        "HyperParam", "GraphVarParam", "ObjAttrParam", "HyperParamSetter", "HumanHyperParamSetter",
        "ScheduledHyperParamSetter", "StatMonitorParamSetter", "HyperParamSetterWithFunc")),
    "trainbus.callbacks.prof": ("trainbus.callbacks", (
        "GPUUtilizationTracker", "GraphProfiler", "PeakMemoryTracker", "GPUMemoryTracker", "HostMemoryTracker",
        "ThroughputTracker")),
    "trainbus.callbacks.saver": ("trainbus.callbacks", ("ModelSaver", "MinSaver", "MaxSaver")),
    "trainbus.callbacks.stats": ("trainbus.callbacks", ()),
    "trainbus.callbacks.steps": ("trainbus.callbacks", ("TensorPrinter", "ProgressBar", "SessionRunTimeout")),
    "trainbus.callbacks.summary": ("trainbus.callbacks", (
        "MovingAverageSummary", "MergeAllSummaries", "SimpleMovingAverage")),
    "trainbus.train.trainers": ("trainbus.train", (
        "NoOpTrainer", "SimpleTrainer", "QueueInputTrainer", "SyncMultiGPUTrainer", "SyncMultiGPUTrainerReplicated",
        "SyncMultiGPUTrainerParameterServer", "AsyncMultiGPUTrainer", "DistributedTrainerParameterServer",
        "DistributedTrainerReplicated", "HorovodTrainer", "BytePSTrainer")),
    "trainbus.train.utility": ("trainbus.train", ()),
    "trainbus.input_source.input_source": ("trainbus.input_source", (
        "PlaceholderInput", "FeedInput", "FeedfreeInput", "QueueInput", "BatchQueueInput", "DummyConstantInput",
        "TensorInput", "ZMQInput", "TFDatasetInput", "StagingInput")),
    "trainbus.input_source.input_source_base": ("trainbus.input_source", ("InputSource", "remap_input_source")),
}

#: tensorpack module paths and names trainbus does not provide, with the reason
OUT_OF_SCOPE = _registry.OUT_OF_SCOPE


def _out_of_scope(fullname: str) -> ModuleNotFoundError:
    return ModuleNotFoundError(f"{fullname} is not provided by trainbus: {OUT_OF_SCOPE[fullname]}.", name=fullname)


def declared_modules() -> dict[str, str]:
    """Module path -> real module, as installed distributions declare them (read once)."""
    out: dict[str, str] = {}
    for path, eps in _registry.index(MODULE_GROUP).items():
        if len(eps) > 1:
            listing = "\n".join(f"  - {_registry.describe(ep)}" for ep in eps)
            raise _registry.PluginConflictError(
                f"the module path {path} is declared by more than one installed distribution:\n{listing}\n"
                "Uninstall all but one of them.")
        out[path] = eps[0].value
    return out


# The finders and loaders below have the methods the import system calls (``find_spec``;
# ``create_module``/``exec_module``) without deriving from ``importlib.abc``, whose import
# (importlib.resources, pathlib, tempfile, ...) would double the time of ``import trainbus``.


class _AliasLoader:
    """Gives the already-existing module ``target`` for another name."""

    def __init__(self, target: str, declared_by: Any = None) -> None:
        self.target = target
        self.declared_by = declared_by
        self._spec: Any = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        try:
            module = importlib.import_module(self.target)
        except ImportError as exc:
            who = f" (declared by {_registry.describe(self.declared_by)})" if self.declared_by is not None else ""
            raise _registry.PluginLoadError(
                f"{spec.name} is the module {self.target}{who}, but importing it failed: {type(exc).__name__}: "
                f"{exc}. Reinstall or uninstall that distribution.") from exc
        self._spec = module.__spec__
        _ALIASED[spec.name] = self.target
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system stamped our spec on the module; the module keeps its own
        module.__spec__ = self._spec


class _Facade(ModuleType):
    """A tensorpack module path whose names live in a trainbus package (core or plugins)."""

    def __init__(self, name: str, source: str, names: Sequence[str]) -> None:
        super().__init__(name, f"tensorpack's {name.replace('trainbus', 'tensorpack', 1)}: "
                               f"{', '.join(names) or 'no public names'} (from {source})")
        self.__dict__["_source"] = source
        self.__dict__["_names"] = tuple(names)

    def __getattr__(self, name: str) -> Any:
        if name == "__all__":
            return [n for n in self._names if _available(self._source, n)]
        if name.startswith("__") or name not in self._names:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        if name in OUT_OF_SCOPE:
            raise ImportError(f"{self.__name__}.{name} is not provided by trainbus: {OUT_OF_SCOPE[name]}.",
                              name=self.__name__)
        value = getattr(importlib.import_module(self._source), name)
        self.__dict__[name] = value
        return value

    def __dir__(self) -> list[str]:
        return sorted({*self.__dict__, *self._names})


def _available(package: str, name: str) -> bool:
    """Whether ``package.name`` can be had (core name, or its plugin is installed)."""
    if name in OUT_OF_SCOPE:
        return False
    try:
        getattr(importlib.import_module(package), name)
    except (ImportError, AttributeError):
        return False
    return True


class _FacadeLoader:
    def __init__(self, source: str, names: Sequence[str]) -> None:
        self.source, self.names = source, names

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return _Facade(spec.name, self.source, self.names)

    def exec_module(self, module: ModuleType) -> None:
        pass


#: module path -> real module name, for every alias made so far (their submodules follow them)
_ALIASED: dict[str, str] = {}


class SubmoduleFinder:
    """First on ``sys.meta_path``: a submodule of an aliased package is the real package's
    submodule (never a second copy loaded from the same file under the other name)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        parent, _, child = fullname.rpartition(".")
        real_parent = _ALIASED.get(parent)
        if real_parent is None:
            # a first-party plugin's path is answered before the file system looks: a directory an
            # older checkout left behind (``trainbus/graph_builder/`` holding only ``__pycache__``)
            # would otherwise import as an empty namespace package
            return _MODULE_PATHS.find_spec(fullname) if fullname in KNOWN_MODULES else None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(f"{real_parent}.{child}"))


class ModulePathFinder:
    """Last on ``sys.meta_path``: ``trainbus.*`` paths no file provides."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith("trainbus."):
            return None
        declared = declared_modules()
        real = declared.get(fullname)
        if real is not None:
            ep = _registry.index(MODULE_GROUP)[fullname][0]
            return importlib.util.spec_from_loader(fullname, _AliasLoader(real, ep), is_package=True)
        if fullname in FACADES:
            source, names = FACADES[fullname]
            return importlib.util.spec_from_loader(fullname, _FacadeLoader(source, names))
        if fullname in OUT_OF_SCOPE:
            raise _out_of_scope(fullname)
        dist = KNOWN_MODULES.get(fullname)
        if dist is not None:  # a first-party plugin's path (trainbus.graph_builder): say what to install
            raise ModuleNotFoundError(f"{fullname} is provided by the {dist!r} distribution, which is not installed; "
                                      f"install it: {_registry.install_hint(dist)}", name=fullname)
        return None


_MODULE_PATHS = ModulePathFinder()


def install() -> None:
    """Put the two finders in place (idempotent)."""
    if not any(isinstance(f, SubmoduleFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, SubmoduleFinder())
    if not any(isinstance(f, ModulePathFinder) for f in sys.meta_path):
        sys.meta_path.append(ModulePathFinder())
