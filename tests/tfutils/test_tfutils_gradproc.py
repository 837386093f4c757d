"""Gradient processors: their effect on a variable after one real run of the train op."""

import logging

import numpy as np
import pytest
import tensorflow as tf

from trainbus.tfutils import gradproc, optimizer

tf1 = tf.compat.v1


def _run_one_step(procs, grads_by_var, lr=1.0, extra=None):
    """Variables {name: init}, loss = sum(c * var) so that grad(var) == c; one GD step."""
    with tf.Graph().as_default():
        vs = {}
        loss = 0.0
        for name, (init, c) in grads_by_var.items():
            with tf1.variable_scope(name.rsplit("/", 1)[0] if "/" in name else ""):
                v = tf1.get_variable(name.rsplit("/", 1)[-1], initializer=np.asarray(init, "float32"))
            vs[name] = v
            loss = loss + tf.reduce_sum(tf.constant(np.asarray(c, "float32")) * v)
        opt = optimizer.apply_grad_processors(tf1.train.GradientDescentOptimizer(lr), procs)
        train_op = opt.minimize(loss)
        fetch_extra = extra() if extra else None
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            ex = sess.run([train_op, fetch_extra] if fetch_extra is not None else train_op)
            return {n: sess.run(v) for n, v in vs.items()}, ex


def test_global_norm_clip_scales_to_threshold():
    out, _ = _run_one_step([gradproc.GlobalNormClip(1.0)], {"a": ([0.0, 0.0], [3.0, 0.0]), "b": ([0.0], [4.0])})
    np.testing.assert_allclose(out["a"], [-0.6, 0.0], rtol=1e-6)
    np.testing.assert_allclose(out["b"], [-0.8], rtol=1e-6)
    # under the threshold: unchanged
    out, _ = _run_one_step([gradproc.GlobalNormClip(10.0)], {"a": ([0.0, 0.0], [3.0, 0.0]), "b": ([0.0], [4.0])})
    np.testing.assert_allclose(out["a"], [-3.0, 0.0], rtol=1e-6)
    with pytest.raises(ValueError, match="> 0"):
        gradproc.GlobalNormClip(0)


def test_map_gradient_one_and_two_arguments_and_regex():
    out, _ = _run_one_step([gradproc.MapGradient(lambda g: g * 10.0, regex="a")],
                           {"a": ([1.0], [1.0]), "ab": ([1.0], [1.0])})
    np.testing.assert_allclose(out["a"], [-9.0])
    np.testing.assert_allclose(out["ab"], [0.0])  # regex matches the whole name only
    out, _ = _run_one_step([gradproc.MapGradient(lambda g, v: g + v)], {"a": ([2.0], [1.0])})
    np.testing.assert_allclose(out["a"], [2.0 - 3.0])
    with pytest.raises(TypeError, match="1 argument"):
        gradproc.MapGradient(lambda a, b, c: a)


def test_map_gradient_returning_none_drops_the_update():
    out, _ = _run_one_step([gradproc.MapGradient(lambda g: None, regex="frozen")],
                           {"frozen": ([5.0], [1.0]), "free": ([5.0], [1.0])})
    np.testing.assert_allclose(out["frozen"], [5.0])
    np.testing.assert_allclose(out["free"], [4.0])


def test_scale_gradient_doubles_biases_and_freezes_layer0():
    procs = [gradproc.ScaleGradient([(".*/b", 2.0), ("layer0/.*", 0.0)], verbose=False)]
    out, _ = _run_one_step(procs, {"layer0/W": ([1.0], [1.0]), "layer0/b": ([1.0], [1.0]),
                                   "layer1/W": ([1.0], [1.0]), "layer1/b": ([1.0], [1.0])}, lr=0.5)
    np.testing.assert_allclose(out["layer0/W"], [1.0])   # frozen
    np.testing.assert_allclose(out["layer0/b"], [0.0])   # '.*/b' matched first: 1 - 0.5 * 2
    np.testing.assert_allclose(out["layer1/W"], [0.5])
    np.testing.assert_allclose(out["layer1/b"], [0.0])
    # a single (regex, value) pair is accepted too
    out, _ = _run_one_step([gradproc.ScaleGradient(("a", 3.0), verbose=False)], {"a": ([0.0], [1.0])})
    np.testing.assert_allclose(out["a"], [-3.0])
    with pytest.raises(TypeError, match="not a number"):
        gradproc.ScaleGradient([("a", "x")])


def test_filter_none_grad_skips_and_warns(caplog):
    with tf.Graph().as_default():
        a = tf1.get_variable("a", initializer=1.0)
        unused = tf1.get_variable("unused", initializer=1.0)
        loss = a * 2.0
        opt = optimizer.apply_grad_processors(tf1.train.GradientDescentOptimizer(1.0), [gradproc.FilterNoneGrad()])
        grads = opt.compute_gradients(loss, var_list=[a, unused])
        assert grads[1][0] is None
        with caplog.at_level(logging.WARNING, logger="trainbus"):
            train_op = opt.apply_gradients(grads)
        assert "unused" in caplog.text
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            sess.run(train_op)
            assert sess.run(a) == -1.0 and sess.run(unused) == 1.0


def test_check_gradient_raises_on_nan():
    with tf.Graph().as_default():
        w = tf1.get_variable("w", initializer=1.0)
        x = tf1.placeholder(tf.float32, [])
        opt = optimizer.apply_grad_processors(tf1.train.GradientDescentOptimizer(1.0), [gradproc.CheckGradient()])
        train_op = opt.minimize(w * x)
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            sess.run(train_op, {x: 2.0})
            assert sess.run(w) == -1.0
            with pytest.raises(tf.errors.InvalidArgumentError, match="CheckGradient/w"):
                sess.run(train_op, {x: float("nan")})


def test_print_gradient_prints_and_keeps_values(capfd):
    out, _ = _run_one_step([gradproc.PrintGradient()], {"pw": ([1.0, 1.0], [0.25, 0.75])})
    np.testing.assert_allclose(out["pw"], [0.75, 0.25])
    err = capfd.readouterr().err
    assert "gradient of pw" in err and "mean= 0.5" in err


def test_summary_gradient_writes_histogram_and_rms():
    with tf.Graph().as_default():
        w = tf1.get_variable("w", initializer=np.array([3.0, 4.0], "float32"))
        loss = tf.reduce_sum(w * tf.constant([3.0, 4.0]))
        opt = optimizer.apply_grad_processors(tf1.train.GradientDescentOptimizer(0.0),
                                              [gradproc.SummaryGradient(collections=["grad_summ"])])
        train_op = opt.minimize(loss)
        hist = tf1.get_collection("grad_summ")
        assert len(hist) == 1
        rms = tf1.get_default_graph().get_tensor_by_name("SummaryGradient/w/rms:0")
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            s, r, _ = sess.run([hist[0], rms, train_op])
        summ = tf1.Summary.FromString(s)
        assert summ.value[0].tag == "w-grad"
        assert summ.value[0].histo.num == 2 and summ.value[0].histo.sum == pytest.approx(7.0)
        assert r == pytest.approx(np.sqrt((9 + 16) / 2))


def test_gradproc_in_a_real_training_run(logdir):
    """ScaleGradient through a trainbus training: the frozen bias never moves, W does."""
    from trainbus.testing import TinyModel, train_tiny

    class Frozen(TinyModel):
        def optimizer(self):
            return optimizer.apply_grad_processors(super().optimizer(), [gradproc.ScaleGradient(("b", 0.0), verbose=False)])

    from trainbus.callbacks import Callback

    seen = {}

    class Grab(Callback):
        def _setup_graph(self):
            self.vs = {v.op.name: v for v in tf1.global_variables() if v.op.name in ("W", "b")}

        def _trigger_epoch(self):
            seen.update({n: self.trainer.sess.run(v) for n, v in self.vs.items()})

    train_tiny(callbacks=[Grab()], model=Frozen(), max_epoch=1, steps_per_epoch=4)
    np.testing.assert_array_equal(seen["b"], np.zeros(3, "float32"))
    assert np.abs(seen["W"]).sum() > 0
