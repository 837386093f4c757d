"""trainbus-summary: MovingAverageSummary, MergeAllSummaries, SimpleMovingAverage in real training runs."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import trainbus
import trainbus.callbacks as C
from trainbus.testing import RecordingMonitor, train_tiny

STEPS = 8  # tiny_dataflow(): 32 samples in batches of 4


class RecordCost(C.Callback):
    """Fetches ``cost`` with every step (same Session.run) and records (global_step, value)."""

    def __init__(self) -> None:
        self.values: list[tuple[int, float]] = []

    def _setup_graph(self) -> None:
        self._t = self.get_tensors_maybe_in_tower(["cost"])[0]

    def _before_run(self, ctx):
        return [self._t]

    def _after_run(self, ctx, rv):
        self.values.append((self.global_step, float(rv.results[0])))


def _ema(xs, decay=0.95):
    """Zero-debiased EMA after each value."""
    biased, out = 0.0, []
    for t, x in enumerate(xs, 1):
        biased = decay * biased + (1 - decay) * x
        out.append(biased / (1 - decay ** t))
    return out


def test_moving_average_summary_keeps_the_ema_of_cost(logdir):
    rec = RecordCost()
    tr = train_tiny(callbacks=[rec, C.MovingAverageSummary(), C.MergeAllSummaries()], max_epoch=2)
    costs = [v for _, v in rec.values]
    assert len(costs) == 2 * STEPS
    ema = _ema(costs)
    hist = tr.monitors.get_history("cost")
    # MergeAllSummaries writes at the last step of each epoch, the scalar is named after the tensor
    assert [s for s, _ in hist] == [STEPS, 2 * STEPS]
    np.testing.assert_allclose([v for _, v in hist], [ema[STEPS - 1], ema[2 * STEPS - 1]], rtol=1e-5)


def test_moving_average_summary_with_train_op_adds_no_hook(logdir):
    rec = RecordCost()
    mas = C.MovingAverageSummary(train_op="train_op")
    tr = train_tiny(callbacks=[rec, mas, C.MergeAllSummaries()], max_epoch=1)
    # the EMA ops run as control dependencies of the training op, not through before_run
    before_run = [line for line in tr.describe_hooks().splitlines() if line.startswith("before_run:")][0]
    assert "MovingAverageSummary" not in before_run
    ema = _ema([v for _, v in rec.values])
    np.testing.assert_allclose(tr.monitors.get_latest("cost"), ema[-1], rtol=1e-5)


def test_moving_average_summary_empty_collection_costs_nothing_per_step(logdir):
    tr = train_tiny(callbacks=[C.MovingAverageSummary(collection="NO_SUCH_COLLECTION")], max_epoch=1)
    assert tr._bus.before_run is None or "MovingAverageSummary" not in tr.describe_hooks().split("after_run")[0]


def test_without_moving_average_summary_the_ema_is_only_updated_when_summarized(logdir):
    rec = RecordCost()
    tr = train_tiny(callbacks=[rec, C.MergeAllSummaries()], max_epoch=1)
    # the summary op evaluates the EMA update once, at the last step: the debiased EMA of one value
    np.testing.assert_allclose(tr.monitors.get_latest("cost"), rec.values[-1][1], rtol=1e-5)


def test_merge_all_summaries_period(logdir):
    mon = RecordingMonitor()
    tr = train_tiny(callbacks=[C.MovingAverageSummary(), C.MergeAllSummaries(period=3)], monitors=[mon], max_epoch=2)
    steps = [s for s, _ in tr.monitors.get_history("cost")]
    # every 3 steps within an epoch (local_step 2, 5) plus the last step of the epoch (local_step 7)
    assert steps == [3, 6, 8, 11, 14, 16]
    assert len(mon.summaries) == 6
    assert [s for name, _, s in mon.scalars if name == "cost"] == steps


def test_merge_all_summaries_run_alone_with_key(logdir):
    import tensorflow as tf

    class AddWeightSummary(C.Callback):
        def _setup_graph(self):
            w = self.get_tensors_maybe_in_tower(["W"])[0]
            with tf.compat.v1.name_scope(None):  # callbacks build under their own name scope
                tf.compat.v1.summary.scalar("wsum", tf.reduce_sum(w), collections=["MY_SUMMARIES"])

    class ReadW(C.Callback):
        def __init__(self):
            self.sums = []

        def _setup_graph(self):
            self._w = self.get_tensors_maybe_in_tower(["W"])[0]

        def _trigger(self):
            self.sums.append(float(self.trainer.sess.run(self._w).sum()))

    reader = ReadW()
    merge = C.MergeAllSummaries(run_alone=True, key="MY_SUMMARIES")
    assert type(merge).__name__ == "MergeAllSummaries_RunAlone"
    tr = train_tiny(callbacks=[AddWeightSummary(), merge, reader], max_epoch=2)
    hist = tr.monitors.get_history("wsum")
    assert [s for s, _ in hist] == [STEPS, 2 * STEPS]
    np.testing.assert_allclose([v for _, v in hist], reader.sums, rtol=1e-6)
    # run_alone with period 0 has no per-step hook
    assert "MergeAllSummaries" not in [l for l in tr.describe_hooks().splitlines() if l.startswith("trigger_step")][0]


def test_merge_all_summaries_run_alone_period_counts_steps(logdir):
    import tensorflow as tf

    class AddConstSummary(C.Callback):
        def _setup_graph(self):
            with tf.compat.v1.name_scope(None):
                tf.compat.v1.summary.scalar("fixedval", tf.constant(2.5), collections=["CONST"])

    tr = train_tiny(callbacks=[AddConstSummary(), C.MergeAllSummaries(period=4, run_alone=True, key="CONST")], max_epoch=1)
    # every 4 steps (after steps 4 and 8) and after the epoch
    assert tr.monitors.get_history("fixedval") == [(4, 2.5), (8, 2.5), (8, 2.5)]


def test_simple_moving_average(logdir):
    rec = RecordCost()
    tr = train_tiny(callbacks=[rec, C.SimpleMovingAverage("cost", 4)], max_epoch=1)
    costs = [v for _, v in rec.values]
    hist = tr.monitors.get_history("cost/SMA")
    assert [s for s, _ in hist] == [4, 8]
    np.testing.assert_allclose([v for _, v in hist], [np.mean(costs[0:4]), np.mean(costs[4:8])], rtol=1e-6)


def test_default_callbacks_contain_summary_callbacks():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cbs = trainbus.DEFAULT_CALLBACKS()
    names = [type(c).__name__ for c in cbs]
    assert "MovingAverageSummary" in names and "MergeAllSummaries_RunWithOp" in names
    assert names.index("MovingAverageSummary") < names.index("MergeAllSummaries_RunWithOp")


def test_public_paths():
    from trainbus_summary import MergeAllSummaries, MovingAverageSummary, SimpleMovingAverage

    assert trainbus.callbacks.MovingAverageSummary is MovingAverageSummary
    assert trainbus.MergeAllSummaries is MergeAllSummaries
    assert trainbus.callbacks.SimpleMovingAverage is SimpleMovingAverage


@pytest.mark.parametrize("make, err", [
    (lambda: C.MergeAllSummaries(period=-1), ValueError),
    (lambda: C.MergeAllSummaries(period=1.5), ValueError),
    (lambda: C.MergeAllSummaries(key=3), TypeError),
    (lambda: C.SimpleMovingAverage("cost", 0), ValueError),
    (lambda: C.SimpleMovingAverage([], 3), TypeError),
    (lambda: C.MovingAverageSummary(collection=None), TypeError),
    (lambda: C.MovingAverageSummary(train_op=42), TypeError),
])
def test_bad_arguments_fail_at_construction(make, err):
    with pytest.raises(err):
        make()


def test_train_op_name_not_found_is_clear(logdir):
    with pytest.raises(ValueError, match="no_such_op"):
        train_tiny(callbacks=[C.MovingAverageSummary(train_op="no_such_op")], max_epoch=1)
