"""Utilities: ``trainbus.utils.logger`` and the helpers of :mod:`trainbus.utils.utils` (``get_rng``, ``get_tqdm``,
``execute_only_once``, ``fix_rng_seed``, ``change_env``, ``humanize_time_delta``) at ``trainbus.utils``.

Everything except the logger is loaded on first use, so ``import trainbus.utils`` stays fast and free of NumPy and
TensorFlow. The other modules are imported by name: ``from trainbus.utils import viz``,
``from trainbus.utils.serialize import dumps``, ``trainbus.utils.gpu.get_num_gpu()`` (after ``import
trainbus.utils``, submodules are loaded on attribute access too).
"""

from __future__ import annotations

import importlib
from typing import Any

from trainbus.utils import logger

_UTILS_NAMES = ("change_env", "get_rng", "fix_rng_seed", "get_tqdm", "execute_only_once", "humanize_time_delta")
_SUBMODULES = frozenset({"argtools", "compatible_serialize", "concurrency", "debug", "develop", "fs", "rundirlock",
                         "gpu", "image", "lazytf", "logger", "table", "naming", "nvml", "palette", "serialize", "stats", "timefmt",
                         "timer", "utils", "viz"})

__all__ = [*_UTILS_NAMES, "logger"]


def __getattr__(name: str) -> Any:
    if name in _UTILS_NAMES:
        value = getattr(importlib.import_module("trainbus.utils.utils"), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"trainbus.utils.{name}")
    raise AttributeError(f"module 'trainbus.utils' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_UTILS_NAMES) | _SUBMODULES)
