"""Startup does each piece of its work once: an ambient plugin that is a module is looked through
and guarded once per process (the contribution manager and every training's manager register the
same stand-in), a callback's hooks are worked out once per registration, the arity checks of a
callback class read the code object (and follow a decorator's ``__wrapped__`` as before), and the
input sources, the session initializers and pyzmq are imported when first used.

Counts and ``sys.modules``, never times: the times are ``bench/bench_startup.py``'s."""

from __future__ import annotations

import functools
import itertools
import json
import subprocess
import sys
import textwrap
import warnings

import pytest

from fakedist import make_dist, on_path
from trainbus.bus import manager
from trainbus.bus.manager import PluginWarning, TrainbusPluginManager
from trainbus.callbacks import Callback
from trainbus.callbacks import base as cbbase

AMBIENT = """
    import trainbus

    def _made():
        from trainbus.callbacks import Callback
        return Callback()

    @trainbus.hookimpl
    def default_callbacks():
        return [(55, _made)]

    @trainbus.hookimpl
    def trigger_epoch(trainer):
        raise ValueError("module plugin bug")

    class Plugin:
        @trainbus.hookimpl
        def default_monitors(self):
            return []
"""


@pytest.fixture
def ambient(tmp_path, monkeypatch):
    for switch in ("TRAINBUS_STRICT_PLUGINS", "TRAINBUS_DISABLE_PLUGIN_AUTOLOAD", "TRAINBUS_DISABLE_PLUGINS"):
        monkeypatch.delenv(switch, raising=False)
    root = make_dist(tmp_path / "site", "trainbus-once", "0.4",
                     {"trainbus.plugins": {"oncemod": "amb_once", "onceclass": "amb_once:Plugin"}},
                     {"amb_once": AMBIENT})
    manager._load_ambient_cached.cache_clear()
    with on_path(root):
        yield
    manager._load_ambient_cached.cache_clear()


def test_a_module_plugin_is_looked_through_once_and_every_manager_registers_its_stand_in(ambient, monkeypatch):
    looked = []
    guard = manager._guard
    monkeypatch.setattr(manager, "_guard", lambda pm, obj, who: looked.append(obj) or guard(pm, obj, who))
    first, second = TrainbusPluginManager(), TrainbusPluginManager()
    assert {"oncemod", "onceclass"} <= set(first.load_ambient()) & set(second.load_ambient())
    module = sys.modules["amb_once"]
    assert [x for x in looked if x is module] == [module]
    assert first.get_plugin("plugin:oncemod") is second.get_plugin("plugin:oncemod")
    # a plugin that is a class is made, and looked through, once per manager
    made = [x for x in looked if type(x).__name__ == "Plugin"]
    assert len(made) == 2 and made[0] is not made[1]
    assert first.get_plugin("plugin:onceclass")._target is made[0]
    assert second.get_plugin("plugin:onceclass")._target is made[1]
    # the shared stand-in works in both: its contribution is there, its errors are reported
    for pm in (first, second):
        assert [slot for answer in pm.hook.default_callbacks() for slot, _ in answer if slot == 55] == [55]
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            pm.hook.trigger_epoch(trainer=None)
        assert [str(x.message) for x in w if issubclass(x.category, PluginWarning)] == [
            "the trainbus plugin trainbus-once 0.4 (oncemod = amb_once) raised in trigger_epoch(): "
            "ValueError: module plugin bug; training goes on"]


def test_a_module_reloaded_after_the_cache_is_cleared_is_looked_through_again(ambient, monkeypatch):
    TrainbusPluginManager().load_ambient()
    before = TrainbusPluginManager()
    before.load_ambient()
    manager._load_ambient_cached.cache_clear()
    del sys.modules["amb_once"]
    after = TrainbusPluginManager()
    after.load_ambient()
    assert after.get_plugin("plugin:oncemod") is not before.get_plugin("plugin:oncemod")
    assert after.get_plugin("plugin:oncemod")._target is sys.modules["amb_once"]


class Counting(Callback):
    asked = 0

    def hooks_used(self):
        type(self).asked += 1
        return super().hooks_used()

    def _trigger_step(self):
        pass

    def _trigger(self):
        pass


def test_a_callbacks_hooks_are_worked_out_once_per_registration():
    cb = Counting()
    Counting.asked = 0
    pm = TrainbusPluginManager()
    pm.register_ordered([cb])
    # once for the adapters, once for what to register; not once per attribute (about 80)
    assert Counting.asked == 2
    assert [i.plugin for i in pm.hook.trigger_step.get_hookimpls()] == [cb]
    assert [i.plugin for i in pm.hook.trigger_epoch.get_hookimpls()] == [cb]
    assert pm.hook.before_run.get_hookimpls() == []
    Counting.asked = 0
    pm.drop(cb, ["trigger_step"])
    assert Counting.asked == 2
    assert pm.hook.trigger_step.get_hookimpls() == []
    assert [i.plugin for i in pm.hook.trigger_epoch.get_hookimpls()] == [cb]


def test_the_arity_read_from_the_code_is_the_signatures(monkeypatch):
    shapes = 0
    for pos, rest in itertools.product(
            ["", "self", "self, a", "self, a=1", "self, a, b=2", "a=1, b=2", "self, /, a", "self, a, /, b=3", "a, /"],
            ["", "*args", "*, k", "*, k=1", "*args, k", "*args, k=2, j", "**kw", "*args, **kw"]):
        ns: dict = {}
        exec(f"def f({', '.join(x for x in (pos, rest) if x)}): pass", ns)
        for drop_first in (True, False):  # a method (self first) or a static method
            assert cbbase._code_arity(ns["f"], drop_first) == cbbase._signature_arity(ns["f"], drop_first), \
                (pos, rest, drop_first)
            shapes += 1
    assert shapes == 144
    # a plain function is read from its code; a wrapper, whose signature inspect takes from
    # ``__wrapped__``, by inspect
    asked = []
    by_signature = cbbase._signature_arity
    monkeypatch.setattr(cbbase, "_signature_arity", lambda fn, drop: asked.append(fn) or by_signature(fn, drop))

    def method(self, a, *, k):
        pass

    assert cbbase._positional_arity(method) == (1, 1, ["k"]) and asked == []
    wrapper = functools.wraps(method)(lambda *args, **kwargs: None)
    assert cbbase._positional_arity(wrapper) == (1, 1, ["k"]) and asked == [wrapper]


def test_a_decorated_method_is_checked_by_the_signature_it_wraps():
    def passthrough(f):
        @functools.wraps(f)
        def call(*args, **kwargs):
            return f(*args, **kwargs)
        return call

    with pytest.raises(TypeError, match=r"_before_run\(\) takes 0 argument\(s\) besides self, but trainbus calls "
                                        r"it with 1: expected def _before_run\(self, ctx\)"):
        class Wrong(Callback):
            @passthrough
            def _before_run(self):
                pass

    class Right(Callback):
        @passthrough
        def _before_run(self, ctx):
            return None

    assert "before_run" in Right().hooks_used()


def test_the_input_sources_session_initializers_and_pyzmq_are_imported_on_first_use():
    code = textwrap.dedent("""
        import json, sys
        import trainbus.input_source, trainbus_sessinit
        import trainbus_dataflow.parallel, trainbus_dataflow.parallel_map, trainbus_dataflow.remote
        loaded = sorted(m for m in sys.modules if m.startswith(("trainbus.input_source.", "trainbus_sessinit.")))
        print(json.dumps({"loaded": loaded, "tf": "tensorflow" in sys.modules, "zmq": "zmq" in sys.modules,
                          "push": trainbus_dataflow.parallel.zmq.PUSH, "zmq_now": "zmq" in sys.modules}))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    import zmq

    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"loaded": [], "tf": False, "zmq": False,
                                                                "push": zmq.PUSH, "zmq_now": True}

    import trainbus.input_source as inp
    import trainbus_sessinit

    star: dict = {}
    exec("from trainbus.input_source import *", star)
    assert set(inp.__all__) <= star.keys() and len(inp.__all__) == 14
    assert star["QueueInput"] is inp.queue.QueueInput and star["FeedInput"] is inp.feed.FeedInput
    assert star["ZMQInput"].__module__ == "trainbus.input_source.zmq"
    with pytest.raises(ImportError, match="did you mean 'QueueInput'"):
        exec("from trainbus.input_source import QueueInptu", {})
    assert not hasattr(inp, "NoSuchSource")
    from trainbus_sessinit import _smart

    assert trainbus_sessinit.get_model_loader is trainbus_sessinit.SmartInit is _smart.SmartInit
    assert trainbus_sessinit.verify_checkpoint.__module__ == "trainbus_sessinit._verify"
    assert set(trainbus_sessinit.__all__) <= set(dir(trainbus_sessinit))
    with pytest.raises(AttributeError, match="has no attribute 'SmartInt'"):
        trainbus_sessinit.SmartInt


def test_the_hook_specifications_are_read_once_per_process(monkeypatch):
    import pluggy

    TrainbusPluginManager()
    read = []
    parse = pluggy.PluginManager.parse_hookspec_opts
    monkeypatch.setattr(pluggy.PluginManager, "parse_hookspec_opts",
                        lambda self, spec, name: read.append(name) or parse(self, spec, name))
    pm = TrainbusPluginManager()
    assert read == []
    # every hook still has its specification, with its arguments
    assert pm.hook.after_run.spec.argnames == ("trainer", "run_context", "run_values")
    assert pm.hook.sessinit_for.spec.opts["firstresult"] is True
    assert {"before_run", "trigger_step", "process_scalar", "default_callbacks", "sessinit_for"} <= set(vars(pm.hook))


class Stepper(Callback):
    def __init__(self, tag, log):
        self.tag, self.log = tag, log

    def _trigger_step(self):
        self.log.append(self.tag)

    def _trigger(self):
        self.log.append(self.tag)

    def __str__(self):
        return self.tag


def test_a_drop_registers_again_only_the_members_up_to_the_last_that_dropped():
    log = []
    a, b, c, d = (Stepper(t, log) for t in "abcd")
    pm = TrainbusPluginManager()
    pm.register_ordered([a, b, c, d])

    def impls(hook):
        return {i.plugin: i for i in getattr(pm.hook, hook).get_hookimpls()}

    before = impls("trigger_epoch")
    pm.drop(b, ["trigger_step"])
    after = impls("trigger_epoch")
    assert after[c] is before[c] and after[d] is before[d]  # registered before b: kept
    assert after[a] is not before[a] and after[b] is not before[b]
    with pm.deferring_drops():
        pm.drop(a, ["trigger_epoch"])
        pm.drop(c, ["trigger_step"])
    assert impls("trigger_epoch")[d] is before[d]
    pm.hook.trigger_step(trainer=None)
    pm.hook.trigger_epoch(trainer=None)
    assert log == ["a", "d", "b", "c", "d"]  # every hook in the members' order, without the dropped ones
    assert pm.describe_hooks(["trigger_step", "trigger_epoch"]) == (
        "trigger_step: callback[0]:a -> callback[3]:d\n"
        "trigger_epoch: callback[1]:b -> callback[2]:c -> callback[3]:d")
