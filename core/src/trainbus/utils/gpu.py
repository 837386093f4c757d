"""How many GPUs this process can use, and running code with ``CUDA_VISIBLE_DEVICES`` changed."""

from __future__ import annotations

import os
import shutil
from contextlib import AbstractContextManager

from trainbus.utils import logger
from trainbus.utils.utils import change_env

__all__ = ["change_gpu", "get_nr_gpu", "get_num_gpu"]


def change_gpu(val: int | str) -> AbstractContextManager[None]:
    """Context with ``CUDA_VISIBLE_DEVICES=val`` (the previous value comes back after it).

    :param val: a GPU index (or a comma-separated list such as ``"0,2"``); ``-1`` hides every GPU
        (``CUDA_VISIBLE_DEVICES=""``).
    """
    val = str(val)
    if val == "-1":
        val = ""
    return change_env("CUDA_VISIBLE_DEVICES", val)


def _nvml_count() -> int | None:
    from trainbus.utils.nvml import NVMLContext, NvmlException

    try:
        with NVMLContext() as ctx:
            return ctx.num_devices()
    except NvmlException:
        return None


def get_num_gpu() -> int:
    """The number of GPUs this process may use: as many as ``CUDA_VISIBLE_DEVICES`` lists when it is set
    (0 when it is set but empty), else what NVML, then ``nvidia-smi -L``, then TensorFlow finds. 0 on a machine
    without GPUs. Never initializes a GPU through TensorFlow unless the other ways are unavailable."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    nvml = _nvml_count()
    if env is not None:
        listed = [x for x in env.split(",") if x.strip()]
        if nvml is not None and len(listed) > nvml:
            raise RuntimeError(f"CUDA_VISIBLE_DEVICES={env!r} lists {len(listed)} GPU(s) but only {nvml} exist; "
                               "fix CUDA_VISIBLE_DEVICES")
        return len(listed)
    if nvml is not None:
        return nvml
    if shutil.which("nvidia-smi"):
        from trainbus.utils.concurrency import subproc_call

        out, code = subproc_call("nvidia-smi -L", timeout=5)
        if code == 0 and isinstance(out, bytes):
            return len([ln for ln in out.decode("utf-8", "replace").splitlines() if ln.startswith("GPU ")])
    try:
        import tensorflow as tf
    except ImportError:
        return 0
    logger.info("Loading local devices by TensorFlow ...")
    return len(tf.config.list_physical_devices("GPU"))


get_nr_gpu = get_num_gpu
