"""HookToCallback, CallbackToHook, TFLocalCLIDebugHook."""

from __future__ import annotations

import glob

import numpy as np
import pytest
import tensorflow as tf

import trainbus
from trainbus.callbacks import Callback
from trainbus.testing import train_tiny

tf1 = tf.compat.v1
cbs = trainbus.callbacks


class LifecycleHook(tf1.train.SessionRunHook):
    def __init__(self, stop_at=None):
        self.calls = []
        self.stop_at = stop_at
        self.costs = []

    def begin(self):
        g = tf1.get_default_graph()
        self.calls.append(("begin", g.finalized))
        self._double = tf.multiply(g.get_tensor_by_name("cost:0"), 2.0, name="double_cost")

    def after_create_session(self, session, coord):
        self.calls.append(("after_create_session", session, coord))

    def before_run(self, run_context):
        self.calls.append("before_run")
        return tf1.train.SessionRunArgs({"cost": "cost:0", "double": self._double})

    def after_run(self, run_context, run_values):
        self.calls.append("after_run")
        self.costs.append(run_values.results)
        if self.stop_at is not None and len(self.costs) == self.stop_at:
            run_context.request_stop()

    def end(self, session):
        self.calls.append(("end", session.graph.finalized))
        g = session.graph
        feed = {g.get_tensor_by_name("x:0"): np.zeros((2, 4), "f"), g.get_tensor_by_name("y:0"): np.zeros(2, "i")}
        self.end_value = session.run(self._double, feed)


def test_hook_to_callback_full_lifecycle(logdir):
    hook = LifecycleHook()
    cb = cbs.HookToCallback(hook)
    assert cb.hook is hook and not cb.chief_only
    tr = train_tiny(callbacks=[cb], max_epoch=2)
    assert hook.calls[0] == ("begin", False)  # begin runs before the graph is finalized
    name, sess, coord = hook.calls[1]
    assert name == "after_create_session" and sess is tr.sess and coord is None
    assert hook.calls[2:-1] == ["before_run", "after_run"] * 16
    assert hook.calls[-1] == ("end", True)
    assert len(hook.costs) == 16
    for r in hook.costs:
        assert r["double"] == pytest.approx(2 * r["cost"])
    assert hook.costs[0]["cost"] == pytest.approx(np.log(3), rel=1e-5)
    assert np.isfinite(hook.end_value)  # end() got a usable session


def test_hook_request_stop_stops_training(logdir):
    hook = LifecycleHook(stop_at=5)
    tr = train_tiny(callbacks=[cbs.HookToCallback(hook)], max_epoch=3)
    assert tr.global_step == 5 and len(hook.costs) == 5
    assert hook.calls[-1][0] == "end"


def test_tf_step_counter_and_logging_tensor_hooks_run_unchanged(logdir, tmp_path):
    out = tmp_path / "stepcounter"
    logged = []

    def formatter(values):
        logged.append(dict(values))
        return "logged"

    counter = tf1.train.StepCounterHook(every_n_steps=4, output_dir=str(out))
    logging_hook = tf1.train.LoggingTensorHook({"cost": "cost:0"}, every_n_iter=4, formatter=formatter)
    train_tiny(callbacks=[cbs.HookToCallback(counter), cbs.HookToCallback(logging_hook)], max_epoch=2)
    tf1.summary.FileWriterCache.get(str(out)).flush()
    rates = []
    for path in glob.glob(str(out / "events.out.tfevents.*")):
        for e in tf1.train.summary_iterator(path):
            for v in e.summary.value:
                if v.tag == "global_step/sec":
                    rates.append((e.step, v.simple_value))
    assert len(rates) >= 2 and all(r > 0 for _, r in rates)
    assert len(logged) == 4  # iterations 0, 4, 8, 12
    assert logged[0]["cost"] == pytest.approx(np.log(3), rel=1e-5)


class Fetcher(Callback):
    def __init__(self, tensor=None):
        self.tensor = tensor
        self.results = []

    def _before_run(self, ctx):
        return self.tensor

    def _after_run(self, ctx, run_values):
        self.results.append(run_values.results)


def test_callback_to_hook_forwards_before_and_after_run():
    g = tf.Graph()
    with g.as_default():
        step = tf1.train.get_or_create_global_step()
        incr = tf1.assign_add(step, 1)
        doubled = tf.identity(step * 2, name="doubled")
        fetcher = Fetcher(doubled)
        silent = Fetcher(None)
        hook = cbs.CallbackToHook(fetcher)
        assert isinstance(hook, tf1.train.SessionRunHook) and hook.callback is fetcher
        with tf1.train.MonitoredSession(hooks=[hook, cbs.CallbackToHook(silent)]) as sess:
            for _ in range(3):
                sess.run(incr)
    # the value of the callback's fetch in the same run as each increment
    assert len(fetcher.results) == 3 and all(int(v) % 2 == 0 for v in fetcher.results)
    assert silent.results == [None, None, None]
    with pytest.raises(TypeError, match="trainbus Callback"):
        cbs.CallbackToHook(object())


def test_tf_local_cli_debug_hook_construction_and_filters():
    from tensorflow.python import debug as tf_debug

    cb = cbs.TFLocalCLIDebugHook(ui_type="readline")
    assert isinstance(cb, cbs.HookToCallback)
    assert isinstance(cb.hook, tf_debug.LocalCLIDebugHook)
    assert cb.hook._ui_type == "readline"
    cb.add_tensor_filter("has_inf_or_nan", tf_debug.has_inf_or_nan)
    cb.add_tensor_filter(filter_name="big", tensor_filter=lambda datum, tensor: np.abs(tensor).max() > 1e3)
    filters = cb.hook._pending_tensor_filters
    assert filters["has_inf_or_nan"] is tf_debug.has_inf_or_nan and "big" in filters
    assert str(cb) == "TFLocalCLIDebugHook"


def test_hook_to_callback_rejects_non_hooks():
    with pytest.raises(TypeError, match="SessionRunHook"):
        cbs.HookToCallback(Fetcher())
    assert trainbus.HookToCallback is cbs.HookToCallback
