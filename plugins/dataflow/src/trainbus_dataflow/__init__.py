"""tensorpack's DataFlow library for trainbus, reachable as ``trainbus.dataflow.<Name>``.

Modules: ``base`` (the core's base classes, re-exported), ``common`` (composition), ``raw``
(sources from Python objects), ``parallel`` (multi-process/thread runners), ``parallel_map``
(parallel maps), ``image`` and ``imgaug`` (image augmentation), ``dataset`` (dataset readers),
``serialize`` and ``format`` (serializers and readers), ``remote`` (ZMQ across processes).
Names resolve through the entry-point group ``trainbus.dataflow``; importing this package
imports none of them (each is imported from its module on first use).
"""

from __future__ import annotations

import importlib
from typing import Any

#: module -> the public names it provides (the same names the entry points declare)
_MODULES: dict[str, tuple[str, ...]] = {
    "common": ("BatchData", "BatchDataByShape", "FixedSizeData", "MapData", "MapDataComponent", "RepeatedData",
        "RepeatedDataPoint", "RandomChooseData", "RandomMixData", "JoinData", "ConcatData", "SelectComponent",
        "LocallyShuffleData", "CacheData", "PrintData", "TestDataSpeed"),
    "raw": ("DataFromList", "DataFromDict", "DataFromGenerator", "DataFromIterable", "DataFromQueue", "FakeData"),
    "parallel": ("MultiProcessRunner", "MultiProcessRunnerZMQ", "MultiThreadRunner", "PrefetchData",
        "PrefetchDataZMQ", "MultiProcessPrefetchData", "MultiThreadPrefetchData", "DataWorkerError", "WorkerDiedError",
        "WorkerFailedError", "WorkerStalledError"),
    "parallel_map": ("MultiThreadMapData", "MultiProcessMapData", "MultiProcessMapDataZMQ",
        "MultiProcessMapAndBatchData", "MultiProcessMapAndBatchDataZMQ", "ThreadedMapData"),
    "image": ("ImageFromFile", "AugmentImageComponent", "AugmentImageComponents", "AugmentImageCoordinates"),
    "remote": ("send_dataflow_zmq", "RemoteDataZMQ"),
    "serialize": ("LMDBSerializer", "NumpySerializer", "TFRecordSerializer", "HDF5Serializer"),
    "format": ("LMDBData", "LMDBDataDecoder", "HDF5Data", "CaffeLMDB", "SVMLightData"),
}
#: the modules exported by name (``from trainbus.dataflow import imgaug, dataset``)
_SUBMODULES = ('imgaug', 'dataset')
_WHERE = {name: mod for mod, names in _MODULES.items() for name in names}

__all__ = [*_WHERE, *_SUBMODULES]


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    mod = _WHERE.get(name)
    if mod is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{mod}"), name)
    globals()[name] = value
    return value
