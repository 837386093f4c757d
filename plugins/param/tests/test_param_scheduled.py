"""trainbus-param: ScheduledHyperParamSetter in real training runs (epoch and step schedules)."""

from __future__ import annotations

import pytest

import trainbus
import trainbus.callbacks as C
from trainbus.testing import train_tiny

STEPS = 8  # tiny_dataflow(): 32 samples in batches of 4
DEFAULT_LR = 0.1  # TinyModel's initial learning rate


class LRPerEpoch(C.Callback):
    """Records the learning rate in effect during each epoch (read in before_epoch)."""

    def __init__(self) -> None:
        self.values: dict[int, float] = {}

    def _setup_graph(self):
        self.var = self.get_tensors_maybe_in_tower(["learning_rate"])[0]

    def _before_epoch(self):
        self.values[self.epoch_num] = float(self.trainer.sess.run(self.var))


class LRPerStep(C.Callback):
    """Records the learning rate each step runs with (fetched in the step's Session.run)."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def _setup_graph(self):
        self.var = self.get_tensors_maybe_in_tower(["learning_rate"])[0]

    def _before_run(self, ctx):
        return [self.var]

    def _after_run(self, ctx, rv):
        self.values.append(float(rv.results[0]))


def _approx(d):
    return {k: pytest.approx(v, rel=1e-6) for k, v in d.items()}


def test_scheduled_epoch_based(logdir):
    lr = LRPerEpoch()
    tr = train_tiny(callbacks=[C.ScheduledHyperParamSetter("learning_rate", [(0, 0.5), (2, 0.2), (3, 0.05)]), lr],
                    max_epoch=4)
    assert lr.values == _approx({1: 0.5, 2: 0.5, 3: 0.2, 4: 0.05})
    # every value set is also put to the monitors, at the global step it was set
    assert tr.monitors.get_history("learning_rate") == [(0, 0.5), (2 * STEPS, 0.2), (3 * STEPS, 0.05)]


def test_scheduled_linear_interpolation_without_extrapolation(logdir):
    lr = LRPerEpoch()
    sched = [(1, 0.4), (3, 0.1)]
    tr = train_tiny(callbacks=[C.ScheduledHyperParamSetter("learning_rate", sched, interp="linear"), lr], max_epoch=5)

    def formula(e):  # value set after epoch e
        (e0, v0), (e1, v1) = sched
        return v0 + (e - e0) * (v1 - v0) / (e1 - e0)

    # nothing before the first point (epoch 1 keeps the initial value), nothing after the last
    assert lr.values == _approx({1: DEFAULT_LR, 2: formula(1), 3: formula(2), 4: formula(3), 5: formula(3)})
    assert [s for s, _ in tr.monitors.get_history("learning_rate")] == [STEPS, 2 * STEPS, 3 * STEPS]


@pytest.mark.parametrize("set_at_beginning, expected", [(True, 0.3), (False, DEFAULT_LR)])
def test_scheduled_set_at_beginning_when_resuming(logdir, set_at_beginning, expected):
    lr = LRPerEpoch()
    train_tiny(callbacks=[C.ScheduledHyperParamSetter("learning_rate", [(0, 0.5), (1, 0.3), (5, 0.01)],
                                                      set_at_beginning=set_at_beginning), lr],
               starting_epoch=3, max_epoch=3)
    assert lr.values == _approx({3: expected})


def test_scheduled_step_based(logdir):
    lr = LRPerStep()
    tr = train_tiny(callbacks=[C.ScheduledHyperParamSetter("learning_rate", [(0, 0.5), (5, 0.2), (10, 0.05)],
                                                           step_based=True), lr], max_epoch=2)
    # set after step 5 completes: step 6 runs with it
    assert lr.values == pytest.approx([0.5] * 5 + [0.2] * 5 + [0.05] * 6, rel=1e-6)
    assert tr.monitors.get_history("learning_rate") == [(0, 0.5), (5, 0.2), (10, 0.05)]
    assert "ScheduledHyperParamSetter" not in [l for l in tr.describe_hooks().splitlines()
                                               if l.startswith("trigger_epoch")][0]


def test_scheduled_step_based_linear(logdir):
    lr = LRPerStep()
    train_tiny(callbacks=[C.ScheduledHyperParamSetter("learning_rate", [(2, 1.0), (6, 0.2)], interp="linear",
                                                      step_based=True), lr], max_epoch=1)
    # step k + 1 runs with the value set after step k
    expected = [DEFAULT_LR, DEFAULT_LR] + [1.0 + (s - 2) * (0.2 - 1.0) / 4 for s in (2, 3, 4, 5, 6)] + [0.2]
    assert lr.values == pytest.approx(expected, rel=1e-6)


def test_scheduled_epoch_based_is_not_a_per_step_callback(logdir):
    tr = train_tiny(callbacks=[C.ScheduledHyperParamSetter("learning_rate", [(1, 0.2)])], max_epoch=1)
    assert tr._bus.trigger_step is None


@pytest.mark.parametrize("kwargs, match", [
    (dict(schedule=[(2, 0.1), (1, 0.2)]), "strictly increasing"),
    (dict(schedule=[(1, 0.1), (1, 0.2)]), "strictly increasing"),
    (dict(schedule=[(1, 0.1)], interp="cubic"), "interp"),
    (dict(schedule=[]), "empty"),
    (dict(schedule=[(-1, 0.1)]), ">= 0"),
    (dict(schedule=[(1.5, 0.1)]), "integer"),
    (dict(schedule=[(1, "fast")]), "numeric"),
    (dict(schedule=[1, 2]), "pair"),
])
def test_scheduled_rejects_bad_schedules_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        C.ScheduledHyperParamSetter("learning_rate", **kwargs)
