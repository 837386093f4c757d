"""The monitor hub (``trainer.monitors``) with and without backends, ``DEFAULT_MONITORS()``, and
chief-only writing, through real training runs."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import trainbus.callbacks
from trainbus.callbacks import Callback
from trainbus.testing import RecordingMonitor, train_tiny

BACKENDS = ("TFEventWriter", "JSONWriter", "ScalarPrinter", "SendMonitorData", "CometMLMonitor", "CSVWriter",
            "MLflowMonitor", "WandbMonitor")


class PutAll(Callback):
    def _trigger_step(self):
        self.trainer.monitors.put_scalar("step_metric", np.float32(self.trainer.global_step) / 2)

    def _trigger(self):
        import tensorflow as tf

        m = self.trainer.monitors
        m.put_scalar("epoch_metric", np.int64(self.trainer.epoch_num))
        s = tf.compat.v1.Summary()
        s.value.add(tag="tower0/summed-summary", simple_value=3.5)
        m.put_summary(s.SerializeToString())
        m.put_image("img", np.zeros((2, 3), dtype=np.uint8))
        m.put_event(tf.compat.v1.Event(file_version="custom"))


def test_default_monitors_are_tfevents_json_printer_in_that_order(logdir):
    from trainbus.train import DEFAULT_MONITORS

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # all three installed: no "missing" warning
        monitors = DEFAULT_MONITORS()
    assert [type(m).__name__ for m in monitors] == ["TFEventWriter", "JSONWriter", "ScalarPrinter"]
    assert [type(m).__module__ for m in monitors] == [
        "trainbus_monitor_tfevents", "trainbus_monitor_json", "trainbus_monitor_stdout"]
    assert monitors is not DEFAULT_MONITORS()  # new instances every call
    # the defaults cost nothing per step
    tr = train_tiny(callbacks=[PutAll()], monitors=monitors, max_epoch=1, steps_per_epoch=2)
    hooks = dict(line.split(": ", 1) for line in tr.describe_hooks().splitlines())
    for per_step in ("before_run", "after_run", "trigger_step"):
        assert "Writer" not in hooks[per_step] and "Printer" not in hooks[per_step], hooks[per_step]
    assert hooks["process_scalar"].index("JSONWriter") < hooks["process_scalar"].index("ScalarPrinter")
    assert "TFEventWriter" in hooks["process_summary"] and "JSONWriter" not in hooks["process_summary"]
    assert sorted(os.listdir(logdir))[0].startswith("events.out.tfevents.")
    assert (logdir / "stats.json").exists()


def test_history_and_latest_without_any_backend():
    tr = train_tiny(callbacks=[PutAll()], monitors=[], max_epoch=2, steps_per_epoch=2)
    m = tr.monitors
    assert m.get_history("step_metric") == [(1, 0.5), (2, 1.0), (3, 1.5), (4, 2.0)]
    assert m.get_history("epoch_metric") == [(2, 1), (4, 2)]
    assert isinstance(m.get_latest("epoch_metric"), int)
    # simple values of put_summary lose tower prefixes and the -summary suffix
    assert m.get_history("summed") == [(2, 3.5), (4, 3.5)]
    with pytest.raises(KeyError, match="no scalar named 'nope'.*known: epoch_metric, step_metric, summed"):
        m.get_latest("nope")


def test_put_calls_reach_every_backend_in_order(logdir):
    first, second = RecordingMonitor(), RecordingMonitor()
    tr = train_tiny(callbacks=[PutAll()], monitors=[first, trainbus.callbacks.JSONWriter(), second],
                    max_epoch=1, steps_per_epoch=2)
    for rec in (first, second):
        assert [(n, v) for n, v, _ in rec.scalars] == [
            ("step_metric", 0.5), ("step_metric", 1.0), ("epoch_metric", 1), ("summed", 3.5)]
        assert [(n, v.shape) for n, v in rec.images] == [("img", (1, 2, 3, 1))]
        assert len(rec.events) == 1 and rec.events[0].step == 2 and rec.events[0].wall_time > 0
        tags = [v.tag for s in rec.summaries for v in s.value]
        assert tags == ["step_metric", "step_metric", "epoch_metric", "summed", "img"]
    assert tr.monitors.monitors[1].enabled


@pytest.mark.parametrize("name", BACKENDS)
def test_every_backend_is_chief_only_by_default(name):
    cls = getattr(trainbus.callbacks, name)
    assert issubclass(cls, trainbus.callbacks.MonitorBase)
    assert cls._chief_only is True


def test_a_non_chief_trainer_writes_no_file(logdir):
    from trainbus.train import SimpleTrainer

    tr = SimpleTrainer()
    tr.is_chief = False
    monitors = [trainbus.callbacks.TFEventWriter(), trainbus.callbacks.JSONWriter(), trainbus.callbacks.CSVWriter(),
                trainbus.callbacks.ScalarPrinter(), trainbus.callbacks.SendMonitorData(f"touch {logdir}/sent-{{epoch_metric}}",
                                                                                     "epoch_metric")]
    # the callback that puts stats runs on every worker; the monitors only on the chief
    train_tiny(callbacks=[PutAll().set_chief_only(False)], monitors=monitors, trainer=tr, max_epoch=2,
               steps_per_epoch=2)
    assert sorted(os.listdir(logdir)) == ["log.log"]
    assert "epoch_metric: " not in (logdir / "log.log").read_text()  # ScalarPrinter did not print
    assert tr.monitors.get_latest("epoch_metric") == 2  # the hub itself still records


def test_chief_writes_the_same_files(logdir):
    monitors = [trainbus.callbacks.TFEventWriter(), trainbus.callbacks.JSONWriter(), trainbus.callbacks.CSVWriter()]
    train_tiny(callbacks=[PutAll()], monitors=monitors, max_epoch=2, steps_per_epoch=2)
    names = sorted(os.listdir(logdir))
    assert "stats.json" in names and "stats.csv" in names and any(n.startswith("events.out") for n in names)
