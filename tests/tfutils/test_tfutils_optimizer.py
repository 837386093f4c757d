"""Optimizer wrappers, checked against hand-computed updates."""

import numpy as np
import pytest
import tensorflow as tf

from trainbus.tfutils import gradproc, optimizer

tf1 = tf.compat.v1

W0 = np.array([1.0, -2.0], "float32")


def _quad_graph():
    """loss = sum((x . w)^2) / 2 ; grad = x^T (x w)."""
    x = tf1.placeholder(tf.float32, [None, 2], name="x")
    w = tf1.get_variable("w", initializer=W0)
    loss = 0.5 * tf.reduce_sum(tf.square(tf.reduce_sum(x * w, axis=1)))
    return x, w, loss


def _grad(xv, w):
    return xv.T @ (xv @ w)


def test_proxy_optimizer_delegates():
    with tf.Graph().as_default():
        x, w, loss = _quad_graph()
        base = tf1.train.MomentumOptimizer(0.1, 0.9)
        opt = optimizer.ProxyOptimizer(base)
        train_op = opt.minimize(loss)
        assert opt.get_slot_names() == ["momentum"]
        assert opt.get_slot(w, "momentum") is base.get_slot(w, "momentum")
        xv = np.array([[1.0, 2.0]], "float32")
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            sess.run(train_op, {x: xv})
            np.testing.assert_allclose(sess.run(w), W0 - 0.1 * _grad(xv, W0), rtol=1e-5)
    with pytest.raises(TypeError, match="Optimizer"):
        optimizer.ProxyOptimizer("sgd")


def test_apply_grad_processors_checks_its_arguments():
    opt = tf1.train.GradientDescentOptimizer(0.1)
    with pytest.raises(TypeError, match="list of GradientProcessor"):
        optimizer.apply_grad_processors(opt, gradproc.FilterNoneGrad())
    with pytest.raises(TypeError, match=r"gradprocs\[1\]"):
        optimizer.apply_grad_processors(opt, [gradproc.FilterNoneGrad(), "clip"])


def test_apply_grad_processors_runs_processors_in_order():
    with tf.Graph().as_default():
        x, w, loss = _quad_graph()
        procs = [gradproc.MapGradient(lambda g: g + 1.0), gradproc.MapGradient(lambda g: g * 2.0)]
        train_op = optimizer.apply_grad_processors(tf1.train.GradientDescentOptimizer(0.1), procs).minimize(loss)
        xv = np.array([[1.0, 1.0]], "float32")
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            sess.run(train_op, {x: xv})
            np.testing.assert_allclose(sess.run(w), W0 - 0.1 * (_grad(xv, W0) + 1.0) * 2.0, rtol=1e-5)


def test_post_process_and_variable_assignment_optimizers_clip_after_update():
    xv = np.array([[3.0, 1.0]], "float32")
    expected = np.clip(W0 - 0.1 * _grad(xv, W0), -0.5, 0.5)
    assert not np.allclose(expected, W0 - 0.1 * _grad(xv, W0))  # the clip matters
    for make in (
        lambda o: optimizer.PostProcessOptimizer(o, lambda v: tf1.assign(v, tf.clip_by_value(v, -0.5, 0.5)).op),
        lambda o: optimizer.VariableAssignmentOptimizer(o, lambda v: tf.clip_by_value(v, -0.5, 0.5)),
    ):
        with tf.Graph().as_default():
            x, w, loss = _quad_graph()
            train_op = make(tf1.train.GradientDescentOptimizer(0.1)).minimize(loss)
            with tf1.Session() as sess:
                sess.run(tf1.global_variables_initializer())
                sess.run(train_op, {x: xv})
                np.testing.assert_allclose(sess.run(w), expected, rtol=1e-5)


def test_variable_assignment_none_leaves_variable():
    with tf.Graph().as_default():
        x, w, loss = _quad_graph()
        train_op = optimizer.VariableAssignmentOptimizer(
            tf1.train.GradientDescentOptimizer(0.1), lambda v: None).minimize(loss)
        xv = np.array([[1.0, 0.0]], "float32")
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            sess.run(train_op, {x: xv})
            np.testing.assert_allclose(sess.run(w), W0 - 0.1 * _grad(xv, W0), rtol=1e-5)


@pytest.mark.parametrize("make_opt", [lambda: tf1.train.GradientDescentOptimizer(0.05),
                                      lambda: tf1.train.MomentumOptimizer(0.05, 0.9)], ids=["sgd", "momentum"])
def test_accum_grad_equals_one_update_with_summed_gradient(make_opt):
    k = 3
    rng = np.random.RandomState(0)
    batches = [rng.randn(4, 2).astype("float32") for _ in range(2 * k)]
    with tf.Graph().as_default():
        x, w, loss = _quad_graph()
        gs = tf1.train.get_or_create_global_step()
        train_op = optimizer.AccumGradOptimizer(make_opt(), niter=k).minimize(loss, global_step=gs)
        seen = []
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for b in batches:
                sess.run(train_op, {x: b})
                seen.append(sess.run(w))
            assert sess.run(gs) == 2 * k  # one per minimize() run
    # reference: the wrapped optimizer applied to the sum of k gradients (all taken at the same w)
    with tf.Graph().as_default():
        wref = tf1.get_variable("w", initializer=W0)
        g = tf1.placeholder(tf.float32, [2])
        apply = make_opt().apply_gradients([(g, wref)])
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            ref = []
            for start in (0, k):
                cur = sess.run(wref)
                sess.run(apply, {g: sum(_grad(b, cur) for b in batches[start:start + k])})
                ref.append(sess.run(wref))
    for i in range(k - 1):
        np.testing.assert_array_equal(seen[i], W0)           # accumulating only
        np.testing.assert_array_equal(seen[k + i], seen[k - 1])
    np.testing.assert_allclose(seen[k - 1], ref[0], rtol=1e-5)
    np.testing.assert_allclose(seen[2 * k - 1], ref[1], rtol=1e-5)


def test_accum_grad_rejects_bad_niter():
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="niter"):
            optimizer.AccumGradOptimizer(tf1.train.GradientDescentOptimizer(0.1), bad)


def test_accum_grad_in_a_real_training_run(logdir):
    """niter=2 in a trainbus training: W changes only at every 2nd step."""
    from trainbus.callbacks import Callback
    from trainbus.testing import TinyModel, train_tiny

    class Accum(TinyModel):
        def optimizer(self):
            return optimizer.AccumGradOptimizer(super().optimizer(), niter=2)

    values = []

    class Grab(Callback):
        def _setup_graph(self):
            self.w = [v for v in tf1.global_variables() if v.op.name == "W"][0]

        def _trigger_step(self):
            values.append(self.trainer.sess.run(self.w).copy())

    train_tiny(callbacks=[Grab()], model=Accum(), max_epoch=1, steps_per_epoch=4)
    assert len(values) == 4
    np.testing.assert_array_equal(values[0], 0.0)
    assert np.abs(values[1]).sum() > 0
    np.testing.assert_array_equal(values[2], values[1])
    assert not np.array_equal(values[3], values[2])
