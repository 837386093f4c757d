"""HyperParamSetter's bookkeeping: which values count as numbers, when a change is logged, the
base class's own before_train set, and where HumanHyperParamSetter finds its file (each test
kills a mutant the other tests missed)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import trainbus.callbacks as C
from trainbus.testing import train_tiny
from trainbus.utils import logger
from trainbus_param import _setters
from trainbus_param._setters import HumanHyperParamSetter, HyperParamSetter


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
