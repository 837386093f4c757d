"""EarlyStopping's patience counter: an improvement after non-improving values starts the count
again (only consecutive non-improving values count)."""

from __future__ import annotations

import pytest

import trainbus
from trainbus.callbacks import CallbackFactory
from trainbus.testing import train_tiny

cbs = trainbus.callbacks


def _put(name, values):
    return CallbackFactory(trigger=lambda cb: cb.trainer.monitors.put_scalar(name, values[cb.epoch_num - 1]))


def _record_wait(es, sink):
    return CallbackFactory(trigger=lambda cb: sink.append(es.wait))


@pytest.mark.parametrize("mode,values", [("min", [5.0, 6.0, 4.0, 7.0, 8.0, 3.0, 9.0, 9.0]),
                                         ("max", [5.0, 4.0, 6.0, 3.0, 2.0, 7.0, 1.0, 1.0])])
def test_improvement_resets_the_patience_counter(logdir, mode, values):
    es = cbs.EarlyStopping("metric", patience=2, mode=mode)
    waits: list[int] = []
    tr = train_tiny(callbacks=[_put("metric", values), es, _record_wait(es, waits)], max_epoch=8)
    # epoch 2 does not improve (1), epoch 3 improves (0), epochs 4 and 5 do not (1, 2): stop at 5
    assert waits == [0, 1, 0, 1]  # the recorder after EarlyStopping does not run in the stopping trigger
    assert es.wait == 2 and tr.epoch_num == 5 and es.stopped_epoch == 5
    assert es.best == values[2] and es.best_step == 3 * 8


def test_improvement_smaller_than_min_delta_does_not_reset(logdir):
    es = cbs.EarlyStopping("loss", patience=3, min_delta=0.5)
    waits: list[int] = []
    # 10 best; 11 (1); 9.8 is better but not by more than 0.5 (2); 9.0 improves (0); 9.4, 9.2, 8.9 (1, 2, 3)
    tr = train_tiny(callbacks=[_put("loss", [10.0, 11.0, 9.8, 9.0, 9.4, 9.2, 8.9, 1.0]), es,
                               _record_wait(es, waits)], max_epoch=8)
    assert waits == [0, 1, 2, 0, 1, 2]
    assert tr.epoch_num == 7 and es.best == 9.0 and es.best_step == 4 * 8


@pytest.mark.parametrize("mode", ["min", "max"])
def test_an_equal_value_is_not_an_improvement(logdir, tb_log, mode):
    """With min_delta=0 a value equal to the best does not improve on it: it counts toward the
    patience, and each such trigger is logged with the count."""
    es = cbs.EarlyStopping("metric", patience=2, mode=mode)
    tr = train_tiny(callbacks=[_put("metric", [1.0, 1.0, 1.0, 1.0]), es], max_epoch=4)
    assert tr.epoch_num == 3 and es.wait == 2 and es.best_step == 8
    msgs = [r.getMessage() for r in tb_log if r.getMessage().startswith("EarlyStopping: metric=")]
    assert msgs == ["EarlyStopping: metric=1 did not improve on 1 (step 8) for 1/2 trigger(s).",
                    "EarlyStopping: metric=1 did not improve on 1 (step 8) for 2/2 trigger(s)."]


def test_defaults_and_fresh_state():
    es = cbs.EarlyStopping("v")
    assert (es.patience, es.min_delta, es.mode, es.restore_best) == (5, 0.0, "min", False)
    assert (es.best, es.best_step, es.wait, es.stopped_epoch) == (None, None, 0, None)
    assert es._state_dict() == {"best": None, "best_step": None, "wait": 0, "last_seen_step": None}


def test_restore_best_after_resume_without_the_weights_in_memory_warns(logdir, tb_log):
    """Resumed with a best value from before (its weights are not in memory) and no new best:
    the weights are kept and a warning says why; with no best at all, nothing is said."""
    resumed = cbs.EarlyStopping("val", patience=5, restore_best=True)
    resumed._load_state_dict({"best": 0.5, "best_step": 8, "wait": 0, "last_seen_step": 8})
    train_tiny(callbacks=[_put("val", [0.9, 0.8]), resumed], max_epoch=2)
    warned = [r.getMessage() for r in tb_log if "not in memory" in r.getMessage()]
    assert warned == ["EarlyStopping: the best weights were seen before resuming and are not in memory; the "
                      "current weights are kept."]
    tb_log.clear()
    train_tiny(callbacks=[cbs.EarlyStopping("never_put", restore_best=True)], max_epoch=1)
    assert not [r for r in tb_log if "not in memory" in r.getMessage()]


def test_restore_best_says_which_weights_it_restored(logdir, tb_log):
    es = cbs.EarlyStopping("val", patience=1, restore_best=True)
    train_tiny(callbacks=[_put("val", [3.0, 1.0, 2.0]), es], max_epoch=3)
    assert [r.getMessage() for r in tb_log if "restored the weights" in r.getMessage()] == [
        "EarlyStopping: restored the weights of the best val=1 (step 16)."]


def test_state_without_a_wait_entry_loads_as_zero():
    es = cbs.EarlyStopping("v")
    es._load_state_dict({"best": 1.0, "best_step": 8})
    assert (es.best, es.best_step, es.wait) == (1.0, 8, 0)
