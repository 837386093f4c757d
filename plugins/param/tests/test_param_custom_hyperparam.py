"""HyperParam is abstract (get_value/set_value): an incomplete subclass fails at construction,
a complete one is driven by a setter in a real training run."""

from __future__ import annotations

import pytest

import trainbus.callbacks as cbs
from trainbus.testing import RecordingMonitor, train_tiny


def test_hyperparam_is_abstract():
    with pytest.raises(TypeError, match="abstract"):
        cbs.HyperParam()

    class OnlyGet(cbs.HyperParam):
        def get_value(self):
            return 1.0

    with pytest.raises(TypeError, match="set_value"):
        OnlyGet()


def test_custom_hyperparam_set_by_setter(logdir):
    class Box:
        gain = 1.0

    class GainParam(cbs.HyperParam):
        _readable_name = "gain"

        def __init__(self, box):
            self.box = box
            self.set_calls = []

        def get_value(self):
            return self.box.gain

        def set_value(self, v):
            self.set_calls.append(v)
            self.box.gain = v

    box = Box()
    param = GainParam(box)
    mon = RecordingMonitor()
    setter = cbs.HyperParamSetterWithFunc(param, lambda epoch, old: old * 2)
    train_tiny([setter], monitors=[mon], max_epoch=3, steps_per_epoch=2)
    # before training (epoch 0) and after each of the 3 epochs: doubled 4 times
    assert param.set_calls == [2.0, 4.0, 8.0, 16.0]
    assert box.gain == 16.0 and setter.get_current_value() == 16.0
    assert param.readable_name == "gain"
    # every value a trigger sets is put to the monitors under the param's readable name, at the
    # end of each epoch; the one set before training is not (no record at step 0)
    assert [(v, step) for n, v, step in mon.scalars if n == "gain"] == [(4.0, 2), (8.0, 4), (16.0, 6)]
