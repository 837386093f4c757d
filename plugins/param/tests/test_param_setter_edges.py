"""HyperParamSetter's bookkeeping: which values count as numbers, when a change is logged, the
base class's own before_train set, and where HumanHyperParamSetter finds its file (each test
kills a mutant the other tests missed)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import trainbus.callbacks as C
from trainbus.testing import RecordingMonitor, train_tiny
from trainbus.utils import logger
from trainbus_param import _setters
from trainbus_param._params import HyperParam
from trainbus_param._setters import HumanHyperParamSetter, HyperParamSetter

from statcbs import LRPerEpoch


class _Dtype:
    """Has a dtype but no size: not a number."""

    dtype = np.dtype("float32")


@pytest.mark.parametrize("value, number", [
    (3, True), (2.5, True), (np.float32(1.5), True), (np.array(1.0), True), (np.array(7, dtype=np.int64), True),
    (np.array(3, dtype=np.uint8), True), (True, False), (np.bool_(True), False), (np.array([True]), False),
    ("1.0", False), (None, False), (np.array([1.0, 2.0]), False), (np.array(["a"]), False), (_Dtype(), False),
])
def test_which_values_are_numbers(value, number):
    """Numbers are put to the monitors and formatted as such; booleans, strings and arrays of
    several elements are not."""
    assert _setters._is_number(value) is number
    assert _setters._fmt(value) == (f"{float(value):.6g}" if number else repr(value))


def test_same_compares_arrays_by_identity():
    a = np.array([1.0, 2.0])
    assert _setters._same(a, a) is True
    assert _setters._same(a, a.copy()) is False
    assert _setters._same(0.5, 0.5) is True and _setters._same(0.5, 0.25) is False


class _Sequence(HyperParamSetter):
    """Sets the learning rate to the next value of ``values`` at every call (None: leave it)."""

    def __init__(self, values):
        super().__init__("learning_rate")
        self.values = list(values)
        self.calls: list[tuple[int, int]] = []

    def _get_value_to_set(self):
        self.calls.append((self.epoch_num, self.global_step))
        return self.values[len(self.calls) - 1]


def test_changes_are_logged_once_an_epoch_and_the_base_class_sets_before_training(tb_log):
    """Called before training and after every step: the first value is logged as set, a change
    as a change from the previous value, at most one message an epoch; an unchanged value or
    None logs nothing."""
    setter = _Sequence([0.1, 0.1, 0.2, 0.25, None, 0.3, 0.3])
    train_tiny([C.PeriodicTrigger(setter, every_k_steps=1)], max_epoch=2, steps_per_epoch=3)
    assert setter.calls[0] == (0, 0)  # before_train: the base class's own default
    said = [r.getMessage() for r in tb_log if r.getMessage().startswith("[HyperParamSetter]")]
    assert said == [
        "[HyperParamSetter] At global_step=0, learning_rate is set to 0.1",
        "[HyperParamSetter] At global_step=2, learning_rate changes from 0.1 to 0.2",
        "[HyperParamSetter] At global_step=5, learning_rate changes from 0.25 to 0.3",
    ]


def test_a_subclass_delegating_to_the_base_is_told_to_implement_it():
    class Delegating(HyperParamSetter):
        def _get_value_to_set(self):
            return super()._get_value_to_set()

    with pytest.raises(TypeError, match="Delegating must implement _get_value_to_set"):
        Delegating("learning_rate")._get_value_to_set()


@pytest.mark.parametrize("bad", ["", 3, None])
def test_human_setter_rejects_a_file_name_that_is_not_one(bad):
    with pytest.raises(TypeError, match="file_name must be a file name"):
        HumanHyperParamSetter("learning_rate", file_name=bad)


def test_human_setter_file_in_the_log_directory_known_at_construction(logdir):
    assert HumanHyperParamSetter("learning_rate").file_name == os.path.join(str(logdir), "hyper.txt")


def test_human_setter_log_directory_set_after_construction(tmp_path):
    """Made before the log directory is chosen: the file is looked up when the graph is set up."""
    setter = HumanHyperParamSetter("learning_rate", file_name="lr.txt")
    assert setter.file_name is None
    d = tmp_path / "later"
    logger.set_logger_dir(str(d), action="k")
    logger.commit_logger_dir()
    (d / "lr.txt").write_text("learning_rate:0.0625\n")

    class Read(C.Callback):
        def _setup_graph(self):
            self.var = self.get_tensors_maybe_in_tower(["learning_rate"])[0]

        def _after_train(self):
            self.value = float(self.trainer.sess.run(self.var))

    read = Read()
    train_tiny([setter, read], max_epoch=1, steps_per_epoch=2)
    assert setter.file_name == str(d / "lr.txt")
    assert read.value == 0.0625


def test_human_setter_without_a_log_directory_fails_at_setup_naming_the_file():
    setter = HumanHyperParamSetter("learning_rate", file_name="lr.txt")
    with pytest.raises(RuntimeError, match="reads lr.txt in the log directory, but none is set"):
        train_tiny([setter], max_epoch=1, steps_per_epoch=1)


def test_human_setter_file_format_and_messages(logdir, tb_log):
    """Blank and comment lines are skipped without a word, a line without a name is reported and
    skipped, the announcement names the file and the param."""
    f = logdir / "hyper.txt"
    f.write_text("\n# tuned by hand\n   \n#learning_rate:9\n:0.5\nlearning_rate:0.03125\n")
    lr = LRPerEpoch()
    train_tiny([HumanHyperParamSetter("learning_rate"), lr], max_epoch=2, steps_per_epoch=1)
    assert lr.values[1] == 0.03125
    said = [(r.levelname, r.getMessage()) for r in tb_log]
    assert ("INFO", f"Use {f} to set hyperparam 'learning_rate'.") in said
    warned = [m for lvl, m in said if lvl == "WARNING" and "HumanHyperParamSetter" in m]
    assert warned and all(m.startswith(f"HumanHyperParamSetter: ignoring malformed line 5 of {f}: ':0.5'")
                          for m in warned), warned


def test_human_setter_unreadable_file_is_a_warning_and_leaves_the_param(logdir, tb_log):
    f = logdir / "hyper.txt"
    f.write_bytes(b"learning_rate:\xff\xfe0.5\n")
    lr = LRPerEpoch()
    train_tiny([HumanHyperParamSetter("learning_rate"), lr], max_epoch=2, steps_per_epoch=1)
    assert lr.values == pytest.approx({1: 0.1, 2: 0.1}, rel=1e-6)
    assert any(r.levelname == "WARNING" and r.getMessage().startswith(f"HumanHyperParamSetter: cannot read {f}: ")
               for r in tb_log)


def test_schedule_is_applied_when_training_starts_past_a_point_by_default(tb_log):
    """Resumed at epoch 3 with a point at epoch 1: the default ``set_at_beginning`` sets it, and
    the change is logged like any other."""
    lr = LRPerEpoch()
    train_tiny([_setters.ScheduledHyperParamSetter("learning_rate", [(1, 0.05)]), lr], max_epoch=3,
               steps_per_epoch=1, starting_epoch=3)
    assert lr.values == pytest.approx({3: 0.05}, rel=1e-6)
    assert "[HyperParamSetter] At global_step=0, learning_rate is set to 0.05" in [r.getMessage() for r in tb_log]


def test_resumed_between_two_points_expects_the_interpolated_value(tb_log):
    """Linear schedule 0.5 at epoch 0 to 0.1 at epoch 4, resumed at epoch 3 (point 2): 0.3 is set
    before training and agrees with what the schedule expects there (no warning)."""
    lr = LRPerEpoch()
    train_tiny([_setters.ScheduledHyperParamSetter("learning_rate", [(0, 0.5), (4, 0.1)], interp="linear"), lr],
               max_epoch=3, steps_per_epoch=1, starting_epoch=3)
    assert lr.values == pytest.approx({3: 0.3}, rel=1e-6)
    said = [r.getMessage() for r in tb_log]
    assert "[HyperParamSetter] At global_step=0, learning_rate is set to 0.3" in said
    assert not [m for m in said if "by the schedule" in m], said


class _Box(HyperParam):
    """A param held in Python; starts as a value no number can be compared with."""

    _readable_name = "gain"

    def __init__(self, value):
        self.value = value
        self.set_calls: list = []

    def get_value(self):
        return self.value

    def set_value(self, v):
        self.set_calls.append(v)
        self.value = v


def test_a_param_value_that_is_not_a_number_differs_from_the_schedule(tb_log):
    box = _Box("not set yet")
    train_tiny([_setters.ScheduledHyperParamSetter(box, [(1, 0.05)])], max_epoch=3, steps_per_epoch=1,
               starting_epoch=3)
    assert box.set_calls == [0.05]
    assert any("should be 0.05 at the current point (epoch 2), but its current value is 'not set yet'" in r.getMessage()
               for r in tb_log)


def test_step_schedule_assigns_and_reports_only_changes():
    """Step-based and linear between two equal values: the value is set once before training,
    not again at every step (each set is an assign and a monitor record)."""
    box = _Box(0.0)
    mon = RecordingMonitor()
    train_tiny([_setters.ScheduledHyperParamSetter(box, [(0, 0.5), (6, 0.5)], interp="linear", step_based=True)],
               monitors=[mon], max_epoch=1, steps_per_epoch=5)
    assert box.set_calls == [0.5]
    assert [v for name, v, _ in mon.scalars if name == "gain"] == []  # set before training: no statistic


def test_stat_monitor_setter_does_not_look_for_its_statistic_before_training(tb_log):
    """It acts on statistics of finished epochs: nothing is looked up (nor warned about) in
    before_train; with last_k=1 every new value is a full history."""

    class PutStat(C.Callback):
        def _trigger(self):
            self.trainer.monitors.put_scalar("val-error", 1.0)

    box = _Box(1.0)
    setter = _setters.StatMonitorParamSetter(box, "val-error", lambda v: v / 2, threshold=0, last_k=1)
    train_tiny([PutStat(), setter], max_epoch=2, steps_per_epoch=1)
    assert box.set_calls == [0.5, 0.25]
    assert not [r for r in tb_log if "No history data" in r.getMessage()]


@pytest.mark.parametrize("kwargs, error, match", [
    ({"stat_name": ""}, TypeError, "stat_name must be a statistic's name"),
    ({"stat_name": 3}, TypeError, "stat_name must be a statistic's name"),
    ({"value_func": 0.5}, TypeError, "value_func must be callable"),
    ({"threshold": True}, TypeError, "threshold must be a number"),
    ({"threshold": "0"}, TypeError, "threshold must be a number"),
    ({"last_k": 0}, ValueError, "last_k must be a positive integer"),
])
def test_stat_monitor_setter_argument_checks(kwargs, error, match):
    args = dict(param="learning_rate", stat_name="val-error", value_func=lambda v: v, threshold=0.0, last_k=1)
    args.update(kwargs)
    with pytest.raises(error, match=match):
        _setters.StatMonitorParamSetter(**args)


@pytest.mark.parametrize("schedule", [5, None, 0.5])
def test_a_schedule_that_is_not_a_list_is_a_type_error(schedule):
    with pytest.raises(TypeError, match="schedule must be a list of \\(point, value\\) pairs"):
        _setters.ScheduledHyperParamSetter("learning_rate", schedule)


def test_setters_run_on_every_worker_not_only_the_chief():
    """Each worker holds its own copy of the param (e.g. the learning rate of its replica): a
    setter is not a chief-only callback, so a non-chief trainer sets it too."""
    from trainbus.train import SimpleTrainer

    class NotChief(SimpleTrainer):
        is_chief = False

    class EveryWorkerLR(LRPerEpoch):
        _chief_only = False

    lr = EveryWorkerLR()
    setter = _setters.ScheduledHyperParamSetter("learning_rate", [(0, 0.25)])
    train_tiny([setter, lr], max_epoch=1, steps_per_epoch=1, trainer=NotChief())
    assert setter.chief_only is False
    assert lr.values == pytest.approx({1: 0.25})


class _LRSeen(C.Callback):
    """The learning rate in the session before each epoch."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def _setup_graph(self):
        self.var = self.get_tensors_maybe_in_tower(["learning_rate"])[0]

    def _before_epoch(self):
        self.values.append(float(self.trainer.sess.run(self.var)))


@pytest.mark.parametrize("make", [np.float32, np.array, lambda x: np.array([x], dtype=np.float32),
                                  lambda x: np.array([[x]])], ids=["float32", "0-d", "1-element", "1x1"])
def test_numpy_values_are_set_reported_and_logged_as_floats(make, tb_log):
    """A function returning a numpy scalar or an array of one element: the scalar variable gets
    the value, the monitors get a Python float and the log line prints the number."""
    values = {0: make(0.25), 1: make(0.125)}
    lr = _LRSeen()
    mon = RecordingMonitor()
    train_tiny([_setters.HyperParamSetterWithFunc("learning_rate", lambda e, x: values.get(e)), lr],
               monitors=[mon], max_epoch=2, steps_per_epoch=2)
    assert lr.values == [pytest.approx(0.25), pytest.approx(0.125)]
    put = [v for name, v, _ in mon.scalars if name == "learning_rate"]
    assert put == [0.125] and all(type(v) is float for v in put)  # the value set before training is not put
    said = [r.getMessage() for r in tb_log if r.getMessage().startswith("[HyperParamSetter]")]
    assert said == ["[HyperParamSetter] At global_step=0, learning_rate is set to 0.25",
                    "[HyperParamSetter] At global_step=2, learning_rate changes from 0.25 to 0.125"]


class _PutSeq(C.Callback):
    """Puts ``name`` = values[epoch - 1] after each epoch."""

    def __init__(self, name, values):
        self.name, self.values = name, list(values)

    def _trigger(self):
        self.trainer.monitors.put_scalar(self.name, self.values[self.epoch_num - 1])


def test_stat_monitor_setter_warns_when_its_statistic_was_never_put(tb_log):
    box = _Box(1.0)
    train_tiny([_setters.StatMonitorParamSetter(box, "val-error", lambda v: v / 2, threshold=0, last_k=1)],
               max_epoch=1, steps_per_epoch=1)
    assert box.set_calls == []
    assert "[StatMonitorParamSetter] No history data available for 'val-error'." in [r.getMessage() for r in tb_log]


def test_stat_monitor_setter_a_decrease_within_the_threshold_is_not_enough():
    """threshold 0.1: 1.0 -> 0.95 is a decrease by less than the threshold, so the value changes."""
    box = _Box(1.0)
    setter = _setters.StatMonitorParamSetter(box, "err", lambda v: v / 2, threshold=0.1, last_k=2)
    train_tiny([_PutSeq("err", [1.0, 0.95]), setter], max_epoch=2, steps_per_epoch=1)
    assert box.set_calls == [0.5]


def test_stat_monitor_setter_reverse_an_equal_value_is_no_increase():
    """reverse, threshold 0: 0.5 -> 0.5 did not increase, so the value changes."""
    box = _Box(1.0)
    setter = _setters.StatMonitorParamSetter(box, "acc", lambda v: v / 2, threshold=0, last_k=2, reverse=True)
    train_tiny([_PutSeq("acc", [0.5, 0.5]), setter], max_epoch=2, steps_per_epoch=1)
    assert box.set_calls == [0.5]


def test_stat_monitor_setter_logs_the_history_that_triggered_it(tb_log):
    box = _Box(1.0)
    setter = _setters.StatMonitorParamSetter(box, "err", lambda v: v / 2, threshold=0, last_k=2)
    train_tiny([_PutSeq("err", [1.0, 1.25]), setter], max_epoch=2, steps_per_epoch=1)
    assert box.set_calls == [0.5]
    assert "[StatMonitorParamSetter] Triggered, history of err: 1,1.25" in [r.getMessage() for r in tb_log]


def test_stat_monitor_setter_state_key_and_loaded_history():
    setter = _setters.StatMonitorParamSetter(_Box(1.0), "err", lambda v: v, threshold=0, last_k=3)
    assert setter.state_key == "StatMonitorParamSetter(gain,err)"
    setter.history.extend([(1, 0.9), (2, 0.8)])
    setter._load_state_dict({"history": [[3, 0.5]]})  # the saved history replaces what was there
    assert list(setter.history) == [(3, 0.5)]
