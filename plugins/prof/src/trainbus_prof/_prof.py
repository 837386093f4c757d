"""GraphProfiler, GPUMemoryTracker, HostMemoryTracker, ThroughputTracker."""

from __future__ import annotations

import os
import re
import time
from typing import Any, Sequence

from trainbus.callbacks.base import Callback
from trainbus.utils import logger
from trainbus.utils.fs import atomic_write_bytes, atomic_write_text

__all__ = ["GraphProfiler", "GPUMemoryTracker", "HostMemoryTracker", "ThroughputTracker"]


class GraphProfiler(Callback):
    """Trace training steps and write the traces to ``logger.get_logger_dir()``.

    Every step it runs (with ``RunOptions(trace_level=FULL_TRACE)`` in the step's own
    ``Session.run``) writes, named by the global step after the step:

    * ``chrome-trace-{step}.json`` (``dump_tracing``): open it in ``chrome://tracing`` or Perfetto;
    * ``runmetadata-{step}.pb`` (``dump_metadata``): a serialized ``tf.compat.v1.RunMetadata``
      for ``tfprof``;
    * an event with the run metadata tagged ``trace-{step}`` through ``trainer.monitors.put_event``
      (``dump_event``), shown by TensorBoard when ``TFEventWriter`` is a monitor.

    Tracing is expensive: schedule it, e.g.
    ``EnableCallbackIf(GraphProfiler(), lambda self: 20 < self.trainer.global_step < 30)``.

    :param dump_metadata: write ``RunMetadata`` files.
    :param dump_tracing: write Chrome tracing files.
    :param dump_event: put the run metadata as events to the monitors.
    """

    def __init__(self, dump_metadata: bool = False, dump_tracing: bool = True, dump_event: bool = False) -> None:
        for label, v in (("dump_metadata", dump_metadata), ("dump_tracing", dump_tracing), ("dump_event", dump_event)):
            if not isinstance(v, bool):
                raise TypeError(f"GraphProfiler: {label} must be True or False, got {v!r}")
        if not (dump_metadata or dump_tracing or dump_event):
            raise ValueError("GraphProfiler: dump_metadata, dump_tracing and dump_event are all False; enable at least one")
        self._dump_meta = dump_metadata
        self._dump_tracing = dump_tracing
        self._dump_event = dump_event

    def _setup_graph(self) -> None:
        import tensorflow as tf

        tf1 = tf.compat.v1
        self._dir = logger.get_logger_dir()
        if (self._dump_meta or self._dump_tracing) and self._dir is None:
            raise RuntimeError("GraphProfiler writes files to the logger directory, which is not set; call "
                               "trainbus.utils.logger.set_logger_dir(...) before training")
        self._args = tf1.train.SessionRunArgs(
            fetches=[], options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE))

    def _before_run(self, ctx: Any) -> Any:
        return self._args

    def _after_run(self, ctx: Any, run_values: Any) -> None:
        meta = run_values.run_metadata
        if meta is None or not meta.step_stats.dev_stats:
            return
        step = self.global_step
        if self._dump_meta:
            atomic_write_bytes(os.path.join(self._dir, f"runmetadata-{step}.pb"), meta.SerializeToString())
        if self._dump_tracing:
            from tensorflow.python.client import timeline

            trace = timeline.Timeline(step_stats=meta.step_stats).generate_chrome_trace_format()
            atomic_write_text(os.path.join(self._dir, f"chrome-trace-{step}.json"), trace)
        if self._dump_event:
            import tensorflow as tf

            evt = tf.compat.v1.Event()
            evt.tagged_run_metadata.tag = f"trace-{step}"
            evt.tagged_run_metadata.run_metadata = meta.SerializeToString()
            self.trainer.monitors.put_event(evt)


_DEV_RE = re.compile(r"^/?(?:device:)?(gpu|cpu):(\d+)$", re.IGNORECASE)


def _norm_device(d: Any) -> str:
    if isinstance(d, int) and not isinstance(d, bool):
        if d < 0:
            raise ValueError(f"GPUMemoryTracker: GPU id {d} is negative")
        return f"GPU:{d}"
    if isinstance(d, str):
        m = _DEV_RE.match(d.strip())
        if m:
            return f"{m.group(1).upper()}:{m.group(2)}"
    raise ValueError(f"GPUMemoryTracker: cannot understand device {d!r}; use a GPU id (0) or a name like '/gpu:0'")


class GPUMemoryTracker(Callback):
    """Track the peak memory used on each GPU during every epoch, put to the monitors as
    ``PeakMemory(MB)/{device}``; from ``tf.config.experimental.get_memory_info``, reset before
    each epoch. Where a device does not exist (no GPU), it warns once and does not track it;
    with none left, it disables itself.

    :param devices: a GPU id or name, or a list of them (``0``, ``'/gpu:1'``; ``'/cpu:0'`` tracks
        the host allocator the same way).
    """

    def __init__(self, devices: int | str | Sequence[int | str] = 0) -> None:
        if not isinstance(devices, (list, tuple)):
            devices = [devices]
        if not devices:
            raise ValueError("GPUMemoryTracker: devices is empty; give a GPU id or a list of them")
        self._devices = [_norm_device(d) for d in devices]
        self._active: list[str] = []
        self._peaks: dict[str, float] = {}

    @property
    def enabled(self) -> bool:
        return bool(self._active)

    def _before_train(self) -> None:
        import tensorflow as tf

        existing = {f"{d.device_type}:{d.name.rsplit(':', 1)[-1]}" for d in tf.config.list_logical_devices()}
        missing = [d for d in self._devices if d not in existing]
        self._active = [d for d in self._devices if d in existing]
        if missing:
            logger.warning(f"GPUMemoryTracker: device(s) {missing} do not exist on this host "
                           f"({sorted(existing)}); {'not tracking them' if self._active else 'disabled'}.")

    def _before_epoch(self) -> None:
        import tensorflow as tf

        for d in self._active:
            try:
                tf.config.experimental.reset_memory_stats(d)
            except (ValueError, RuntimeError):  # allocator without stats: the peak stays process-wide
                pass

    def _after_epoch(self) -> None:
        import tensorflow as tf

        self._peaks = {}
        for d in self._active:
            try:
                self._peaks[d] = tf.config.experimental.get_memory_info(d)["peak"] / 1e6
            except (ValueError, RuntimeError) as e:
                logger.warning(f"GPUMemoryTracker: cannot read the memory of {d} ({e}); not tracking it")
                self._active.remove(d)

    def _trigger_epoch(self) -> None:
        for d, mb in self._peaks.items():
            self.trainer.monitors.put_scalar(f"PeakMemory(MB)/{d.lower()}", float(mb))


class HostMemoryTracker(Callback):
    """When triggered, put the free (available) host RAM to the monitors as
    ``HostFreeMemory (GB)`` (psutil's ``virtual_memory().available`` in GiB)."""

    def _trigger(self) -> None:
        import psutil

        self.trainer.monitors.put_scalar("HostFreeMemory (GB)", psutil.virtual_memory().available / 1024 ** 3)


class ThroughputTracker(Callback):
    """Put the training throughput to the monitors every time it is triggered, computed
    over the time since the previous trigger, without the time spent in callbacks between
    epochs: ``Throughput (steps/sec)``, or ``Throughput (samples/sec)`` when
    ``samples_per_step`` is given.

    :param samples_per_step: the total batch size of one step; None for steps/sec.
    """

    def __init__(self, samples_per_step: int | None = None) -> None:
        if samples_per_step is not None and (isinstance(samples_per_step, bool) or not isinstance(samples_per_step, int)
                                             or samples_per_step <= 0):
            raise ValueError(f"ThroughputTracker: samples_per_step must be a positive int or None, "
                             f"got {samples_per_step!r}")
        self._samples_per_step = samples_per_step
        self._running = False
        self._elapsed = 0.0
        self._since = 0.0
        self._last_step = 0

    def _clock(self) -> float:
        return self._elapsed + (time.perf_counter() - self._since if self._running else 0.0)

    def _reset(self) -> None:
        self._elapsed = 0.0
        self._since = time.perf_counter()
        self._last_step = self.global_step

    def _before_train(self) -> None:
        self._running = False
        self._reset()

    def _before_epoch(self) -> None:
        self._since = time.perf_counter()
        self._running = True

    def _after_epoch(self) -> None:
        self._elapsed = self._clock()
        self._running = False

    def _trigger(self) -> None:
        steps = self.global_step - self._last_step
        secs = self._clock()
        if steps > 0 and secs > 0:
            if self._samples_per_step is None:
                self.trainer.monitors.put_scalar("Throughput (steps/sec)", steps / secs)
            else:
                self.trainer.monitors.put_scalar("Throughput (samples/sec)", steps * self._samples_per_step / secs)
        self._reset()
