"""GPU queries through NVML (the ``nvidia-ml-py`` package, imported as ``pynvml``).

``with NVMLContext() as ctx: ctx.num_devices(), ctx.device(0).memory()``. Without an NVIDIA driver (or without
the package) entering the context raises :class:`NvmlException` saying so, instead of crashing or hanging.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["NVMLContext", "NvmlException", "NvidiaDevice"]


class NvmlException(RuntimeError):
    """An NVML call failed (no driver, no GPU, no permission, ...)."""


def _pynvml() -> Any:
    try:
        import pynvml
    except ImportError:
        raise NvmlException("NVML queries need the 'nvidia-ml-py' package (pip install nvidia-ml-py)") from None
    return pynvml


def _call(fn: Any, *args: Any) -> Any:
    pynvml = _pynvml()
    try:
        return fn(*args)
    except pynvml.NVMLError as e:
        raise NvmlException(f"NVML {getattr(fn, '__name__', fn)} failed: {e}") from e


class NvidiaDevice:
    """One GPU, from :meth:`NVMLContext.device`."""

    def __init__(self, hnd: Any) -> None:
        self.hnd = hnd

    def memory(self) -> dict[str, int]:
        """``{'total': ..., 'free': ..., 'used': ...}`` in bytes."""
        info = _call(_pynvml().nvmlDeviceGetMemoryInfo, self.hnd)
        return {"total": int(info.total), "free": int(info.free), "used": int(info.used)}

    def utilization(self) -> dict[str, int]:
        """``{'gpu': %, 'memory': %}``: the share of the last second with a kernel running / memory being accessed."""
        u = _call(_pynvml().nvmlDeviceGetUtilizationRates, self.hnd)
        return {"gpu": int(u.gpu), "memory": int(u.memory)}

    def name(self) -> str:
        """The device's product name."""
        n = _call(_pynvml().nvmlDeviceGetName, self.hnd)
        return n.decode("utf-8") if isinstance(n, bytes) else str(n)


class NVMLContext:
    """A context in which NVML is initialized (``nvmlInit`` on enter, ``nvmlShutdown`` on exit).

    Raises :class:`NvmlException` on enter when NVML is not available (no NVIDIA driver or GPU).
    """

    _lock = threading.Lock()

    def __enter__(self) -> NVMLContext:
        pynvml = _pynvml()
        with self._lock:
            try:
                pynvml.nvmlInit()
            except pynvml.NVMLError as e:
                raise NvmlException(f"NVML is not available on this machine ({e}): no NVIDIA driver or GPU") from e
        return self

    def __exit__(self, *exc: Any) -> None:
        pynvml = _pynvml()
        with self._lock:
            _call(pynvml.nvmlShutdown)

    def num_devices(self) -> int:
        """The number of GPUs NVML sees (it ignores ``CUDA_VISIBLE_DEVICES``)."""
        return int(_call(_pynvml().nvmlDeviceGetCount))

    def devices(self) -> list[NvidiaDevice]:
        """Every GPU."""
        return [self.device(i) for i in range(self.num_devices())]

    def device(self, idx: int) -> NvidiaDevice:
        """The GPU of index ``idx``; raises ``IndexError`` if there are not that many."""
        n = self.num_devices()
        if not 0 <= idx < n:
            raise IndexError(f"NVMLContext.device({idx}): NVML found {n} device(s)")
        return NvidiaDevice(_call(_pynvml().nvmlDeviceGetHandleByIndex, idx))
