"""A Callback or MonitorBase subclass may name the parameters of the methods it overrides as it
likes (even ``self``): trainbus passes the values by position, as tensorpack does. The bus
registers an adapter carrying the hook's own names only for the methods that need one."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from trainbus.callbacks import Callback
from trainbus.callbacks.monitor import MonitorBase
from trainbus.testing import train_tiny

tf1 = tf.compat.v1

EPOCHS, STEPS = 2, 3


class Putter(Callback):
    """Puts one scalar, one image, one summary and one event to the monitors after each epoch."""

    def _trigger(self):
        m = self.trainer.monitors
        m.put_scalar("answer", 42.0 + self.epoch_num)
        m.put_image("pic", np.full((2, 2, 3), 7, dtype="uint8"))
        s = tf1.Summary()
        s.value.add(tag="raw", simple_value=float(self.epoch_num))
        m.put_summary(s)
        m.put_event(tf1.Event(file_version="renamed-test"))


def _callback_case(method: str):
    """A callback overriding only ``method``, with renamed parameters; returns (callback, calls)."""
    calls: list = []

    def where(me):
        return (me.epoch_num, me.global_step, me.local_step)

    if method == "_setup_graph":
        class C(Callback):
            def _setup_graph(this):
                calls.append((this.graph is tf1.get_default_graph(), this.graph.finalized))
    elif method == "_before_run":
        class C(Callback):
            def _before_run(this, c):
                calls.append((type(c).__name__, where(this)))
                return tf1.train.SessionRunArgs(fetches=tf1.train.get_global_step())
    elif method == "_after_run":
        class C(Callback):
            def _before_run(me, context):
                return [tf1.train.get_global_step()]

            def _after_run(this, c, v):
                calls.append((type(c).__name__, v.results[0], this.global_step))
    else:
        body = {method: lambda this: calls.append(where(this))}
        C = type("C", (Callback,), body)
    return C(), calls


def _expected_callback_calls(method: str) -> list:
    steps = [(ep, (ep - 1) * STEPS + ls + 1, ls) for ep in range(1, EPOCHS + 1) for ls in range(STEPS)]
    ends = [(ep, ep * STEPS, STEPS - 1) for ep in range(1, EPOCHS + 1)]
    return {
        "_setup_graph": [(True, False)],
        "_before_train": [(0, 0, -1)],
        "_before_epoch": [(ep, (ep - 1) * STEPS, -1 if ep == 1 else STEPS - 1) for ep in range(1, EPOCHS + 1)],
        "_before_run": [("SessionRunContext", (ep, gs - 1, ls)) for ep, gs, ls in steps],
        # the global step is fetched in the same run that increments it
        "_after_run": [("SessionRunContext", gs - 1, gs) for ep, gs, ls in steps],
        "_trigger_step": steps,
        "_after_epoch": ends,
        "_trigger_epoch": ends,
        "_trigger": ends,
        "_after_train": [(EPOCHS, EPOCHS * STEPS, STEPS - 1)],
    }[method]


CALLBACK_METHODS = ["_setup_graph", "_before_train", "_before_epoch", "_before_run", "_after_run", "_trigger_step",
                    "_after_epoch", "_trigger_epoch", "_trigger", "_after_train"]


@pytest.mark.parametrize("method", CALLBACK_METHODS)
def test_callback_method_with_renamed_parameters(method):
    cb, calls = _callback_case(method)
    train_tiny([cb], max_epoch=EPOCHS, steps_per_epoch=STEPS)
    assert calls == _expected_callback_calls(method)


def _monitor_case(method: str):
    calls: list = []
    if method == "process_scalar":
        class M(MonitorBase):
            def process_scalar(this, val, name):  # swapped names: values still arrive by position
                calls.append((val, name, this.global_step))
    elif method == "process_image":
        class M(MonitorBase):
            def process_image(this, tag, images):
                calls.append((tag, images.shape, int(images.max())))
    elif method == "process_summary":
        class M(MonitorBase):
            def process_summary(this, s):
                calls.append(sorted(v.tag for v in s.value))
    elif method == "process_event":
        class M(MonitorBase):
            def process_event(this, e):
                calls.append((e.file_version, e.step))
    else:  # the generic process(), reached through the default process_scalar/process_image
        class M(MonitorBase):
            def process(this, key, value):
                calls.append((key, value if np.isscalar(value) else np.shape(value)))
    return M(), calls


MONITOR_EXPECTED = {
    "process_scalar": [("answer", 43.0, 3), ("raw", 1.0, 3), ("answer", 44.0, 6), ("raw", 2.0, 6)],
    "process_image": [("pic", (1, 2, 2, 3), 7)] * 2,
    # put_scalar and put_image make a summary each, then the summary put directly
    "process_summary": [["answer"], ["pic"], ["raw"]] * 2,
    "process_event": [("renamed-test", 3), ("renamed-test", 6)],
    "process": [("answer", 43.0), ("pic", (1, 2, 2, 3)), ("raw", 1.0),
                ("answer", 44.0), ("pic", (1, 2, 2, 3)), ("raw", 2.0)],
}


@pytest.mark.parametrize("method", sorted(MONITOR_EXPECTED))
def test_monitor_method_with_renamed_parameters(method):
    mon, calls = _monitor_case(method)
    tr = train_tiny([Putter()], monitors=[mon], max_epoch=EPOCHS, steps_per_epoch=STEPS)
    assert calls == MONITOR_EXPECTED[method]
    # the scalar history of the hub is unaffected
    assert tr.monitors.get_history("answer") == [(3, 43.0), (6, 44.0)]


def test_adapters_only_for_renamed_methods():
    from trainbus.bus.manager import _ADAPTER_PREFIX, TrainbusPluginManager

    class Spec(MonitorBase):
        def process_scalar(self, name, val):
            pass

    class Renamed(MonitorBase):
        def process_scalar(self, tag, value):
            pass

        def process_event(self, evt):
            pass

    pm = TrainbusPluginManager()
    spec, renamed = Spec(), Renamed()
    pm.register_ordered([spec, renamed])
    impls = pm.hook.process_scalar.get_hookimpls()
    # the method itself where the names are the hook's, an adapter with the hook's names otherwise
    assert [i.function for i in impls] == [renamed.__dict__[_ADAPTER_PREFIX + "process_scalar"], spec.process_scalar]
    assert impls[0].argnames == ("name", "val")
    assert not any(k.startswith(_ADAPTER_PREFIX) for k in vars(spec))
    assert [i.function for i in pm.hook.process_event.get_hookimpls()] == [renamed.process_event]


def test_adapters_carry_the_hook_spec_names():
    from pluggy._hooks import varnames

    from trainbus.bus.manager import _ADAPTERS, TrainbusPluginManager

    pm = TrainbusPluginManager()
    for hook, make in _ADAPTERS.items():
        spec_names = tuple(a for a in getattr(pm.hook, hook).spec.argnames if a != "trainer")
        assert varnames(make(print))[0] == spec_names, hook


@pytest.mark.parametrize("base, method, params, expected", [
    (Callback, "_before_run", "(self)", "def _before_run(self, ctx)"),
    (Callback, "_after_run", "(self, ctx)", "def _after_run(self, run_context, run_values)"),
    (Callback, "_trigger_step", "(self, extra)", "def _trigger_step(self)"),
    (Callback, "_trigger", "(self, a, b=1, *, c)", "def _trigger(self)"),
    (Callback, "_load_state_dict", "(self)", "def _load_state_dict(self, state)"),
    (MonitorBase, "process_summary", "(self, summary, extra)", "def process_summary(self, summary)"),
    (MonitorBase, "process_scalar", "(self, only_one)", "def process_scalar(self, name, val)"),
    (MonitorBase, "process", "(self)", "def process(self, name, val)"),
])
def test_wrong_number_of_parameters_is_a_clear_error(base, method, params, expected):
    ns: dict = {}
    exec(f"def {method}{params}:\n    pass", ns)  # noqa: S102 - a method with the given signature
    with pytest.raises(TypeError) as info:
        type("Wrong", (base,), {method: ns[method], "__module__": "mymod"})
    msg = str(info.value)
    assert f"mymod.Wrong.{method}()" in msg
    assert f"expected {expected}" in msg
    assert "any names" in msg


@pytest.mark.parametrize("params", ["(self, a, b)", "(self, *args)", "(self, a, b, c=None)", "(self, *a, **kw)",
                                    "(me, c, v)"])
def test_compatible_signatures_are_accepted(params):
    ns: dict = {}
    exec(f"def _after_run{params}:\n    pass", ns)  # noqa: S102
    type("Fine", (Callback,), {"_after_run": ns["_after_run"]})
