"""The per-step hot path: one prepared Session.run per step, same results and errors as
Session.run, and trigger_step dispatched in pluggy's order."""

import numpy as np
import pytest
import tensorflow as tf

from trainbus.session.fastrun import _generic, make_plain_step, make_step_callable

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


@pytest.mark.parametrize("bad_shape", [(2, 4), (3,), (1, 2, 3)], ids=["dim", "rank-low", "rank-high"])
def test_fast_callable_checks_shapes_of_arrays_already_of_the_placeholder_dtype(graph_and_sess, bad_shape):
    """A float32 array for a float32 placeholder skips the conversion; the shape check must not
    be skipped with it (Session.run's error, and nothing is run)."""
    g, sess, x, s, v, inc, y, z = graph_and_sess
    fast = make_step_callable(sess, y, [], [x], inc, False)
    with pytest.raises(ValueError, match=r"Cannot feed value of shape \(" + ", ?".join(map(str, bad_shape))
                       + r",?\) for Tensor 'x:0', which has shape \(None, 3\)"):
        fast(np.zeros(bad_shape, "float32"))
    assert sess.run(v) == 0.0  # the step did not run
    ok = np.ones((4, 3), "float32")
    assert fast(ok)[0] == 24.0 and sess.run(v) == 1.0


def test_fast_callable_feeds_same_dtype_array_as_is_and_others_converted(graph_and_sess):
    """A fed array of the placeholder's dtype reaches TF unchanged; float64 and int values are
    converted to float32 (results equal to Session.run's)."""
    g, sess, x, s, v, inc, y, z = graph_and_sess
    fast = make_step_callable(sess, z, [], [x], None, False)
    f32 = np.array([[0.1, 0.2, 0.3]], "float32")
    f64 = np.array([[0.1, 0.2, 0.3]], "float64")
    out32, out64 = fast(f32)[0], fast(f64)[0]
    assert out32.dtype == np.float32 and out64.dtype == np.float32
    np.testing.assert_array_equal(out32, f32)
    np.testing.assert_array_equal(out64, f64.astype("float32"))
    np.testing.assert_array_equal(fast([[1, 2, 3]])[0], np.array([[1, 2, 3]], "float32"))


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
    assert "_generic" in fn.__qualname__  # Session.run itself, not the prepared call
    assert "_generic" not in make_step_callable(sess, y, [], [x], None, False).__qualname__


def test_train_op_with_callback_fetches_returns_them(graph_and_sess):
    """The step is an Operation (the usual train op) and callbacks fetch tensors in the same run:
    their results come back (the shortcut for "nothing fetched" must not apply)."""
    g, sess, x, s, v, inc, y, z = graph_and_sess
    with g.as_default():
        op = tf.group(y, name="step2")
    data = np.arange(3, dtype="float32").reshape(1, 3)
    out, extra = make_step_callable(sess, op, [[z], y], [x], inc, False)(data)
    assert out is None
    np.testing.assert_array_equal(extra[0][0], data)
    assert extra[1] == 6.0
    assert sess.run(v) == 1.0
    # a callback that fetches only an operation still gets its (None) result back
    with g.as_default():
        other = tf.group(z, name="other_op")
    assert make_step_callable(sess, op, [other], [x], inc, False)(data) == (None, [None])


def test_options_and_run_metadata(graph_and_sess):
    g, sess, x, s, v, inc, y, z = graph_and_sess
    fast = make_step_callable(sess, y, [], [x], None, True)
    meta = tf1.RunMetadata()
    out, _ = fast(np.ones((1, 3), "float32"), options=tf1.RunOptions(trace_level=tf1.RunOptions.FULL_TRACE), run_metadata=meta)
    assert out == 6.0 and len(meta.step_stats.dev_stats) > 0


def test_plain_step_matches_session_run_through_a_tf_callable(graph_and_sess, monkeypatch):
    """A step without options runs as a TensorFlow callable (not Session.run's C call): an op gives
    None, a structure Session.run's values and types; the increment runs once per call."""
    g, sess, x, s, v, inc, y, z = graph_and_sess
    data = np.arange(3, dtype="float32").reshape(1, 3)
    with g.as_default():
        op = tf.group(y, name="plain_op")
    structure = {"y": y, "both": [y, z]}
    expected = sess.run(structure, {x: data})

    def no_raw_call(*args):
        raise AssertionError("the step went through Session.run's C call")

    monkeypatch.setattr(sess, "_call_tf_sessionrun", no_raw_call)
    assert make_plain_step(sess, op, [x], inc)([data]) is None
    out = make_plain_step(sess, structure, [x], inc)((data,))
    assert out["y"] == expected["y"] and type(out["y"]) is type(expected["y"])
    np.testing.assert_array_equal(out["both"][1], expected["both"][1])
    _, extra = make_step_callable(sess, op, [[z]], [x], inc, False)(data)
    np.testing.assert_array_equal(extra[0][0], data)
    monkeypatch.undo()
    assert sess.run(v) == 3.0


def test_plain_step_checks_feeds_and_runs_a_twice_fed_tensor_like_before(graph_and_sess):
    g, sess, x, s, v, inc, y, z = graph_and_sess
    step = make_plain_step(sess, y, [x], inc)
    with pytest.raises(ValueError, match=r"Cannot feed value of shape \(2, 4\) for Tensor 'x:0'"):
        step([np.zeros((2, 4), "float32")])
    assert sess.run(v) == 0.0  # nothing ran
    assert step([[[1, 2, 3]]]) == 12.0  # a list of ints is converted
    # the same tensor fed twice: TF makes no callable of it; the last value wins, as before
    twice = make_plain_step(sess, y, [x, "x:0"], inc)
    assert twice([np.zeros((1, 3), "float32"), np.ones((1, 3), "float32")]) == 6.0
    assert make_plain_step(sess, y, [s, x], None) is None  # a string feed: Session.run runs it
    assert sess.run(v) == 2.0


def test_hooked_session_without_run_hooks_runs_plain_steps(graph_and_sess):
    """Without before_run/after_run: each run feeds the next values, counts the step (trainer and
    TF variable), and a fetch list changed in place between runs is run as it now is."""
    from types import SimpleNamespace

    from trainbus.session import HookedSession
    from trainbus.train.base import TrainLoop

    g, sess, x, s, v, inc, y, z = graph_and_sess
    with g.as_default():
        op = tf.group(y, name="train_like_op")
    loop = TrainLoop()
    values = iter(np.full((1, 3), i, "float32") for i in range(1, 100))
    hooked = HookedSession(sess, SimpleNamespace(loop=loop), SimpleNamespace(before_run=None, after_run=None), inc,
                           feed=([x], lambda: (next(values),)))
    assert hooked.run(op) is None and hooked.run(op) is None
    assert hooked.run(y) == 18.0 and hooked.run(y) == 24.0  # fed 3, then 4
    fetches = [y]
    assert hooked.run(fetches) == [30.0]
    fetches.append(z)
    out = hooked.run(fetches)
    assert out[0] == 36.0 and out[1].tolist() == [[6.0, 6.0, 6.0]]
    assert loop.global_step == 6 and sess.run(v) == 6.0
    bad = HookedSession(sess, SimpleNamespace(loop=loop), SimpleNamespace(before_run=None, after_run=None), inc,
                        feed=([x], lambda: (np.zeros((2, 4), "float32"),)))
    with pytest.raises(ValueError, match="Cannot feed value of shape"):
        bad.run(op)
    assert loop.global_step == 6 and sess.run(v) == 6.0  # a failed step is not counted


def test_trigger_step_dispatch_keeps_pluggy_order_with_ambient_plugins():
    import trainbus
    from trainbus.bus.manager import TrainbusPluginManager
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


def test_stop_training_from_trigger_step_finalizes_every_callback(logdir):
    """``StopTraining`` raised by a ``_trigger_step`` (through the flat per-step dispatch) ends
    the loop after that step: no later step, no after_epoch/trigger_epoch for the partial epoch,
    every callback's after_train exactly once (a final checkpoint at that step, as the saver
    plugin writes), train() returns normally."""
    import trainbus.callbacks as C
    from trainbus.testing import HookRecorder, train_tiny
    from trainbus.train import StopTraining

    sink: list = []
    before, after = HookRecorder("before", sink), HookRecorder("after", sink)

    class StopAt(C.Callback):
        def _trigger_step(self):
            if self.global_step == 11:  # epoch 2, local step 2
                raise StopTraining("enough")

    class SaveAtEnd(C.Callback):
        def _setup_graph(self):
            self._saver = tf.compat.v1.train.Saver()

        def _after_train(self):
            self._saver.save(self.trainer.sess, str(logdir / "model"), global_step=self.global_step)

    saver = SaveAtEnd()
    tr = train_tiny(callbacks=[before, StopAt(), after, saver], max_epoch=5, steps_per_epoch=8)
    assert (tr.epoch_num, tr.global_step, tr.local_step) == (2, 11, 2)
    for rec in (before, after):
        hooks = rec.hooks()
        assert hooks.count("after_train") == 1 and hooks[-1] == "after_train", hooks
        assert hooks.count("trigger_epoch") == 1 and hooks.count("after_epoch") == 1  # epoch 1 only
        assert rec.events[-1][1:3] == (2, 11)  # after_train sees the stop step
    # the callback before the raiser saw step 11's trigger_step, the one after it did not
    assert [e[2] for e in before.events if e[0] == "trigger_step"][-1] == 11
    assert [e[2] for e in after.events if e[0] == "trigger_step"][-1] == 10
    assert not [e for e in after.events if e[0] == "before_run" and e[2] > 10]  # no 12th step
    # the saver's after_train ran with a usable session: the final checkpoint is at step 11
    assert (logdir / "model-11.index").is_file()
    assert tf.train.load_variable(str(logdir / "model-11"), "global_step") == 11


def test_options_without_run_metadata_are_honoured():
    """RunOptions alone (no RunMetadata) still reach the run: a 50 ms timeout on a dequeue from
    an empty queue raises DeadlineExceededError instead of blocking."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [None], name="x")
        q = tf1.FIFOQueue(2, [tf.float32], shapes=[[]])
        got = q.dequeue() + tf.reduce_sum(x)
        close = q.close(cancel_pending_enqueues=True)
        with tf1.Session(graph=g) as sess:
            fast = make_step_callable(sess, got, [], [x], None, True)
            assert "_generic" not in fast.__qualname__
            # if the options were dropped the dequeue would block: closing the queue after 20 s
            # then ends it with OutOfRangeError, a failure instead of a hang
            import threading

            closer = threading.Timer(20.0, lambda: sess.run(close))
            closer.start()
            try:
                with pytest.raises(tf.errors.DeadlineExceededError):
                    fast(np.ones((2,), "float32"), options=tf1.RunOptions(timeout_in_ms=50))
            finally:
                closer.cancel()
