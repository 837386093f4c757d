"""ScheduledHyperParamSetter(interp='linear') away from the midpoint: the value at each point is
measured from the earlier scheduled point (where a formula measured from the wrong end differs)."""

from __future__ import annotations

import pytest

import trainbus.callbacks as C
from trainbus.testing import train_tiny

from statcbs import LRPerEpoch

DEFAULT_LR = 0.1  # TinyModel's initial learning rate


def test_linear_interpolation_at_quarter_points_and_in_every_segment(logdir):
    lr = LRPerEpoch()
    # decreasing over 4 epochs, then increasing over 2: the value set after epoch e is used in e + 1
    sched = [(1, 1.0), (5, 0.2), (7, 0.5)]
    train_tiny(callbacks=[C.ScheduledHyperParamSetter("learning_rate", sched, interp="linear"), lr], max_epoch=9)
    expected = {1: DEFAULT_LR, 2: 1.0, 3: 0.8, 4: 0.6, 5: 0.4, 6: 0.2, 7: 0.35, 8: 0.5, 9: 0.5}
    assert lr.values == {k: pytest.approx(v, rel=1e-6) for k, v in expected.items()}


def test_linear_step_based_one_step_after_a_point(logdir):
    lr = []

    class PerStep(C.Callback):
        def _setup_graph(self):
            self.var = self.get_tensors_maybe_in_tower(["learning_rate"])[0]

        def _before_run(self, ctx):
            return [self.var]

        def _after_run(self, ctx, rv):
            lr.append(float(rv.results[0]))

    train_tiny(callbacks=[C.ScheduledHyperParamSetter("learning_rate", [(0, 0.0), (10, 1.0)], interp="linear",
                                                      step_based=True), PerStep()], max_epoch=2)
    # step k + 1 runs with the value set after step k: 0.0, 0.1, ..., 1.0, then 1.0
    assert lr == pytest.approx([k / 10 for k in range(11)] + [1.0] * 5, abs=1e-6)
