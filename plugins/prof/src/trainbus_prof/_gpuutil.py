"""GPUUtilizationTracker: NVML sampling in a separate process, averaged per epoch.

This module imports no TensorFlow: the sampling process imports it (spawn start method).
"""

from __future__ import annotations

import multiprocessing
import os
import queue as queue_mod
import time
from typing import Any, Callable, Sequence

from trainbus.callbacks.base import Callback
from trainbus.utils import logger

__all__ = ["GPUUtilizationTracker", "NVMLSampler", "probe_nvml"]


class NVMLSampler:
    """Reads the utilization (percent) of some GPUs through NVML (``pynvml``, from the
    ``nvidia-ml-py`` distribution). Picklable; NVML is opened in the process that calls it."""

    def __init__(self) -> None:
        self._handles: list[Any] | None = None

    def __call__(self, devices: Sequence[int]) -> list[float]:
        import pynvml

        if self._handles is None:
            pynvml.nvmlInit()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(int(d)) for d in devices]
        return [float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu) for h in self._handles]

    def close(self) -> None:
        if self._handles is not None:
            import pynvml

            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError:
                pass
            self._handles = None

    def __getstate__(self) -> dict:
        return {"_handles": None}


def probe_nvml(devices: Sequence[int] | None) -> tuple[list[int] | None, str | None]:
    """``(devices, None)`` when NVML can sample ``devices`` (all GPUs when None), else
    ``(None, reason)``."""
    try:
        import pynvml
    except ImportError as e:
        return None, f"pynvml is not importable ({e}); pip install nvidia-ml-py"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return None, f"NVML is not available ({e})"
    try:
        count = int(pynvml.nvmlDeviceGetCount())
        if devices is None:
            devices = list(range(count))
        if not devices:
            return None, "no GPU was found"
        bad = [d for d in devices if not 0 <= d < count]
        if bad:
            return None, f"GPU(s) {bad} do not exist (NVML sees {count} GPU(s))"
        for d in devices:
            pynvml.nvmlDeviceGetUtilizationRates(pynvml.nvmlDeviceGetHandleByIndex(d))
        return list(devices), None
    except pynvml.NVMLError as e:
        return None, f"NVML cannot read the utilization ({e})"
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _devices_from_env() -> list[int] | None:
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None:
        return None
    env = env.strip()
    if not env:
        return []
    try:
        return [int(x) for x in env.split(",") if x.strip()]
    except ValueError:
        return None  # UUIDs or MIG names: let NVML enumerate


class GPUUtilizationTracker(Callback):
    """Average GPU utilization within each epoch, put to the monitors as ``GPUUtil/{id}``
    (and ``GPUUtil/mean`` for several GPUs).

    A separate process samples NVML about every second while an epoch runs (the time of the
    callbacks after the epoch is not included). It is not safe to use with MPI. Where NVML or
    a GPU is absent, the callback warns once and disables itself.

    :param devices: physical GPU ids to track; None guesses from ``CUDA_VISIBLE_DEVICES``, or
        all GPUs NVML sees.
    :param sampler: keyword-only; a picklable callable ``devices -> list of percents`` used
        instead of NVML (for other sources of utilization; NVML is then not probed).
    :param interval_secs: keyword-only; time between two samples.
    """

    def __init__(self, devices: Sequence[int] | None = None, *, sampler: Callable[[Sequence[int]], Sequence[float]]
                 | None = None, interval_secs: float = 1.0) -> None:
        if devices is not None:
            if isinstance(devices, int) and not isinstance(devices, bool):
                devices = [devices]
            if not isinstance(devices, (list, tuple)) or not all(
                    isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in devices):
                raise ValueError(f"GPUUtilizationTracker: devices must be a list of GPU ids (ints >= 0) or None, "
                                 f"got {devices!r}")
            devices = list(devices)
        if sampler is not None and not callable(sampler):
            raise TypeError(f"GPUUtilizationTracker: sampler must be callable, got {sampler!r}")
        if isinstance(interval_secs, bool) or not isinstance(interval_secs, (int, float)) or interval_secs <= 0:
            raise ValueError(f"GPUUtilizationTracker: interval_secs must be a positive number, got {interval_secs!r}")
        self._devices_arg = devices
        self._sampler = sampler
        self._interval = float(interval_secs)
        self._enabled = False
        self._proc: Any = None
        self._devices: list[int] = []

    @property
    def enabled(self) -> bool:
        """Whether the tracker is sampling (False where NVML or a GPU is absent)."""
        return self._enabled

    def _disable(self, reason: str) -> None:
        if not getattr(self, "_warned", False):
            logger.warning(f"GPUUtilizationTracker is disabled: {reason}.")
            self._warned = True
        self._enabled = False

    def _before_train(self) -> None:
        devices = self._devices_arg if self._devices_arg is not None else _devices_from_env()
        if self._sampler is None:
            devices, reason = probe_nvml(devices)
            if reason is not None:
                self._disable(reason)
                return
        elif devices is None:
            self._disable("devices=None with a custom sampler and no CUDA_VISIBLE_DEVICES; pass devices=[...]")
            return
        if not devices:
            self._disable("no GPU to track")
            return
        self._devices = list(devices)
        ctx = multiprocessing.get_context("spawn")  # the child needs no TF and must not inherit its threads
        self._evt = ctx.Event()
        self._stop_evt = ctx.Event()
        self._queue = ctx.Queue()
        self._proc = ctx.Process(target=GPUUtilizationTracker.worker, name="GPUUtilizationTracker", daemon=True,
                                 args=(self._evt, self._queue, self._stop_evt, self._devices),
                                 kwargs={"sampler": self._sampler, "interval": self._interval})
        self._proc.start()
        self._enabled = True

    def _before_epoch(self) -> None:
        if self._enabled:
            self._evt.set()  # start sampling

    def _after_epoch(self) -> None:
        if not self._enabled:
            return
        # the child clears the event when it starts sampling; a child that is still starting
        # (short first epoch) must see the start before the stop, or the two sets merge
        deadline = time.monotonic() + 60.0
        while self._evt.is_set():
            if time.monotonic() > deadline or not self._proc.is_alive():
                self._stop_process()
                self._disable("the sampling process did not start")
                return
            time.sleep(0.002)
        self._evt.set()  # stop sampling, send the average

    def _trigger_epoch(self) -> None:
        if not self._enabled:
            return
        try:
            kind, payload = self._queue.get(timeout=max(30.0, 5 * self._interval))
        except queue_mod.Empty:
            alive = self._proc.is_alive()
            self._stop_process()
            self._disable("the sampling process did not report" + ("" if alive else " (it died)"))
            return
        if kind == "error":
            self._stop_process()
            self._disable(f"sampling failed: {payload}")
            return
        stats = list(payload)
        for dev, v in zip(self._devices, stats):
            self.trainer.monitors.put_scalar(f"GPUUtil/{dev}", float(v))
        if len(stats) > 1:
            self.trainer.monitors.put_scalar("GPUUtil/mean", float(sum(stats) / len(stats)))

    def _after_train(self) -> None:
        self._stop_process()

    def _stop_process(self) -> None:
        proc = self._proc
        if proc is None:
            return
        self._stop_evt.set()
        self._evt.set()
        proc.join(timeout=5)
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=5)
        self._proc = None
        self._enabled = False

    @staticmethod
    def worker(evt: Any, rst_queue: Any, stop_evt: Any, devices: Sequence[int], *,
               sampler: Callable[[Sequence[int]], Sequence[float]] | None = None, interval: float = 1.0) -> None:
        """The sampling loop (runs in the child process).

        Each ``evt`` set toggles between waiting and sampling: the first starts an epoch's
        sampling, the second ends it and puts ``("stats", averages per device)`` on
        ``rst_queue``. ``stop_evt`` set along with ``evt`` ends the loop. A sampling error is
        put as ``("error", message)`` and ends the loop.

        :param devices: the GPU ids to sample.
        :param sampler: ``devices -> percents``; NVML by default.
        """
        own = sampler is None
        if own:
            sampler = NVMLSampler()
        try:
            while True:
                evt.wait()
                evt.clear()
                if stop_evt.is_set():
                    return
                total = [0.0] * len(devices)
                count = 0
                while True:
                    try:
                        vals = list(sampler(devices))
                    except Exception as e:  # noqa: BLE001 - reported to the parent
                        rst_queue.put(("error", f"{type(e).__name__}: {e}"))
                        return
                    if len(vals) != len(devices):
                        rst_queue.put(("error", f"the sampler returned {len(vals)} values for {len(devices)} devices"))
                        return
                    total = [t + float(v) for t, v in zip(total, vals)]
                    count += 1
                    if evt.wait(interval):
                        evt.clear()
                        break
                rst_queue.put(("stats", [t / count for t in total]))
                if stop_evt.is_set():
                    return
        finally:
            if own:
                sampler.close()
