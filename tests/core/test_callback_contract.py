"""The Callback contract and the faults the trainer must handle (issue: bad input and faults)."""

import threading

import pytest
import tensorflow as tf

from trainbus.callbacks import Callback, CallbackFactory, Callbacks, MonitorBase, ProxyCallback
from trainbus.testing import HookRecorder, train_tiny, tiny_dataflow
from trainbus.train import StopTraining


def test_overriding_public_hook_is_type_error_naming_class_and_fix():
    with pytest.raises(TypeError) as ei:
        class Bad(Callback):
            def trigger_epoch(self):
                pass
    msg = str(ei.value)
    assert "Bad" in msg and "trigger_epoch" in msg and "_trigger_epoch" in msg


def test_overriding_trigger_is_rejected_too():
    with pytest.raises(TypeError, match="_trigger"):
        class Bad2(Callback):
            def trigger(self):
                pass


def test_non_callback_in_callbacks_is_type_error_naming_it():
    with pytest.raises(TypeError) as ei:
        train_tiny([HookRecorder(), "not a callback"])
    assert "'not a callback'" in str(ei.value)


def test_class_instead_of_instance_hint():
    with pytest.raises(TypeError, match="pass an instance"):
        train_tiny([HookRecorder])


def test_register_callback_after_training_started_raises():
    late = []

    class Registrar(Callback):
        def _before_train(self):
            try:
                self.trainer.register_callback(HookRecorder())
            except RuntimeError as e:
                late.append(str(e))

    train_tiny([Registrar()], max_epoch=1, steps_per_epoch=1)
    assert late and "after the callbacks were set up" in late[0]


def test_no_steps_per_epoch_and_dataflow_without_len_is_clear_error():
    from trainbus.testing import generator_dataflow

    def gen():
        yield from tiny_dataflow()

    with pytest.raises(ValueError, match="steps_per_epoch"):
        train_tiny([], dataflow=generator_dataflow(gen))


def test_exception_in_callback_runs_every_after_train_and_names_callback():
    recs = [HookRecorder("a"), HookRecorder("b")]

    class Exploder(Callback):
        def _trigger_step(self):
            if self.global_step == 3:
                raise ValueError("kaboom")

    threads_before = set(threading.enumerate())
    with pytest.raises(ValueError, match="kaboom") as ei:
        train_tiny([recs[0], Exploder(), recs[1]], max_epoch=3, feed=False)  # QueueInput: a real input thread
    notes = " ".join(getattr(ei.value, "__notes__", []))
    assert "Exploder" in notes and "trigger_step" in notes
    for r in recs:
        assert r.hooks()[-1] == "after_train"
    leftover = [t for t in threading.enumerate() if t not in threads_before and t.is_alive()]
    assert not [t for t in leftover if "Enqueue" in t.name], leftover


def test_exception_in_step_propagates_and_session_is_closed():
    from trainbus.train import SimpleTrainer

    class Boom(SimpleTrainer):
        def run_step(self):
            if self.global_step >= 2:
                raise RuntimeError("step failed")
            super().run_step()

    rec = HookRecorder()
    tr = Boom()
    with pytest.raises(RuntimeError, match="step failed"):
        train_tiny([rec], trainer=tr, max_epoch=2)
    assert rec.hooks()[-1] == "after_train"
    assert tr.sess._closed


def test_after_train_errors_do_not_stop_other_after_trains_and_are_raised():
    class BadFinal(Callback):
        def _after_train(self):
            raise OSError("cannot flush")

    rec = HookRecorder()
    with pytest.raises(OSError, match="cannot flush"):
        train_tiny([BadFinal(), rec], max_epoch=1)
    assert rec.hooks()[-1] == "after_train"


def test_keyboard_interrupt_behaves_like_an_error():
    class CtrlC(Callback):
        def _trigger_epoch(self):
            raise KeyboardInterrupt()

    rec = HookRecorder()
    with pytest.raises(KeyboardInterrupt):
        train_tiny([CtrlC(), rec], max_epoch=3)
    # interrupted in epoch 1 before `rec` got its trigger; it was still finalized
    assert rec.hooks()[-1] == "after_train" and rec.hooks().count("trigger_epoch") == 0


def test_stop_training_ends_cleanly():
    class Stopper(Callback):
        def _trigger(self):
            if self.epoch_num == 2:
                raise StopTraining("enough")

    rec = HookRecorder()
    tr = train_tiny([Stopper(), rec], max_epoch=5)
    assert tr.epoch_num == 2 and rec.hooks()[-1] == "after_train"


def test_request_stop_from_run_context():
    class Req(Callback):
        def _after_run(self, ctx, values):
            if self.global_step == 3:
                ctx.request_stop()

    rec = HookRecorder()
    tr = train_tiny([Req(), rec], max_epoch=5)
    assert tr.global_step == 3 and rec.hooks()[-1] == "after_train"


def test_monitor_in_callbacks_is_rejected():
    class M(MonitorBase):
        def process_scalar(self, name, val):
            pass

    with pytest.raises(TypeError, match="monitors="):
        train_tiny([M()])


def test_chief_only_filtering_on_non_chief():
    from trainbus.train import SimpleTrainer

    tr = SimpleTrainer()
    tr.is_chief = False
    chief = HookRecorder("chief")
    everyone = HookRecorder("all").set_chief_only(False)
    train_tiny([chief, everyone], trainer=tr, max_epoch=1)
    assert chief.events == [] and everyone.hooks()[-1] == "after_train"
    assert Callback().chief_only is True and everyone.chief_only is False


def test_callback_state_properties_and_name_scope():
    seen = {}

    class Probe(Callback):
        name_scope = "probe_scope"

        def _setup_graph(self):
            self.t = tf.constant(1.0, name="c")
            seen["graph_is_trainer_graph"] = self.graph is self.trainer.graph

        def _trigger_epoch(self):
            seen.setdefault("epochs", []).append((self.epoch_num, self.global_step, self.local_step))

    p = Probe()
    train_tiny([p], max_epoch=2, steps_per_epoch=3)
    assert p.t.name.startswith("probescope/c")
    assert seen == {"graph_is_trainer_graph": True, "epochs": [(1, 3, 2), (2, 6, 2)]}


def test_get_tensors_maybe_in_tower_and_before_run_with_names():
    vals = []

    class Fetch(Callback):
        def _setup_graph(self):
            self.cost = self.get_tensors_maybe_in_tower(["cost"])[0]

        def _before_run(self, ctx):
            return ["cost", "accuracy:0"]

        def _after_run(self, ctx, v):
            vals.append(v.results)

    f = Fetch()
    train_tiny([f], max_epoch=1, steps_per_epoch=2)
    assert f.cost.name == "cost:0"
    assert len(vals) == 2 and all(len(r) == 2 and 0 <= r[1] <= 1 for r in vals)
    with pytest.raises(KeyError, match="no tensor named 'nope'"):
        class Missing(Callback):
            def _setup_graph(self):
                self.get_tensors_maybe_in_tower(["nope"])

        train_tiny([Missing()], max_epoch=1)


def test_callback_factory_and_proxy_and_callbacks_group():
    log = []
    fac = CallbackFactory(setup_graph=lambda s: log.append("sg"), before_train=lambda s: log.append("bt"),
                          trigger=lambda s: log.append(("t", s.epoch_num)), after_train=lambda s: log.append("at"))
    inner = HookRecorder("inner")
    group_a, group_b = HookRecorder("ga"), HookRecorder("gb", fetch=["cost"])
    train_tiny([fac, ProxyCallback(inner), Callbacks([group_a, group_b])], max_epoch=2, steps_per_epoch=1)
    assert log == ["sg", "bt", ("t", 1), ("t", 2), "at"]
    assert inner.hooks() == group_a.hooks()
    assert float(group_b.last_values.results[0]) > 0
    with pytest.raises(TypeError):
        CallbackFactory(trigger=3)


def test_one_session_run_per_step():
    seen = []

    class Count(Callback):
        def _before_run(self, ctx):
            return ["cost"]

        def _trigger(self):
            seen.append(len(self.trainer.hooked_sess._callables))

    train_tiny([Count(), HookRecorder(fetch=["accuracy"])], max_epoch=2, steps_per_epoch=4)
    # one cached callable served every step: the step, both fetches, the feed and the step counter together
    assert seen == [1, 1]


def test_global_step_variable_tracks_hooked_runs():
    from trainbus.tfutils.common import get_global_step_value

    got = []

    class Read(Callback):
        def _trigger(self):
            got.append((self.global_step, get_global_step_value()))

    train_tiny([Read()], max_epoch=2, steps_per_epoch=3)
    assert got == [(3, 3), (6, 6)]
