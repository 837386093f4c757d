"""trainbus-param: ScheduledHyperParamSetter in real training runs (epoch and step schedules)."""

from __future__ import annotations

import pytest

import trainbus
import trainbus.callbacks as C
from trainbus.testing import train_tiny

from statcbs import LRPerEpoch

STEPS = 8  # tiny_dataflow(): 32 samples in batches of 4
DEFAULT_LR = 0.1  # TinyModel's initial learning rate


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
    # every value a trigger sets is also put to the monitors, at the global step it was set; the
    # one set before training is not (no statistics record at step 0, as in tensorpack)
    assert tr.monitors.get_history("learning_rate") == [(2 * STEPS, 0.2), (3 * STEPS, 0.05)]


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
    assert tr.monitors.get_history("learning_rate") == [(5, 0.2), (10, 0.05)]
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


@pytest.fixture()
def tb_messages(tb_log):
    return lambda level: [r.getMessage() for r in tb_log if r.levelname == level]


@pytest.mark.parametrize("set_at_beginning, expected", [(True, 0.05), (False, DEFAULT_LR)])
def test_starting_mid_schedule_with_a_different_value_warns(logdir, tb_messages, set_at_beginning, expected):
    lr = LRPerEpoch()
    setter = C.ScheduledHyperParamSetter("learning_rate", [(1, 0.05), (5, 0.01)], set_at_beginning=set_at_beginning)
    tr = train_tiny(callbacks=[setter, lr], starting_epoch=3, max_epoch=3)
    assert lr.values == _approx({3: expected})
    warnings = [m for m in tb_messages("WARNING") if "by the schedule" in m]
    assert warnings == ["ScheduledHyperParamSetter(learning_rate, schedule=[(1, 0.05), (5, 0.01)]): by the schedule, "
                        "'learning_rate' should be 0.05 at the current point (epoch 2), but its current value is 0.1."]
    if set_at_beginning:
        assert "[HyperParamSetter] Setting 'learning_rate' to 0.05 (set_at_beginning=True)." in tb_messages("INFO")
    else:
        assert any("keeps its current value (set_at_beginning=False)" in m for m in tb_messages("WARNING"))
    assert "learning_rate" not in tr.monitors._history  # set before training: no statistic


@pytest.mark.parametrize("schedule, starting_epoch", [
    ([(1, DEFAULT_LR), (5, 0.01)], 3),  # mid-schedule, the value agrees
    ([(4, 0.05), (5, 0.01)], 3),  # before the first scheduled point: nothing to compare
    ([(0, 0.5), (2, 0.05)], 1),  # a fresh start sets epoch 0's value itself
])
def test_no_warning_when_the_value_agrees(logdir, tb_messages, schedule, starting_epoch):
    train_tiny(callbacks=[C.ScheduledHyperParamSetter("learning_rate", schedule)], starting_epoch=starting_epoch,
               max_epoch=starting_epoch)
    assert [m for m in tb_messages("WARNING") if "by the schedule" in m] == []


def test_interpolated_value_mid_schedule_is_set_without_warning(logdir, tb_messages):
    # starting at epoch 3, the point is epoch 2: between (0, 0.4) and (4, 0.2), the interpolated
    # 0.3 is set by the schedule itself, so the value agrees and nothing is reported
    setter = C.ScheduledHyperParamSetter("learning_rate", [(0, 0.4), (4, 0.2)], interp="linear")
    lr = LRPerEpoch()
    train_tiny(callbacks=[setter, lr], starting_epoch=3, max_epoch=3)
    assert lr.values == _approx({3: 0.3})
    assert [m for m in tb_messages("WARNING") if "by the schedule" in m] == []


@pytest.mark.parametrize("step_based", [False, True], ids=["epoch", "step"])
def test_the_value_set_before_training_is_in_effect_but_puts_no_statistic_at_step_0(logdir, step_based):
    """tensorpack's setter writes no statistics record at step 0: the value scheduled at point 0
    is assigned before the first step (the first epoch runs with it), and nothing is put to the
    monitors before the first step; later values are put where they are set."""
    from trainbus.testing import RecordingMonitor

    lr = LRPerStep()
    mon = RecordingMonitor()
    sched = [(0, 0.5), (STEPS if step_based else 1, 0.2)]
    train_tiny(callbacks=[C.ScheduledHyperParamSetter("learning_rate", sched, step_based=step_based), lr],
               monitors=[mon], max_epoch=2)
    assert lr.values == pytest.approx([0.5] * STEPS + [0.2] * STEPS, rel=1e-6)
    assert mon.scalars and all(step > 0 for _, _, step in mon.scalars)
    assert [(v, step) for name, v, step in mon.scalars if name == "learning_rate"] == [(pytest.approx(0.2), STEPS)]


@pytest.mark.parametrize("schedule, starting_epoch, reads, used", [
    ([(0, 0.5), (2, 0.05)], 1, 0, 0.5),  # the value of this point is set: nothing to read back
    ([(1, 0.5), (5, 0.05)], 3, 1, 0.5),  # between points: the value in effect is read, compared and set
])
def test_the_param_is_read_before_training_only_when_nothing_was_set(logdir, monkeypatch, schedule, starting_epoch,
                                                                    reads, used):
    """Each read of the param is a Session.run of its own before the first step; after setting
    the scheduled value of the starting point there is nothing to compare."""
    from trainbus_param._params import GraphVarParam

    got = []
    real = GraphVarParam.get_value
    monkeypatch.setattr(GraphVarParam, "get_value", lambda self: got.append(1) or real(self))
    lr = LRPerEpoch()
    train_tiny(callbacks=[C.ScheduledHyperParamSetter("learning_rate", schedule), lr], starting_epoch=starting_epoch,
               max_epoch=starting_epoch)
    assert len(got) == reads
    assert lr.values == _approx({starting_epoch: used})


def test_setting_the_param_before_training_leaves_the_global_step_known(logdir, monkeypatch):
    """The setter's assignment of a variable other than the global step is left out of the
    session's count of requests: the trainer still knows the global step without reading it."""
    from trainbus.tfutils import common

    reads = []
    real = common.get_global_step_value
    monkeypatch.setattr(common, "get_global_step_value", lambda: reads.append(1) or real())
    lr = LRPerStep()
    trainer = train_tiny(callbacks=[C.ScheduledHyperParamSetter("learning_rate", [(0, 0.5), (1, 0.2)]), lr],
                         max_epoch=2)
    assert reads == []
    assert lr.values == pytest.approx([0.5] * STEPS + [0.2] * STEPS, rel=1e-6)
    assert trainer.global_step == 2 * STEPS


def test_only_requests_that_touch_nothing_else_are_left_out_of_the_count():
    import tensorflow as tf

    from trainbus_param._params import GraphVarParam

    tf1 = tf.compat.v1
    with tf.Graph().as_default():
        lr = tf1.get_variable("learning_rate", initializer=0.1, trainable=False)
        tf1.train.get_or_create_global_step()
        params = {name: GraphVarParam(name) for name in ("learning_rate", "global_step")}
        for p in params.values():
            p.setup_graph()
        bump = tf1.assign_add(lr, 1.0)
        with tf1.control_dependencies([bump]):  # setting it would run the bump too
            params["under a control dependency"] = GraphVarParam("learning_rate")
            params["under a control dependency"].setup_graph()
    assert {name: p._own_runs for name, p in params.items()} == \
        {"learning_rate": True, "global_step": False, "under a control dependency": False}
