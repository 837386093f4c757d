"""Per-hook timing from the dispatcher: ``TRAINBUS_PROFILE_HOOKS=1`` or ``trainer.profile_hooks = True``
logs, when training ends, the time of every callback in every hook, slowest first; off, the
per-step functions are the plain compiled ones and nothing is logged."""

import re
import time

from trainbus.callbacks import Callback
from trainbus.testing import HookRecorder, train_tiny

SLEEP = 0.02


class SlowStep(Callback):
    def _trigger_step(self):
        time.sleep(SLEEP)


class PerStep(Callback):
    def _before_run(self, ctx):
        return None

    def _after_run(self, ctx, values):
        pass


def _table(records):
    """The rows of the hook-timing table in the log: (callback, hook, calls, total seconds)."""
    texts = [r.getMessage() for r in records if r.getMessage().startswith("Hook timing")]
    assert len(texts) == 1, texts
    rows = []
    for line in texts[0].splitlines()[2:]:
        m = re.fullmatch(r"\s+(\S+)\s+(\S+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)", line)
        assert m, line
        rows.append((m[1], m[2], int(m[3]), float(m[4])))
    return rows


def test_the_environment_switch_times_every_hook_slowest_first(logdir, tb_log, monkeypatch):
    monkeypatch.setenv("TRAINBUS_PROFILE_HOOKS", "1")
    steps = 3
    train_tiny(callbacks=[HookRecorder("rec"), SlowStep(), PerStep()], max_epoch=1, steps_per_epoch=steps)
    rows = _table(tb_log)
    name, hook, calls, total = rows[0]
    assert (name, hook, calls) == ("SlowStep", "trigger_step", steps)
    assert total >= steps * SLEEP
    assert [r[3] for r in rows] == sorted((r[3] for r in rows), reverse=True)
    timed = {(r[0], r[1]): r[2] for r in rows}
    # every hook, not only the per-step ones
    for hook, calls in (("setup_graph", 1), ("before_train", 1), ("before_epoch", 1), ("before_run", steps),
                        ("after_run", steps), ("trigger_step", steps), ("after_epoch", 1), ("trigger_epoch", 1),
                        ("after_train", 1)):
        assert timed[("HookRecorder", hook)] == calls, (hook, timed)
    assert timed[("PerStep", "before_run")] == timed[("PerStep", "after_run")] == steps
    assert ("PerStep", "trigger_step") not in timed  # a hook it does not use is not registered


def test_the_trainer_switch_and_off_by_default(logdir, tb_log, monkeypatch):
    from trainbus.train import SimpleTrainer

    monkeypatch.delenv("TRAINBUS_PROFILE_HOOKS", raising=False)
    trainer = SimpleTrainer()
    trainer.profile_hooks = True
    train_tiny(callbacks=[SlowStep()], trainer=trainer, max_epoch=1, steps_per_epoch=2)
    assert _table(tb_log)[0][:3] == ("SlowStep", "trigger_step", 2)

    tb_log.clear()
    plain = SimpleTrainer()
    train_tiny(callbacks=[SlowStep(), PerStep()], trainer=plain, max_epoch=1, steps_per_epoch=2)
    assert not [r for r in tb_log if r.getMessage().startswith("Hook timing")]
    # off: the per-step hooks are the plain loops over the callbacks' own methods
    bus = plain._bus
    assert all("_all_direct" in getattr(bus, h).__qualname__ for h in ("before_run", "after_run", "trigger_step"))
    assert bus.profile is None and bus.before_train is plain.plugin_manager.hook.before_train
