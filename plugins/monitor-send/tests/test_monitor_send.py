"""SendMonitorData: real shell commands run during real training runs."""

from __future__ import annotations

import pytest

import trainbus.callbacks
from trainbus.callbacks import Callback
from trainbus.testing import train_tiny


class PutStats(Callback):
    """``a`` every step; ``b`` at epoch ends only; ``val-error`` at epoch ends."""

    def _trigger_step(self):
        self.trainer.monitors.put_scalar("a", float(self.trainer.global_step))

    def _trigger(self):
        self.trainer.monitors.put_scalar("b", 10.0 * self.trainer.epoch_num)
        self.trainer.monitors.put_scalar("val-error", 0.25)


def test_command_runs_once_all_names_of_a_step_arrived(logdir, tmp_path):
    out = tmp_path / "sent.txt"
    send = trainbus.callbacks.SendMonitorData(f"echo {{a}} {{b}} {{val-error}} >> {out}", ["a", "b", "val-error"])
    train_tiny(callbacks=[PutStats()], monitors=[send], max_epoch=3, steps_per_epoch=2)
    # a arrives at every step, b only at epoch ends: the command runs at the epochs' last steps
    assert out.read_text().splitlines() == ["2.0 10.0 0.25", "4.0 20.0 0.25", "6.0 30.0 0.25"]


def test_single_name_as_string(logdir, tmp_path):
    out = tmp_path / "a.txt"
    send = trainbus.callbacks.SendMonitorData(f"echo {{a}} >> {out}", "a")
    assert send.names == ["a"]
    train_tiny(callbacks=[PutStats()], monitors=[send], max_epoch=1, steps_per_epoch=3)
    assert out.read_text().splitlines() == ["1.0", "2.0", "3.0"]


def test_failing_command_is_logged_and_training_goes_on(logdir, tmp_path):
    send = trainbus.callbacks.SendMonitorData("exit 3 # {b}", "b")
    tr = train_tiny(callbacks=[PutStats()], monitors=[send], max_epoch=3, steps_per_epoch=1)
    assert tr.epoch_num == 3 and tr.global_step == 3
    log = (logdir / "log.log").read_text()
    assert log.count("SendMonitorData: command 'exit 3 # 30.0' failed with ret=3") == 1
    assert log.count("failed with ret=3") == 3


def test_bad_arguments_are_rejected_at_construction():
    with pytest.raises(ValueError, match=r"placeholder\(s\) \['c'\] are not among names"):
        trainbus.callbacks.SendMonitorData("echo {a} {c}", ["a", "b"])
    with pytest.raises(ValueError, match="not a valid format string"):
        trainbus.callbacks.SendMonitorData("echo {a", "a")
    with pytest.raises(TypeError, match="command"):
        trainbus.callbacks.SendMonitorData("", "a")
    with pytest.raises(TypeError, match="names"):
        trainbus.callbacks.SendMonitorData("echo", [])


def test_conformance():
    from trainbus.testing import check_distribution

    check_distribution("trainbus-monitor-send")
