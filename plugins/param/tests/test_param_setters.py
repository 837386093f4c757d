"""trainbus-param: hyperparameters and their setters in real training runs."""

from __future__ import annotations

import logging
import os

import pytest

import trainbus
import trainbus.callbacks as C
from trainbus.testing import train_tiny

from statcbs import LRPerEpoch

STEPS = 8  # tiny_dataflow(): 32 samples in batches of 4
DEFAULT_LR = 0.1  # TinyModel's initial learning rate


class PutStat(C.Callback):
    """Puts ``name`` = values[epoch-1] to the monitors after each epoch."""

    def __init__(self, name, values):
        self.name, self.vals = name, list(values)

    def _trigger(self):
        self.trainer.monitors.put_scalar(self.name, self.vals[self.epoch_num - 1])


@pytest.fixture()
def trainbus_log():
    """Messages of the trainbus logger (it does not propagate to the root logger)."""
    records: list[str] = []

    class H(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    lg = logging.getLogger("trainbus")
    h = H()
    lg.addHandler(h)
    yield records
    lg.removeHandler(h)


def _approx(d):
    return {k: pytest.approx(v, rel=1e-6) for k, v in d.items()}


def test_hyper_param_setter_with_func(logdir):
    lr = LRPerEpoch()
    train_tiny(callbacks=[C.HyperParamSetterWithFunc("learning_rate", lambda e, x: x * 0.5 if e % 2 == 0 else x), lr],
               max_epoch=4)
    # before training e=0 halves; after epoch 1 unchanged; after epoch 2 halves; after 3 unchanged
    assert lr.values == _approx({1: 0.05, 2: 0.05, 3: 0.025, 4: 0.025})


def test_human_hyper_param_setter_rereads_the_file(logdir, trainbus_log):
    path = os.path.join(logdir, "hyper.txt")
    with open(path, "w") as f:
        f.write("# tune me\nlearning_rate:0.3\nthis line is wrong\nmomentum: abc\n")

    class Edit(C.Callback):
        def _trigger(self):
            if self.epoch_num == 1:
                with open(path, "w") as f:
                    f.write("other:1\nlearning_rate: 0.07\n")
            elif self.epoch_num == 2:
                with open(path, "w") as f:
                    f.write("other:2\n")  # no learning_rate: left unchanged

    lr = LRPerEpoch()
    train_tiny(callbacks=[Edit(), C.HumanHyperParamSetter("learning_rate"), lr], max_epoch=3)
    assert lr.values == _approx({1: 0.3, 2: 0.07, 3: 0.07})
    bad = [m for m in trainbus_log if "malformed line" in m]
    assert any("line 3" in m and "this line is wrong" in m for m in bad)
    assert any("line 4" in m and "momentum: abc" in m for m in bad)


def test_human_hyper_param_setter_without_file_does_nothing(logdir):
    lr = LRPerEpoch()
    train_tiny(callbacks=[C.HumanHyperParamSetter("learning_rate", file_name="absent.txt"), lr], max_epoch=1)
    assert lr.values == _approx({1: DEFAULT_LR})


def test_stat_monitor_param_setter_decreasing(logdir):
    lr = LRPerEpoch()
    stats = [1.0, 0.9, 0.9, 0.95, 0.95, 0.94]
    setter = C.StatMonitorParamSetter("learning_rate", "val-error", lambda x: x * 0.5, threshold=0, last_k=3)
    train_tiny(callbacks=[PutStat("val-error", stats), setter, lr], max_epoch=6)
    # history [1.0, .9, .9]: decreased enough; [.9, .9, .95]: min >= first -> change, history restarts
    assert lr.values == _approx({1: 0.1, 2: 0.1, 3: 0.1, 4: 0.1, 5: 0.05, 6: 0.05})
    assert [v for _, v in setter.history] == [0.95, 0.94]


def test_stat_monitor_param_setter_reverse_and_threshold(logdir):
    lr = LRPerEpoch()
    stats = [0.5, 0.6, 0.605, 0.58]
    train_tiny(callbacks=[PutStat("acc", stats),
                          C.StatMonitorParamSetter("learning_rate", "acc", lambda x: x * 0.1, threshold=0.01, last_k=2,
                                                   reverse=True), lr], max_epoch=4)
    # [.5, .6]: increased by more than .01; [.6, .605]: max <= .61 -> change; then [.58] only
    assert lr.values == _approx({1: 0.1, 2: 0.1, 3: 0.1, 4: 0.01})


def test_stat_monitor_param_setter_counts_new_values_only(logdir, trainbus_log):
    class PutOnce(C.Callback):
        def _trigger(self):
            if self.epoch_num == 1:
                self.trainer.monitors.put_scalar("err", 1.0)

    lr = LRPerEpoch()
    setter = C.StatMonitorParamSetter("learning_rate", "err", lambda x: x * 0.5, threshold=0, last_k=2)
    train_tiny(callbacks=[PutOnce(), setter, lr], max_epoch=3)
    assert lr.values == _approx({1: 0.1, 2: 0.1, 3: 0.1})
    assert len(setter.history) == 1
    assert any("no new value of 'err'" in m for m in trainbus_log)


def test_stat_monitor_param_setter_state_round_trip():
    a = C.StatMonitorParamSetter("learning_rate", "err", lambda x: x, threshold=0, last_k=3)
    a.history.extend([(8, 1.0), (16, 0.5)])
    b = C.StatMonitorParamSetter("learning_rate", "err", lambda x: x, threshold=0, last_k=3)
    b._load_state_dict(a._state_dict())
    assert list(b.history) == [(8, 1.0), (16, 0.5)]


def test_obj_attr_param(logdir):
    class Holder:
        gamma = 1.0

    h = Holder()
    tr = train_tiny(callbacks=[C.ScheduledHyperParamSetter(C.ObjAttrParam(h, "gamma", "g"), [(1, 2.0), (2, 3.0)])],
                    max_epoch=2)
    assert h.gamma == 3.0
    assert tr.monitors.get_history("g") == [(STEPS, 2.0), (2 * STEPS, 3.0)]
    with pytest.raises(AttributeError, match="no attribute 'beta'"):
        C.ObjAttrParam(h, "beta")


def test_graph_var_param_errors(logdir):
    with pytest.raises(ValueError, match="not a variable in the graph"):
        train_tiny(callbacks=[C.ScheduledHyperParamSetter("no_such_var", [(1, 0.1)])], max_epoch=1)
    with pytest.raises(ValueError, match=r"shape \(4, 3\)"):
        train_tiny(callbacks=[C.ScheduledHyperParamSetter(C.GraphVarParam("W"), [(1, 0.1)])], max_epoch=1)


def test_graph_var_param_names_and_values(logdir):
    p = C.GraphVarParam("learning_rate:0")
    assert p.readable_name == "learning_rate" and p.var_name == "learning_rate:0"
    seen = []

    class Check(C.Callback):
        def _setup_graph(self):
            p.setup_graph()

        def _before_train(self):
            seen.append(float(p.get_value()))
            p.set_value(0.25)
            seen.append(float(p.get_value()))

    train_tiny(callbacks=[Check()], max_epoch=1)
    assert seen == pytest.approx([DEFAULT_LR, 0.25])


def test_base_class_and_param_type_errors():
    with pytest.raises(TypeError, match="abstract"):
        C.HyperParamSetter("learning_rate")
    with pytest.raises(TypeError, match="HyperParam or a variable name"):
        C.ScheduledHyperParamSetter(3.0, [(1, 0.1)])
    with pytest.raises(TypeError, match="func"):
        C.HyperParamSetterWithFunc("learning_rate", 0.5)
    with pytest.raises(ValueError, match="last_k"):
        C.StatMonitorParamSetter("learning_rate", "err", lambda x: x, threshold=0, last_k=0)

    class Custom(C.HyperParamSetter):
        def _get_value_to_set(self):
            return 0.5

    assert Custom("learning_rate").param.readable_name == "learning_rate"


def test_public_paths():
    import trainbus_param

    for name in trainbus_param.__all__:
        assert getattr(trainbus.callbacks, name) is getattr(trainbus_param, name)
