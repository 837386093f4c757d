"""ScalarPrinter: what real training runs print, read back from the run's ``log.log``."""

from __future__ import annotations

import re

import pytest

import trainbus.callbacks
from trainbus.callbacks import Callback
from trainbus.testing import train_tiny

NAMES = ("acc", "cost_a", "val-cost", "step_x")
LINE = re.compile(r"\] (acc|cost_a|val-cost|step_x): (\S+)$")


class PutStats(Callback):
    def _trigger_step(self):
        self.trainer.monitors.put_scalar("step_x", self.trainer.global_step)

    def _trigger(self):
        e = self.trainer.epoch_num
        self.trainer.monitors.put_scalar("val-cost", 1.0 / e)
        self.trainer.monitors.put_scalar("cost_a", 2.0 * e)
        self.trainer.monitors.put_scalar("acc", 0.123456789)


def printed(logdir):
    out = []
    for line in (logdir / "log.log").read_text().splitlines():
        m = LINE.search(line)
        if m:
            out.append((m.group(1), m.group(2)))
    return out


def test_prints_sorted_scalars_every_epoch_and_nothing_per_step(logdir):
    printer = trainbus.callbacks.ScalarPrinter()
    assert "trigger_step" not in printer.hooks_used()  # nothing to do per step: not called per step
    train_tiny(callbacks=[PutStats()], monitors=[printer], max_epoch=2, steps_per_epoch=3)
    assert printed(logdir) == [
        ("acc", "0.12346"), ("cost_a", "2"), ("step_x", "3"), ("val-cost", "1"),
        ("acc", "0.12346"), ("cost_a", "4"), ("step_x", "6"), ("val-cost", "0.5"),
    ]


def test_whitelist_and_blacklist_use_regex_search(logdir):
    # "cost" is found inside both "cost_a" and "val-cost" (re.search, as tensorpack); "^val" drops one
    printer = trainbus.callbacks.ScalarPrinter(whitelist=["cost", "^acc$"], blacklist=["^val"])
    train_tiny(callbacks=[PutStats()], monitors=[printer], max_epoch=1, steps_per_epoch=2)
    assert printed(logdir) == [("acc", "0.12346"), ("cost_a", "2")]


def test_anchored_whitelist_matches_whole_names_only(logdir):
    printer = trainbus.callbacks.ScalarPrinter(whitelist=[r"^cost$", r"^val-cost$"])
    train_tiny(callbacks=[PutStats()], monitors=[printer], max_epoch=1, steps_per_epoch=2)
    assert printed(logdir) == [("val-cost", "1")]


def test_enable_step_prints_between_steps_and_the_last_step_with_the_epoch(logdir):
    printer = trainbus.callbacks.ScalarPrinter(enable_step=True, whitelist=["step_x", "acc"])
    assert "trigger_step" in printer.hooks_used()
    train_tiny(callbacks=[PutStats()], monitors=[printer], max_epoch=2, steps_per_epoch=3)
    assert printed(logdir) == [
        ("step_x", "1"), ("step_x", "2"), ("acc", "0.12346"), ("step_x", "3"),
        ("step_x", "4"), ("step_x", "5"), ("acc", "0.12346"), ("step_x", "6"),
    ]


def test_step_only(logdir):
    printer = trainbus.callbacks.ScalarPrinter(enable_step=True, enable_epoch=False, whitelist=["step_x"])
    assert "trigger_epoch" not in printer.hooks_used()
    train_tiny(callbacks=[PutStats()], monitors=[printer], max_epoch=1, steps_per_epoch=3)
    assert printed(logdir) == [("step_x", "1"), ("step_x", "2"), ("step_x", "3")]


def test_invalid_filters_are_rejected_at_construction():
    with pytest.raises(ValueError, match=r"whitelist.*'\(cost'.*not a valid regular expression"):
        trainbus.callbacks.ScalarPrinter(whitelist=["(cost"])
    with pytest.raises(ValueError, match=r"blacklist.*'\[x'"):
        trainbus.callbacks.ScalarPrinter(blacklist=["ok", "[x"])
    with pytest.raises(TypeError, match=r"wrap it in a list"):
        trainbus.callbacks.ScalarPrinter(whitelist="cost")
    with pytest.raises(TypeError, match="not a regular expression"):
        trainbus.callbacks.ScalarPrinter(blacklist=[3])


def test_conformance():
    from trainbus.testing import check_distribution

    check_distribution("trainbus-monitor-stdout")
