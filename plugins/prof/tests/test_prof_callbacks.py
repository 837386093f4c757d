"""GPUUtilizationTracker, GraphProfiler, GPUMemoryTracker, HostMemoryTracker, ThroughputTracker."""

from __future__ import annotations

import glob
import json
import os
import queue
import sys
import textwrap
import threading
import time

import psutil
import pytest
import tensorflow as tf

import trainbus
from trainbus.callbacks import Callback
from trainbus.testing import RecordingMonitor, train_tiny

cbs = trainbus.callbacks
HAS_GPU = bool(tf.config.list_physical_devices("GPU"))


def gpu(fn):
    """A GPU-only test (each has a CPU counterpart in this file)."""
    return pytest.mark.gpu(pytest.mark.skipif(not HAS_GPU, reason="needs a GPU")(fn))


class SleepPerStep(Callback):
    def __init__(self, secs):
        self.secs = secs

    def _trigger_step(self):
        time.sleep(self.secs)


# ------------------------------------------------------------------------ GPUUtilizationTracker
class ListSampler:
    """Returns the next row of ``rows`` per call and records what it returned."""

    def __init__(self, rows):
        self.rows = list(rows)
        self.returned = []

    def __call__(self, devices):
        row = self.rows[min(len(self.returned), len(self.rows) - 1)]
        self.returned.append(row)
        return row


def test_gpu_util_worker_averages_per_epoch():
    sampler = ListSampler([[10, 50], [20, 60], [30, 70], [40, 80], [50, 90], [60, 100]] * 20)
    evt, stop_evt, q = threading.Event(), threading.Event(), queue.Queue()
    worker = threading.Thread(target=cbs.GPUUtilizationTracker.worker, args=(evt, q, stop_evt, [0, 1]),
                              kwargs={"sampler": sampler, "interval": 0.01})
    worker.start()
    results = []
    for _ in range(2):  # two "epochs"
        start = len(sampler.returned)
        evt.set()
        time.sleep(0.08)
        evt.set()
        kind, stats = q.get(timeout=10)
        rows = sampler.returned[start:]
        assert kind == "stats" and len(rows) >= 2
        assert stats == pytest.approx([sum(r[0] for r in rows) / len(rows), sum(r[1] for r in rows) / len(rows)])
        results.append(stats)
        time.sleep(0.05)
        assert len(sampler.returned) == start + len(rows)  # no sampling between epochs
    stop_evt.set()
    evt.set()
    worker.join(5)
    assert not worker.is_alive()


def test_gpu_util_worker_reports_sampler_errors():
    def broken(devices):
        raise OSError("device lost")

    evt, stop_evt, q = threading.Event(), threading.Event(), queue.Queue()
    t = threading.Thread(target=cbs.GPUUtilizationTracker.worker, args=(evt, q, stop_evt, [0]),
                         kwargs={"sampler": broken, "interval": 0.01})
    t.start()
    evt.set()
    assert q.get(timeout=10) == ("error", "OSError: device lost")
    t.join(5)
    assert not t.is_alive()


@pytest.mark.skipif(HAS_GPU, reason="checks the behaviour where there is no GPU")
def test_gpu_util_tracker_disables_itself_without_nvml(logdir, tb_log):
    mon = RecordingMonitor()
    tracker = cbs.GPUUtilizationTracker()
    before = {c.pid for c in psutil.Process().children()}
    train_tiny(callbacks=[tracker], monitors=[mon], max_epoch=3)
    assert not tracker.enabled
    warnings = [r.getMessage() for r in tb_log if "GPUUtilizationTracker is disabled" in r.getMessage()]
    assert len(warnings) == 1
    assert "NVML" in warnings[0] or "pynvml" in warnings[0] or "no GPU" in warnings[0]
    assert not [n for n, _, _ in mon.scalars if n.startswith("GPUUtil")]
    assert {c.pid for c in psutil.Process().children()} == before  # no sampling process


SAMPLER_MODULE = textwrap.dedent("""
    class ConstSampler:
        def __init__(self, values):
            self.values = values

        def __call__(self, devices):
            return [self.values[d] for d in devices]
""")


def test_gpu_util_tracker_with_sampler_in_training(logdir, tmp_path, monkeypatch):
    # the sampling process (spawn) imports the sampler from a module on sys.path
    (tmp_path / "fake_gpu_sampler.py").write_text(SAMPLER_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    from fake_gpu_sampler import ConstSampler

    mon = RecordingMonitor()
    tracker = cbs.GPUUtilizationTracker([1, 3], sampler=ConstSampler({1: 40.0, 3: 80.0}), interval_secs=0.05)
    train_tiny(callbacks=[SleepPerStep(0.01), tracker], monitors=[mon], max_epoch=2)
    got = {}
    for n, v, step in mon.scalars:
        got.setdefault(n, []).append((step, v))
    assert got["GPUUtil/1"] == [(8, 40.0), (16, 40.0)]
    assert got["GPUUtil/3"] == [(8, 80.0), (16, 80.0)]
    assert got["GPUUtil/mean"] == [(8, 60.0), (16, 60.0)]
    assert tracker._proc is None and not tracker.enabled  # process stopped after training
    assert not [c for c in psutil.Process().children() if c.name().startswith("python") and c.status() != "zombie"
                and "GPUUtilizationTracker" in " ".join(c.cmdline())]


@gpu
def test_gpu_util_tracker_on_gpu(logdir):
    mon = RecordingMonitor()
    train_tiny(callbacks=[cbs.GPUUtilizationTracker()], monitors=[mon], max_epoch=2)
    vals = [v for n, v, _ in mon.scalars if n.startswith("GPUUtil/")]
    assert vals and all(0 <= v <= 100 for v in vals)


def test_gpu_util_tracker_validation():
    with pytest.raises(ValueError, match="devices"):
        cbs.GPUUtilizationTracker(["gpu0"])
    with pytest.raises(ValueError, match="interval_secs"):
        cbs.GPUUtilizationTracker(interval_secs=0)


# ------------------------------------------------------------------------ GraphProfiler
def test_graph_profiler_writes_traces_metadata_and_events(logdir):
    mon = RecordingMonitor()
    prof = cbs.GraphProfiler(dump_metadata=True, dump_tracing=True, dump_event=True)
    train_tiny(callbacks=[cbs.EnableCallbackIf(prof, lambda self: self.trainer.global_step >= 3)], monitors=[mon],
               max_epoch=1)
    traces = sorted(glob.glob(str(logdir / "chrome-trace-*.json")))
    metas = sorted(glob.glob(str(logdir / "runmetadata-*.pb")))
    # enabled from before_run of the step that starts at global_step 3: steps 4..8 after the step
    assert sorted(int(p.rsplit("-", 1)[1].split(".")[0]) for p in traces) == [4, 5, 6, 7, 8]
    assert len(metas) == 5
    for p in traces:
        with open(p) as f:
            data = json.load(f)
        assert isinstance(data["traceEvents"], list) and data["traceEvents"]
        assert any(e.get("ph") == "X" for e in data["traceEvents"])
    meta = tf.compat.v1.RunMetadata.FromString(open(metas[0], "rb").read())
    assert meta.step_stats.dev_stats and any(n.node_name for d in meta.step_stats.dev_stats for n in d.node_stats)
    tags = [e.tagged_run_metadata.tag for e in mon.events]
    assert tags == [f"trace-{s}" for s in range(4, 9)]
    assert all(e.step == s for e, s in zip(mon.events, range(4, 9)))
    assert not glob.glob(str(logdir / "*.tmp*"))


def test_graph_profiler_defaults_and_validation(logdir):
    train_tiny(callbacks=[cbs.GraphProfiler()], max_epoch=1, steps_per_epoch=3)
    assert len(glob.glob(str(logdir / "chrome-trace-*.json"))) == 3
    assert not glob.glob(str(logdir / "runmetadata-*"))
    with pytest.raises(ValueError, match="enable at least one"):
        cbs.GraphProfiler(dump_tracing=False)


# ------------------------------------------------------------------------ GPUMemoryTracker
@pytest.mark.skipif(HAS_GPU, reason="checks the behaviour where there is no GPU")
def test_gpu_memory_tracker_disables_itself_without_gpu(logdir, tb_log):
    mon = RecordingMonitor()
    tracker = cbs.GPUMemoryTracker()
    train_tiny(callbacks=[tracker], monitors=[mon], max_epoch=2)
    assert not tracker.enabled
    assert sum("GPUMemoryTracker" in r.getMessage() and "disabled" in r.getMessage() for r in tb_log) == 1
    assert not [n for n, _, _ in mon.scalars if n.startswith("PeakMemory")]


_CPU_TRACKER_RUN = """
import json, sys
import tensorflow as tf
import trainbus, trainbus.testing
from trainbus.testing import RecordingMonitor, train_tiny
from trainbus.utils import logger
import trainbus_prof as cbs


class Big(trainbus.testing.TinyModel):
    # a 1 MB tensor TensorFlow allocates itself each step: the CPU allocator's stats leave out
    # allocations under 256 KB, and a fed batch may be used in numpy's own memory (the peak read
    # 0 in about one run in three with the 512 KB batch alone)
    def build_graph(self, x, y):
        return super().build_graph(tf.tile(x, [1, 2])[:, :self.dim], y)


logger.set_logger_dir(sys.argv[1], action="k")
mon = RecordingMonitor()
train_tiny(callbacks=[cbs.GPUMemoryTracker(devices=["/cpu:0"])], monitors=[mon], max_epoch=2,
           model=Big(dim=1024), dataflow=trainbus.testing.tiny_dataflow(n=1024, batch=128, dim=1024))
print(json.dumps([(s, v) for n, v, s in mon.scalars if n == "PeakMemory(MB)/cpu:0"]))
"""


def test_gpu_memory_tracker_cpu_counterpart(tmp_path):
    # in a process of its own (forked from the worker's zygote, tests/_support/zygote.py): the
    # allocator's statistics are process-wide
    import zygote

    r = zygote.run([sys.executable, "-c", _CPU_TRACKER_RUN, str(tmp_path / "log")], timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    peaks = json.loads(r.stdout.strip().splitlines()[-1])
    assert [s for s, _ in peaks] == [8, 16]
    assert all(v > 0 for _, v in peaks), peaks
    assert all(v < psutil.virtual_memory().total / 1e6 for _, v in peaks)


@gpu
def test_gpu_memory_tracker_on_gpu(logdir):
    mon = RecordingMonitor()
    train_tiny(callbacks=[cbs.GPUMemoryTracker(0)], monitors=[mon], max_epoch=1)
    assert [n for n, _, _ in mon.scalars] == ["PeakMemory(MB)/gpu:0"]


def test_gpu_memory_tracker_validation():
    with pytest.raises(ValueError, match="cannot understand device"):
        cbs.GPUMemoryTracker("tpu")
    with pytest.raises(ValueError, match="empty"):
        cbs.GPUMemoryTracker([])


# ------------------------------------------------------------------------ Host memory, throughput
def test_host_memory_tracker(logdir):
    mon = RecordingMonitor()
    train_tiny(callbacks=[cbs.HostMemoryTracker()], monitors=[mon], max_epoch=2)
    vals = [v for n, v, _ in mon.scalars if n == "HostFreeMemory (GB)"]
    assert len(vals) == 2
    now = psutil.virtual_memory()
    assert all(0 < v <= now.total / 1024 ** 3 for v in vals)
    assert vals[-1] == pytest.approx(now.available / 1024 ** 3, rel=0.5)


class EpochClock(Callback):
    def __init__(self):
        self.durations = []

    def _before_epoch(self):
        self._t = time.perf_counter()

    def _after_epoch(self):
        self.durations.append(time.perf_counter() - self._t)


class SlowTrigger(Callback):
    def _trigger(self):
        time.sleep(0.6)


@pytest.mark.parametrize("samples", [None, 4])
def test_throughput_tracker_excludes_callback_time(logdir, samples):
    mon = RecordingMonitor()
    clock = EpochClock()
    train_tiny(callbacks=[clock, SleepPerStep(0.02), cbs.ThroughputTracker(samples), SlowTrigger()], monitors=[mon],
               max_epoch=3)
    name = "Throughput (steps/sec)" if samples is None else "Throughput (samples/sec)"
    vals = [v for n, v, _ in mon.scalars if n == name]
    assert len(vals) == 3
    per = 1 if samples is None else samples
    for v, d in zip(vals, clock.durations):
        expected = 8 * per / d
        assert v == pytest.approx(expected, rel=0.25)
        assert v > 2 * (8 * per / (d + 0.6))  # the 0.6 s slow trigger is not counted


def test_throughput_tracker_with_periodic_trigger(logdir):
    mon = RecordingMonitor()
    train_tiny(callbacks=[SleepPerStep(0.02), cbs.PeriodicTrigger(cbs.ThroughputTracker(), every_k_steps=4)],
               monitors=[mon], max_epoch=1)
    vals = [(s, v) for n, v, s in mon.scalars if n == "Throughput (steps/sec)"]
    assert [s for s, _ in vals] == [4, 8]
    assert all(10 < v < 60 for _, v in vals)  # ~ 1 / 20 ms = 50 steps/sec at most
    with pytest.raises(ValueError, match="samples_per_step"):
        cbs.ThroughputTracker(0)
