"""Trigger combinators: counting rules of PeriodicTrigger, PeriodicCallback, EnableCallbackIf."""

import time

import pytest

from trainbus.callbacks import Callback, EnableCallbackIf, PeriodicCallback, PeriodicTrigger
from trainbus.testing import HookRecorder, train_tiny


class Triggered(Callback):
    def __init__(self):
        self.at = []

    def _trigger(self):
        self.at.append((self.epoch_num, self.global_step))


@pytest.mark.parametrize("k", [1, 2, 5, 7])
def test_every_k_steps(k):
    t = Triggered()
    train_tiny([PeriodicTrigger(t, every_k_steps=k)], max_epoch=3, steps_per_epoch=4)
    assert [gs for _, gs in t.at] == [s for s in range(1, 13) if s % k == 0]


def test_every_k_epochs_and_before_train():
    t = Triggered()
    train_tiny([PeriodicTrigger(t, every_k_epochs=2, before_train=True)], max_epoch=5, steps_per_epoch=2)
    assert t.at == [(0, 0), (2, 4), (4, 8)]


def test_steps_and_epochs_both():
    t = Triggered()
    train_tiny([PeriodicTrigger(t, every_k_steps=3, every_k_epochs=1)], max_epoch=2, steps_per_epoch=3)
    assert t.at == [(1, 3), (1, 3), (2, 6), (2, 6)]


def test_every_k_seconds():
    class Slow(Callback):
        def _trigger_step(self):
            time.sleep(0.02)

    t = Triggered()
    train_tiny([Slow(), PeriodicTrigger(t, every_k_seconds=0.05)], max_epoch=1, steps_per_epoch=12)
    # 12 steps of >= 20 ms = >= 240 ms: at least 3, at most one trigger per 2 steps
    assert 3 <= len(t.at) <= 6


def test_periodic_trigger_keeps_other_methods():
    rec = HookRecorder()
    train_tiny([PeriodicTrigger(rec, every_k_steps=2)], max_epoch=1, steps_per_epoch=4)
    hooks = rec.hooks()
    assert hooks.count("before_run") == 4 and hooks.count("trigger_step") == 4
    assert hooks.count("trigger") == 2 and "trigger_epoch" not in hooks


@pytest.mark.parametrize("kwargs", [{}, {"every_k_steps": 0}, {"every_k_epochs": -1}, {"every_k_steps": 1.5},
                                    {"every_k_seconds": 0}])
def test_periodic_trigger_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError, match="PeriodicTrigger"):
        PeriodicTrigger(Triggered(), **kwargs)


def test_periodic_callback_steps():
    rec = HookRecorder()
    train_tiny([PeriodicCallback(rec, every_k_steps=2)], max_epoch=1, steps_per_epoch=4)
    # pred is checked in before_run against the step counter before the run: global_step 0 and 2
    assert [e[2] for e in rec.events if e[0] == "before_run"] == [0, 2]
    assert [e[2] for e in rec.events if e[0] == "trigger_step"] == [2, 4]


def test_periodic_callback_epochs_and_last_step():
    rec = HookRecorder()
    train_tiny([PeriodicCallback(rec, every_k_epochs=2)], max_epoch=3, steps_per_epoch=2)
    trig = [e[1] for e in rec.events if e[0] == "trigger_epoch"]
    assert trig == [2, 3]  # epoch 2 by the rule; epoch 3 because it ends training
    steps = [(e[1], e[3]) for e in rec.events if e[0] == "trigger_step"]
    assert steps == [(2, 0), (2, 1), (3, 1)]
    with pytest.raises(ValueError):
        PeriodicCallback(rec)


def test_enable_callback_if_evaluates_pred_in_before_run_only():
    calls = []

    def pred(self):
        calls.append(self.trainer.global_step)
        return self.trainer.global_step % 3 == 0

    rec = HookRecorder()
    train_tiny([EnableCallbackIf(rec, pred)], max_epoch=1, steps_per_epoch=4)
    br = [e[2] for e in rec.events if e[0] == "before_run"]
    ar = [e[2] for e in rec.events if e[0] == "after_run"]
    assert br == [0, 3] and ar == [1, 4]  # after_run follows the before_run decision
    assert "setup_graph" in rec.hooks() and "after_train" in rec.hooks()
    with pytest.raises(TypeError):
        EnableCallbackIf(rec, "not callable")


class _Clock:
    """A fake ``time.monotonic`` for the trigger module: advanced by hand, far from 0."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def monotonic(self) -> float:
        return self.now


def test_every_k_seconds_counts_from_before_train_and_triggers_at_exactly_k(monkeypatch):
    """The first interval starts when training starts (not at clock 0), and a trigger is due
    once exactly ``every_k_seconds`` passed: one step = 1 s, k = 2 s -> steps 2, 4, 6."""
    import trainbus.callbacks.trigger as trigger_mod

    clock = _Clock()
    monkeypatch.setattr(trigger_mod, "time", clock)

    class Tick(Callback):
        def _trigger_step(self):
            clock.now += 1.0

    t = Triggered()  # uses only trigger(): PeriodicTrigger itself needs before_train
    train_tiny([Tick(), PeriodicTrigger(t, every_k_seconds=2)], max_epoch=1, steps_per_epoch=6)
    assert [gs for _, gs in t.at] == [2, 4, 6]


def test_periodic_trigger_forwards_before_train_and_the_epoch_hooks():
    """The wrapped callback's own before_train, before_epoch and after_epoch run once each."""
    rec = HookRecorder()
    train_tiny([PeriodicTrigger(rec, every_k_steps=2)], max_epoch=2, steps_per_epoch=2)
    hooks = rec.hooks()
    assert hooks.count("before_train") == 1 and hooks.index("before_train") < hooks.index("before_epoch")
    assert hooks.count("before_epoch") == 2 and hooks.count("after_epoch") == 2


def test_periodic_trigger_is_not_registered_for_the_wrapped_per_epoch_trigger():
    """The wrapped callback's per-epoch trigger is replaced by the schedule: with a step schedule
    the wrapper is not called per epoch at all (a hook it does not need costs nothing)."""
    rec = HookRecorder()
    assert "trigger_epoch" in rec.hooks_used()
    assert "trigger_epoch" not in PeriodicTrigger(rec, every_k_steps=2).hooks_used()
    assert "trigger_epoch" in PeriodicTrigger(rec, every_k_epochs=2).hooks_used()


def test_enable_callback_if_gates_the_epoch_hooks_and_trigger():
    """``before_epoch``, ``after_epoch`` and ``trigger()`` of the wrapped callback run exactly when
    ``pred`` is true (here: in epoch 2 of 3)."""
    rec = HookRecorder()
    gated = EnableCallbackIf(rec, lambda self: self.epoch_num == 2)
    train_tiny([PeriodicTrigger(gated, every_k_steps=1)], max_epoch=3, steps_per_epoch=2)
    assert [e[1] for e in rec.events if e[0] == "before_epoch"] == [2]
    assert [e[1] for e in rec.events if e[0] == "after_epoch"] == [2]
    assert [e[2] for e in rec.events if e[0] == "trigger"] == [3, 4]


def test_enable_callback_if_runs_a_wrapped_after_run_without_before_run():
    """A wrapped callback that overrides only ``_after_run`` gets it on the steps where ``pred``
    (evaluated before the step) is true: here before global steps 1 and 3, so after_run sees
    the step counter 2 and 4."""

    class AfterOnly(Callback):
        def __init__(self):
            self.seen = []

        def _after_run(self, ctx, values):
            self.seen.append((self.trainer.global_step, values.results))

    cb = AfterOnly()
    gated = EnableCallbackIf(cb, lambda self: self.global_step % 2 == 1)
    assert "before_run" in gated.hooks_used() and "after_run" in gated.hooks_used()
    train_tiny([gated], max_epoch=1, steps_per_epoch=4)
    assert cb.seen == [(2, None), (4, None)]
    # PeriodicCallback (an EnableCallbackIf) gates it the same way
    cb2 = AfterOnly()
    train_tiny([PeriodicCallback(cb2, every_k_steps=3)], max_epoch=1, steps_per_epoch=4)
    assert [gs for gs, _ in cb2.seen] == [1, 4]


def test_enable_callback_if_wrapping_a_trigger_only_callback():
    """Nothing per step is registered for a wrapped callback without ``_after_run``; its
    ``trigger()`` runs after the epochs where ``pred`` holds."""
    t = Triggered()
    gated = EnableCallbackIf(t, lambda self: self.epoch_num % 2 == 0)
    assert "before_run" not in gated.hooks_used() and "after_run" not in gated.hooks_used()
    train_tiny([gated], max_epoch=4, steps_per_epoch=1)
    assert t.at == [(2, 2), (4, 4)]
