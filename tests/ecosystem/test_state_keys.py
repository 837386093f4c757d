"""Stable callback state keys: each stateful callback saves its state under ``state_key`` (class and
identifying arguments, or a key the user sets); duplicates are refused at setup; a resumed run
matches saved state by key whatever the order of the callbacks, and reports what does not match."""

from __future__ import annotations

import json
import logging
import re

import pytest

import trainbus
from trainbus.callbacks import Callback, CallbackFactory
from trainbus.testing import train_tiny
from trainbus.tfutils.sessinit import SaverRestore

cbs = trainbus.callbacks


class Counter(Callback):
    """Adds ``inc`` to ``total`` on every step; ``total`` is its resumable state."""

    def __init__(self, name: str, inc: int) -> None:
        self.name, self.inc, self.total = name, inc, 0

    def _trigger_step(self) -> None:
        self.total += self.inc

    def _state_key_args(self) -> tuple:
        return (self.name,)

    def _state_dict(self) -> dict:
        return {"total": self.total}

    def _load_state_dict(self, state: dict) -> None:
        self.total = int(state["total"])

    def __str__(self) -> str:
        return f"Counter({self.name})"


def _messages(records, level, text):
    return [r.getMessage() for r in records if r.levelno == level and text in r.getMessage()]


def test_default_keys_name_the_class_and_what_identifies_the_callback():
    assert cbs.EarlyStopping("val-error").state_key == "EarlyStopping(val-error)"
    assert cbs.MinSaver("val-error").state_key == "MinSaver(val-error)"
    assert cbs.MaxSaver("accuracy").state_key == "MaxSaver(accuracy)"
    assert cbs.MinSaver("accuracy", reverse=True).state_key == "MinSaver(accuracy,max)"
    assert cbs.MaxSaver("accuracy", filename="best").state_key == "MaxSaver(accuracy,best)"
    setter = cbs.StatMonitorParamSetter("learning_rate", "val-error", lambda x: x * 0.5, threshold=0, last_k=3)
    assert setter.state_key == "StatMonitorParamSetter(learning_rate,val-error)"
    assert cbs.EstimatedTimeLeft().state_key == "EstimatedTimeLeft"
    assert Counter("a", 1).state_key == "Counter(a)"
    # stateless callbacks have a key too, but never save state
    assert not cbs.ModelSaver(checkpoint_dir="/tmp")._has_state()
    assert cbs.EarlyStopping("x")._has_state()


def test_state_key_can_be_set_and_a_wrapper_uses_the_wrapped_callbacks_key():
    es = cbs.EarlyStopping("val").set_state_key("es-main")
    assert es.state_key == "es-main"
    wrapped = cbs.PeriodicTrigger(cbs.EarlyStopping("loss"), every_k_epochs=2)
    assert wrapped.state_key == "EarlyStopping(loss)" and wrapped._has_state()
    wrapped.state_key = "es-loss"
    assert wrapped.cb.state_key == "es-loss"
    with pytest.raises(ValueError, match="state_key must be a non-empty string"):
        cbs.EarlyStopping("val").set_state_key("")
    with pytest.raises(ValueError, match="state_key must be a non-empty string"):
        cbs.EarlyStopping("val").state_key = 3


def test_two_callbacks_with_one_key_is_an_error_at_setup_naming_both(logdir):
    started = []
    with pytest.raises(ValueError) as info:
        train_tiny(callbacks=[CallbackFactory(before_train=lambda cb: started.append(1)), Counter("a", 1),
                              cbs.EarlyStopping("val"), Counter("a", 2)], max_epoch=1)
    msg = str(info.value)
    assert "'Counter(a)'" in msg and msg.count("Counter(a)") == 3  # the key and both callbacks
    # both named with their place in the trainer's callback list (two apart, as in the list given)
    first, second = (int(i) for i in re.findall(r"callbacks\[(\d+)\]", msg))
    assert second - first == 2 and "set_state_key" in msg
    assert started == []  # refused before training started
    # a wrapped callback counts with its own key; a distinct key makes the run valid
    with pytest.raises(ValueError, match="EarlyStopping\\(val\\)"):
        train_tiny(callbacks=[cbs.EarlyStopping("val"),
                              cbs.PeriodicTrigger(cbs.EarlyStopping("val"), every_k_epochs=1)], max_epoch=1)
    tr = train_tiny(callbacks=[Counter("a", 1), Counter("a", 2).set_state_key("second-a")], max_epoch=1)
    assert tr.callback_states() == {"Counter(a)": {"total": 8}, "second-a": {"total": 16}}


def _first_run(logdir):
    first = [Counter("a", 1), Counter("b", 10), cbs.ModelSaver(max_to_keep=2)]
    tr = train_tiny(callbacks=first, max_epoch=2)
    assert tr.global_step == 16
    saved = json.loads((logdir / "model-16.trainbus.json").read_text())
    assert saved == {"Counter(a)": {"total": 16}, "Counter(b)": {"total": 160}}
    return str(logdir / "model-16")


def test_resume_matches_state_by_key_when_callbacks_are_swapped_or_inserted(logdir, tb_log):
    ckpt = _first_run(logdir)
    a, b, c = Counter("a", 1), Counter("b", 10), Counter("c", 100)
    # swapped, and a new one of the same class inserted before both
    tr = train_tiny(callbacks=[c, b, a], max_epoch=3, starting_epoch=3, session_init=SaverRestore(ckpt))
    assert tr.global_step == 24
    assert (a.total, b.total, c.total) == (16 + 8, 160 + 80, 800)
    restored = _messages(tb_log, logging.INFO, "Restored the state of callback(s)")
    assert restored == [f"Restored the state of callback(s) Counter(b), Counter(a) in {ckpt}.trainbus.json."]
    fresh = _messages(tb_log, logging.WARNING, "no saved state")
    assert len(fresh) == 1 and "Counter(c)" in fresh[0] and "Counter(a)" not in fresh[0]
    assert _messages(tb_log, logging.WARNING, "no callback of this run claims") == []


def test_saved_state_nobody_claims_is_reported_once(logdir, tb_log):
    ckpt = _first_run(logdir)
    b = Counter("b", 10)
    tr = train_tiny(callbacks=[b], max_epoch=4, starting_epoch=3, session_init=SaverRestore(ckpt))
    assert tr.global_step == 32 and b.total == 160 + 160
    unclaimed = _messages(tb_log, logging.WARNING, "no callback of this run claims")
    assert len(unclaimed) == 1 and "Counter(a)" in unclaimed[0] and "Counter(b)" not in unclaimed[0]
    assert "set its state_key" in unclaimed[0]
    assert _messages(tb_log, logging.WARNING, "no saved state") == []


def test_early_stopping_state_follows_its_statistic_not_its_position(logdir):
    def put(name, values):
        return CallbackFactory(trigger=lambda cb: cb.trainer.monitors.put_scalar(name, values[cb.epoch_num - 1]))

    es_x, es_y = cbs.EarlyStopping("x", patience=5), cbs.EarlyStopping("y", patience=5)
    train_tiny(callbacks=[put("x", [1.0, 2.0]), put("y", [5.0, 4.0]), es_x, es_y, cbs.ModelSaver()], max_epoch=2)
    assert (es_x.best, es_x.wait, es_y.best, es_y.wait) == (1.0, 1, 4.0, 0)
    new_x, new_y = cbs.EarlyStopping("x", patience=5), cbs.EarlyStopping("y", patience=5)
    seen = {}

    def record(cb):
        seen.update(x=(new_x.best, new_x.wait), y=(new_y.best, new_y.wait))

    train_tiny(callbacks=[CallbackFactory(before_train=record), new_y, new_x], max_epoch=2, starting_epoch=2,
               session_init=SaverRestore(str(logdir)))
    assert seen == {"x": (1.0, 1), "y": (4.0, 0)}


def test_a_state_saved_under_another_key_is_not_guessed_at(logdir, tb_log):
    """States are matched by state key only: a file keyed by class name (no released version
    wrote one) is reported as unclaimed, and the callbacks start fresh."""
    ckpt = _first_run(logdir)
    state_file = logdir / "model-16.trainbus.json"
    state_file.write_text(json.dumps({"Counter": {"total": 5}}))
    only = Counter("a", 1)
    train_tiny(callbacks=[only], max_epoch=3, starting_epoch=3, session_init=SaverRestore(ckpt))
    assert only.total == 8  # one epoch of 8 steps from zero (restored from 5 it would be 13)
    unclaimed = _messages(tb_log, logging.WARNING, "no callback of this run claims")
    assert len(unclaimed) == 1 and "not used: Counter." in unclaimed[0]
    fresh = _messages(tb_log, logging.WARNING, "no saved state")
    assert len(fresh) == 1 and "Counter(a)" in fresh[0]


