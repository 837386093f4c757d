"""The per-step hot path: one prepared Session.run per step, same results and errors as
Session.run, and trigger_step dispatched in pluggy's order."""

import numpy as np
import pytest
import tensorflow as tf

from trainbus.train._fastrun import _generic, make_step_callable

tf1 = tf.compat.v1


@pytest.fixture()
def graph_and_sess():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None, 3], name="x")
        s = tf1.placeholder(tf.string, [], name="s")
        v = tf1.get_variable("v", initializer=0.0)
        inc = tf1.assign_add(v, 1.0).op
        y = tf.reduce_sum(x * 2.0, name="y")
        z = tf.identity(x, name="z")
        sess = tf1.Session(graph=g)
        sess.run(tf1.global_variables_initializer())
        yield g, sess, x, s, v, inc, y, z
        sess.close()


def test_fast_callable_matches_session_run(graph_and_sess):
    g, sess, x, s, v, inc, y, z = graph_and_sess
    data = np.arange(6, dtype="float32").reshape(2, 3)
    fast = make_step_callable(sess, {"y": y, "both": [y, z]}, [[z], y], [x], inc, False)
    slow = _generic(sess, {"y": y, "both": [y, z]}, [[z], y], [x], inc)
    out_f, extra_f = fast(data)
    out_s, extra_s = slow(data)
    assert out_f["y"] == out_s["y"] == 30.0
    np.testing.assert_array_equal(out_f["both"][1], data)
    np.testing.assert_array_equal(extra_f[0][0], extra_s[0][0])
    assert extra_f[1] == 30.0
    assert sess.run(v) == 2.0  # the increment ran once per call


def test_fast_callable_checks_shapes_and_converts_types(graph_and_sess):
    g, sess, x, s, v, inc, y, z = graph_and_sess
    fast = make_step_callable(sess, y, [], [x], None, False)
    with pytest.raises(ValueError, match="Cannot feed value of shape .* 'x:0'"):
        fast(np.zeros((2, 4)))
    assert fast([[1, 2, 3]])[0] == 12.0  # a list of ints is converted like Session.run does


def test_train_op_only_returns_none_and_increments(graph_and_sess):
    g, sess, x, s, v, inc, y, z = graph_and_sess
    with g.as_default():
        op = tf.group(y, name="step")
    fast = make_step_callable(sess, op, [], [x], inc, False)
    assert fast(np.ones((1, 3), "float32")) == (None, [])
    assert sess.run(v) == 1.0


def test_string_feeds_fall_back_to_session_run(graph_and_sess):
    g, sess, x, s, v, inc, y, z = graph_and_sess
    with g.as_default():
        n = tf.strings.length(s)
    fn = make_step_callable(sess, n, [], [s], None, False)
    assert fn(b"hello")[0] == 5


def test_options_and_run_metadata(graph_and_sess):
    g, sess, x, s, v, inc, y, z = graph_and_sess
    fast = make_step_callable(sess, y, [], [x], None, True)
    meta = tf1.RunMetadata()
    out, _ = fast(np.ones((1, 3), "float32"), options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE), run_metadata=meta)
    assert out == 6.0 and len(meta.step_stats.dev_stats) > 0


def test_trigger_step_dispatch_keeps_pluggy_order_with_ambient_plugins():
    import trainbus
    from trainbus._manager import TrainbusPluginManager
    from trainbus.callbacks import Callback
    from trainbus.train.base import Bus

    log = []

    class Cb(Callback):
        def __init__(self, tag):
            self.tag = tag

        def _trigger_step(self):
            log.append(self.tag)

    class Ambient:
        @trainbus.hookimpl(tryfirst=True)
        def trigger_step(self, trainer):
            log.append(("first", trainer))

        @trainbus.hookimpl(trylast=True)
        def before_epoch(self):
            pass

    class Late:
        @trainbus.hookimpl
        def trigger_step(self):
            log.append("plain-ambient")

    pm = TrainbusPluginManager()
    pm.register(Late(), name="plugin:late")
    pm.register(Ambient(), name="plugin:ambient")
    pm.register_ordered([Cb("a"), Cb("b")])
    bus = Bus(pm)
    assert bus.trigger_step is not pm.hook.trigger_step  # the flat dispatcher
    bus.trigger_step(trainer="T")
    assert log == [("first", "T"), "a", "b", "plain-ambient"]
    log.clear()
    pm.hook.trigger_step(trainer="T")  # pluggy itself agrees
    assert log == [("first", "T"), "a", "b", "plain-ambient"]
