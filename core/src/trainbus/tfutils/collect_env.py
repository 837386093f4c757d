"""``collect_env_info()``: the environment of a run as a readable table, for bug reports.

Python, numpy, TensorFlow (version, build, CUDA/cuDNN it was built with, GPUs it sees),
trainbus and every installed plugin distribution, memory, CPUs and optional dependencies.
Nothing here needs a GPU; a missing library is reported, not raised. Run it as
``python -m trainbus.tfutils.collect_env``.
"""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

__all__ = ["collect_env_info", "collect_env_rows", "parse_tf_build_info"]


def parse_tf_build_info() -> list[tuple[str, str]]:
    """What TensorFlow was built with: CUDA and cuDNN versions, compute capabilities (empty
    for a CPU-only build that records none)."""
    from tensorflow.python.platform import build_info

    info = getattr(build_info, "build_info", None) or {}
    rows = []
    for key, label in (("cuda_version", "TF built with CUDA"), ("cudnn_version", "TF built with CUDNN")):
        if info.get(key):
            rows.append((label, str(info[key])))
    caps = info.get("cuda_compute_capabilities")
    if caps:
        rows.append(("TF compute capabilities", ",".join(str(c).replace("compute_", "") for c in caps)))
    return rows


def _version_of(module: str) -> str | None:
    import importlib

    try:
        mod = importlib.import_module(module)
    except Exception:  # noqa: BLE001 - absent or broken: reported as absent
        return None
    version = getattr(mod, "__version__", None)
    if version is None and module == "msgpack":
        version = ".".join(str(x) for x in getattr(mod, "version", ()))
    where = os.path.dirname(getattr(mod, "__file__", "") or "")
    return f"{version or '?'} @{where}" if where else str(version or "?")


def _memory() -> str | None:
    try:
        import psutil

        vm = psutil.virtual_memory()
        return f"{vm.available / 1024 ** 3:.2f}/{vm.total / 1024 ** 3:.2f} GB"
    except ImportError:
        pass
    try:
        with open("/proc/meminfo") as f:
            kb = {line.split(":")[0]: int(line.split()[1]) for line in f if line.split()[1:2] and line.split()[1].isdigit()}
        return f"{kb['MemAvailable'] / 1024 ** 2:.2f}/{kb['MemTotal'] / 1024 ** 2:.2f} GB"
    except (OSError, KeyError, ValueError, IndexError):
        return None


def _gpus() -> list[tuple[str, str]]:
    """GPUs by NVML (grouped by model), else a note that none was found."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no pynvml, no driver, no GPU
        return [("GPU", "Not found with NVML")]
    try:
        by_name: dict[str, list[str]] = {}
        for i in range(pynvml.nvmlDeviceGetCount()):
            name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i))
            name = name.decode() if isinstance(name, bytes) else str(name)
            by_name.setdefault(name, []).append(str(i))
        rows = [("Nvidia Driver", str(pynvml.nvmlSystemGetDriverVersion()))]
        rows += [("GPU " + ",".join(ids), name) for name, ids in by_name.items()]
        return rows or [("GPU", "Not found with NVML")]
    except Exception as e:  # noqa: BLE001
        return [("GPU", f"NVML error: {e}")]
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def collect_env_rows() -> list[tuple[str, str]]:
    """The ``(item, value)`` rows of :func:`collect_env_info`."""
    import numpy as np

    import trainbus

    rows: list[tuple[str, Any]] = [
        ("sys.platform", sys.platform),
        ("Python", sys.version.replace("\n", "")),
        ("trainbus", f"{trainbus.__version__} @{os.path.dirname(trainbus.__file__)}"),
        ("Numpy", np.__version__),
    ]
    try:
        import tensorflow as tf
    except ImportError as e:
        rows.append(("TensorFlow", f"not importable ({e})"))
    else:
        tf1 = tf.compat.v1
        rows.append(("TensorFlow", f"{tf.__version__}/{tf1.GIT_VERSION} @{os.path.dirname(tf.__file__)}"))
        rows.append(("TF Compiler Version", tf1.COMPILER_VERSION))
        rows.append(("TF CUDA support", tf.test.is_built_with_cuda()))
        rows += parse_tf_build_info()
        try:
            rows.append(("TF visible GPUs", len(tf.config.list_physical_devices("GPU"))))
        except Exception as e:  # noqa: BLE001
            rows.append(("TF visible GPUs", f"unknown ({e})"))
    rows.append(("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES", "Unspecified")))
    rows += _gpus()
    mem = _memory()
    if mem is not None:
        rows.append(("Free RAM", mem))
    rows.append(("CPU Count", os.cpu_count()))
    rows.append(("Machine", platform.machine()))
    for module in ("horovod", "cv2", "msgpack", "pluggy"):
        v = _version_of(module)
        if v is not None:
            rows.append((module, v))
    from trainbus.bus.report import plugin_report

    for rec in plugin_report(try_load=False):
        rows.append((f"plugin {rec['name']}", f"{rec['version']} (bundle {rec['bundle']})"))
    return [(k, str(v)) for k, v in rows]


def collect_env_info() -> str:
    """The environment as a two-column table (see the module's docstring)."""
    from trainbus.utils.table import format_table

    return format_table(collect_env_rows())


if __name__ == "__main__":  # pragma: no cover
    print(collect_env_info())
