"""The dispatcher (``trainbus.bus.dispatch``): every per-step hook compiled from pluggy's order and
the members' declared direct methods, the failing member named without reading a frame, the
trainer's loop counters advanced only by their owner, and what the trainer says it is doing."""

import pytest
import tensorflow as tf

import trainbus
from trainbus.bus.dispatch import Bus, compile_hook, member_method, origin_of
from trainbus.bus.manager import TrainbusPluginManager
from trainbus.callbacks import Callback
from trainbus.callbacks.run_values import RunValuesByRequester
from trainbus.train.base import TrainLoop

tf1 = tf.compat.v1


class Rec(Callback):
    def __init__(self, tag, log, answer=None, fail=None):
        self.tag, self.log, self.answer, self.fail = tag, log, answer, fail

    def _before_run(self, ctx):
        self.log.append(("before_run", self.tag, ctx))
        if self.fail == "before_run":
            raise RuntimeError(f"{self.tag} broke")
        return self.answer

    def _after_run(self, ctx, values):
        self.log.append(("after_run", self.tag, values.results))
        if self.fail == "after_run":
            raise ValueError(f"{self.tag} broke")

    def _trigger_step(self):
        self.log.append(("trigger_step", self.tag))
        if self.fail == "trigger_step":
            raise KeyError(self.tag)


class Ambient:
    """An ambient plugin: plain hook implementations, one of them first by ``tryfirst``."""

    def __init__(self, log):
        self.log = log

    @trainbus.hookimpl(tryfirst=True)
    def before_run(self, run_context):
        self.log.append(("before_run", "ambient", run_context))
        return ("ambient", tf1.train.SessionRunArgs(fetches=[]))

    @trainbus.hookimpl
    def after_run(self, trainer, run_values):
        self.log.append(("after_run", "ambient", trainer))


def _bus(members, ambient=None):
    pm = TrainbusPluginManager()
    if ambient is not None:
        pm.register(ambient, name="plugin:ambient")
    pm.register_ordered(members)
    return pm, Bus(pm)


def _values(requests, results):
    return RunValuesByRequester.pack(requests, results, None, None)


def test_callbacks_alone_are_dispatched_to_their_underscore_methods_in_order():
    log = []
    t = tf.constant(1.0)
    a, b, c = Rec("a", log, answer=t), Rec("b", log), Rec("c", log, answer=[t])
    pm, bus = _bus([a, b, c])
    for hook in ("before_run", "after_run", "trigger_step"):
        assert "_all_direct" in getattr(bus, hook).__qualname__  # the member's own methods, no wrapper
    requests = bus.before_run("T", "ctx")
    assert [r for r, _ in requests] == [a, c]
    assert requests[0][1].fetches is t and requests[1][1].fetches == [t]  # Callback.run_request made them
    bus.after_run("T", "ctx", _values(requests, [1.0, [2.0]]))
    bus.trigger_step(trainer="T")
    assert log == [("before_run", "a", "ctx"), ("before_run", "b", "ctx"), ("before_run", "c", "ctx"),
                   ("after_run", "a", 1.0), ("after_run", "b", None), ("after_run", "c", [2.0]),
                   ("trigger_step", "a"), ("trigger_step", "b"), ("trigger_step", "c")]


def test_a_mix_with_an_ambient_plugin_keeps_pluggys_order_and_results():
    log = []
    t = tf.constant(2.0)
    a, b = Rec("a", log, answer=t), Rec("b", log)
    amb = Ambient(log)
    pm, bus = _bus([a, b], ambient=amb)
    assert "_all_direct" not in bus.before_run.__qualname__
    requests = bus.before_run("T", "ctx")
    assert [r for r, _ in requests] == ["ambient", a]
    bus.after_run("T", "ctx", _values(requests, [[], 5.0]))
    compiled = list(log)
    log.clear()
    by_pluggy = pm.hook.before_run(trainer="T", run_context="ctx")
    pm.hook.after_run(trainer="T", run_context="ctx", run_values=_values(by_pluggy, [[], 5.0]))
    assert [r for r, _ in by_pluggy] == ["ambient", a]
    assert log == compiled == [("before_run", "ambient", "ctx"), ("before_run", "a", "ctx"), ("before_run", "b", "ctx"),
                               ("after_run", "a", 5.0), ("after_run", "b", None), ("after_run", "ambient", "T")]


@pytest.mark.parametrize("hook", ["before_run", "after_run", "trigger_step"])
@pytest.mark.parametrize("with_ambient", [False, True], ids=["callbacks", "mixed"])
def test_the_failing_member_is_named_by_the_dispatcher(hook, with_ambient):
    log = []
    a, bad, c = Rec("a", log), Rec("bad", log, fail=hook), Rec("c", log)
    pm, bus = _bus([a, bad, c], ambient=Ambient(log) if with_ambient else None)
    with pytest.raises(Exception) as ei:
        if hook == "before_run":
            bus.before_run("T", "ctx")
        elif hook == "after_run":
            bus.after_run("T", "ctx", _values((), []))
        else:
            bus.trigger_step(trainer="T")
    assert origin_of(ei.value) == (bad, hook)
    assert any(f"raised in callback Rec ({__name__}.Rec) during {hook}()" in n for n in ei.value.__notes__)
    assert (hook, "c") not in [e[:2] for e in log]  # the members after it were not called


def test_traced_hooks_go_through_pluggy_and_still_name_the_member(monkeypatch):
    monkeypatch.setenv("TRAINBUS_TRACE_HOOKS", "1")
    log = []
    bad = Rec("bad", log, fail="after_run")
    pm, bus = _bus([Rec("a", log), bad])
    assert bus.trigger_step.__name__ == "through_pluggy"
    bus.trigger_step(trainer="T")
    assert log == [("trigger_step", "a"), ("trigger_step", "bad")]
    with pytest.raises(ValueError) as ei:
        bus.after_run("T", "ctx", _values((), []))
    assert origin_of(ei.value) == (bad, "after_run")


def test_a_member_is_called_directly_only_when_its_hook_method_is_the_buss_own():
    """A member declaring a direct method but implementing the hook itself gets its hook method
    called (what pluggy would do); one using ``member_method`` gets its direct method called."""
    log = []

    class Own:
        hook_direct_methods = {"trigger_step": "_step"}

        def hooks_used(self):
            return frozenset({"trigger_step"})

        @trainbus.hookimpl
        def trigger_step(self):
            log.append("own trigger_step")

        def _step(self):
            log.append("own _step")

    class UsesTheBus:
        hook_direct_methods = {"trigger_step": "_step"}
        trigger_step = member_method("trigger_step", "_step")

        def hooks_used(self):
            return frozenset({"trigger_step"})

        def _step(self):
            log.append("bus _step")

    pm = TrainbusPluginManager()
    pm.register_ordered([Own(), UsesTheBus()])
    compile_hook(pm.hook.trigger_step)(trainer=None)
    assert log == ["own trigger_step", "bus _step"]


def test_nobody_implementing_a_per_step_hook_binds_none():
    class Idle(Callback):
        def _trigger(self):
            pass

    pm, bus = _bus([Idle()])
    assert bus.before_run is bus.after_run is bus.trigger_step is None


def test_the_loop_counters_are_read_only_and_advanced_by_their_owner():
    loop = TrainLoop()
    loop.config(steps_per_epoch=3, starting_epoch=2, max_epoch=3)
    assert (loop.epoch_num, loop.global_step, loop.local_step) == (1, 0, -1)
    with pytest.raises(AttributeError):
        loop.global_step = 5
    loop.set_global_step(3)
    seen = []
    for epoch in loop.epochs():
        for step in loop.steps(1 if epoch == 2 else 0):
            loop.advance_step()
            seen.append((loop.epoch_num, loop.local_step, loop.global_step))
    assert seen == [(2, 1, 4), (2, 2, 5), (3, 0, 6), (3, 1, 7), (3, 2, 8)]


def test_the_trainer_says_what_it_is_doing_while_it_sets_up(logdir):
    """``Trainer.setup_phase``: what the handlers of ``interrupts_before_training`` report (no
    stack frame is read for it)."""
    from trainbus.testing import train_tiny
    from trainbus.tfutils.sesscreate import NewSessionCreator
    from trainbus.tfutils.sessinit import JustCurrentSession
    from trainbus.train._signals import _Setup

    seen = {}

    class Creator(NewSessionCreator):
        def create_session(self):
            seen["create_session"] = trainer.setup_phase
            return super().create_session()

    class Init(JustCurrentSession):
        def _run_init(self, sess):
            seen["session_init"] = trainer.setup_phase
            seen["reported"] = _Setup(trainer, None).describe()
            super()._run_init(sess)

    class Phase(Callback):
        def _setup_graph(self):
            seen["setup_graph"] = self.trainer.setup_phase

        def _before_train(self):
            seen["before_train"] = self.trainer.setup_phase

    from trainbus.train import SimpleTrainer

    trainer = SimpleTrainer()
    real_train = trainer.train

    def train(callbacks, monitors, session_creator, session_init, *args, **kwargs):
        return real_train(callbacks, monitors, Creator(), Init(), *args, **kwargs)

    trainer.train = train
    train_tiny(callbacks=[Phase()], trainer=trainer, max_epoch=1, steps_per_epoch=1)
    assert seen == {"setup_graph": "setting up the callbacks", "create_session": "creating the session",
                    "session_init": "initializing the session", "reported": "initializing the session",
                    "before_train": None}
