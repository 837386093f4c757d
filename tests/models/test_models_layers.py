"""trainbus.models layers checked numerically against tf.nn / numpy."""

import numpy as np
import pytest
import tensorflow as tf

from trainbus.models import (AvgPooling, BatchNorm, Conv2D, Conv2DTranspose, Dropout, FullyConnected, GlobalAvgPooling,
                             LinearWrap, MaxPooling)
from trainbus.tfutils import TowerContext, argscope

tf1 = tf.compat.v1
RNG = np.random.RandomState(0)


def _vars():
    return {v.op.name: v for v in tf1.global_variables()}


def _run(fetches, feed=None):
    with tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        return sess.run(fetches, feed)


@pytest.mark.parametrize("fmt", ["channels_last", "NCHW"])
def test_conv2d_equals_tf_nn_conv2d_with_its_W(fmt):
    xv = RNG.randn(2, 7, 7, 3).astype("float32")
    with tf.Graph().as_default():
        x = tf.constant(xv if fmt == "channels_last" else xv.transpose(0, 3, 1, 2))
        y = Conv2D("conv", x, out_channel=4, kernel_shape=3, stride=2, padding="SAME", data_format=fmt,
                   nl=tf.nn.relu, b_init=tf1.constant_initializer(0.1))
        v = _vars()
        assert sorted(v) == ["conv/W", "conv/b"] and v["conv/W"].shape.as_list() == [3, 3, 3, 4]
        assert y.variables.W is v["conv/W"]
        ref = tf.nn.relu(tf.nn.conv2d(tf.constant(xv), v["conv/W"], [1, 2, 2, 1], "SAME") + 0.1)
        out, expected = _run([y, ref])
    if fmt == "NCHW":
        out = out.transpose(0, 2, 3, 1)
    assert out.shape == (2, 4, 4, 4)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_conv2d_split_and_valid_padding():
    xv = RNG.randn(1, 5, 5, 4).astype("float32")
    with tf.Graph().as_default():
        y = Conv2D("g", tf.constant(xv), filters=6, kernel_size=(3, 1), padding="valid", split=2, use_bias=False)
        W = _vars()["g/W"]
        assert W.shape.as_list() == [3, 1, 2, 6] and "g/b" not in _vars()
        out, w = _run([y, W])
    assert out.shape == (1, 3, 5, 6)
    ref0 = tf.nn.conv2d(xv[..., :2], w[..., :3], 1, "VALID").numpy()
    np.testing.assert_allclose(out[..., :3], ref0, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="split"):
        with tf.Graph().as_default():
            Conv2D("bad", tf.zeros([1, 4, 4, 3]), 4, 3, split=2)


def test_conv2d_transpose_shapes_and_adjointness():
    xv = RNG.randn(2, 3, 3, 5).astype("float32")
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, [None, 3, 3, 5])
        y = Conv2DTranspose("up", x, 4, 3, strides=2)
        yv = Conv2DTranspose("upv", x, 4, 3, strides=2, padding="valid")
        assert y.shape.as_list() == [None, 6, 6, 4] and yv.shape.as_list() == [None, 7, 7, 4]
        W = _vars()["up/W"]
        assert W.shape.as_list() == [3, 3, 4, 5]
        out, w = _run([y, W], {x: xv})
    # transposed conv is the adjoint of conv: <conv_T(x), z> == <x, conv(z)>
    z = RNG.randn(2, 6, 6, 4).astype("float32")
    lhs = float((out * z).sum())
    rhs = float((xv * tf.nn.conv2d(z, w, 2, "SAME").numpy()).sum())
    assert lhs == pytest.approx(rhs, rel=1e-4)


def test_fully_connected_flattens_and_matches_matmul():
    xv = RNG.randn(3, 2, 2).astype("float32")
    with tf.Graph().as_default():
        y = FullyConnected("fc", tf.constant(xv), out_dim=5, nl=tf.nn.tanh)
        v = _vars()
        out, w, b = _run([y, v["fc/W"], v["fc/b"]])
    assert w.shape == (4, 5)
    np.testing.assert_allclose(out, np.tanh(xv.reshape(3, 4) @ w + b), rtol=1e-5, atol=1e-6)


def test_pooling_layers():
    xv = RNG.randn(1, 4, 4, 2).astype("float32")
    with tf.Graph().as_default():
        x = tf.constant(xv)
        mp = MaxPooling("mp", x, 2)
        ap = AvgPooling("ap", x, shape=2, stride=1, padding="same")
        gp = GlobalAvgPooling("gap", x)
        mp_nchw = MaxPooling("mp2", tf.transpose(x, [0, 3, 1, 2]), 2, data_format="channels_first")
        a, b, c, d = _run([mp, ap, gp, mp_nchw])
    np.testing.assert_allclose(a, xv.reshape(1, 2, 2, 2, 2, 2).max(axis=(2, 4)))
    assert b.shape == (1, 4, 4, 2)
    np.testing.assert_allclose(b[0, 0, 0], xv[0, :2, :2].mean(axis=(0, 1)), rtol=1e-5)
    np.testing.assert_allclose(c, xv.mean(axis=(1, 2)), rtol=1e-5)
    np.testing.assert_allclose(d.transpose(0, 2, 3, 1), a)


def test_batchnorm_train_vs_inference_and_update_ops():
    xv = (RNG.randn(8, 3) * 2 + 5).astype("float32")
    with tf.Graph().as_default():
        x = tf.constant(xv)
        with TowerContext("", is_training=True):
            y = BatchNorm("bn", x, momentum=0.5)
        upd = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)
        assert len(upd) == 2
        v = _vars()
        assert sorted(v) == ["bn/beta", "bn/gamma", "bn/mean/EMA", "bn/variance/EMA"]
        model_vars = tf1.get_collection(tf1.GraphKeys.MODEL_VARIABLES)
        assert {x.op.name for x in model_vars} == {"bn/mean/EMA", "bn/variance/EMA"}
        assert {x.op.name for x in tf1.trainable_variables()} == {"bn/beta", "bn/gamma"}
        with TowerContext("infer", is_training=False):
            with tf1.variable_scope(tf1.get_variable_scope(), reuse=True):
                y_inf = BatchNorm("bn", x)
        assert len(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)) == 2  # inference adds none
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            out = sess.run(y)
            inf0 = sess.run(y_inf)
            sess.run(upd)
            mean, var = sess.run([v["bn/mean/EMA"], v["bn/variance/EMA"]])
            inf1 = sess.run(y_inf)
    np.testing.assert_allclose(out, (xv - xv.mean(0)) / np.sqrt(xv.var(0) + 1e-5), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(inf0, xv / np.sqrt(1 + 1e-5), rtol=1e-5)   # initial moving stats 0 / 1
    np.testing.assert_allclose(mean, 0.5 * xv.mean(0), rtol=1e-5)
    np.testing.assert_allclose(var, 0.5 + 0.5 * xv.var(0), rtol=1e-4)
    np.testing.assert_allclose(inf1, (xv - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5)


def test_batchnorm_4d_nchw_internal_update_and_errors():
    xv = RNG.randn(2, 3, 4, 4).astype("float32")
    with tf.Graph().as_default():
        y = BatchNorm("bn", tf.constant(xv), training=True, data_format="NCHW", ema_update="internal",
                      use_scale=False, decay=0.0)
        assert tf1.get_collection(tf1.GraphKeys.UPDATE_OPS) == []
        assert "bn/gamma" not in _vars()
        mean_var = _vars()["bn/mean/EMA"]
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            out = sess.run(y)
            np.testing.assert_allclose(sess.run(mean_var), xv.mean(axis=(0, 2, 3)), rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(out.mean(axis=(0, 2, 3)), 0, atol=1e-5)
        with pytest.raises(ValueError, match="TowerContext"):
            BatchNorm("bn2", tf.constant(xv))
        with pytest.raises(ValueError, match="ema_update"):
            BatchNorm("bn3", tf.constant(xv), training=True, ema_update="sometimes")


def test_dropout_train_and_inference():
    with tf.Graph().as_default():
        x = tf.ones([1000])
        with TowerContext("", is_training=True):
            d_train = Dropout("drop", x, keep_prob=0.5)
            d_off = Dropout(x, rate=0.5, training=False)
        with TowerContext("pred", is_training=False):
            d_inf = Dropout(x, 0.5)
        a, b, c = _run([d_train, d_off, d_inf])
    assert set(np.unique(a)) <= {0.0, 2.0} and 300 < (a == 0).sum() < 700
    np.testing.assert_array_equal(b, 1.0)
    np.testing.assert_array_equal(c, 1.0)
    with pytest.raises(ValueError, match="not both"):
        with tf.Graph().as_default():
            Dropout(tf.ones([2]), rate=0.1, keep_prob=0.9, training=True)


def test_linearwrap_chain_and_argscope():
    xv = RNG.randn(2, 8, 8, 1).astype("float32")
    with tf.Graph().as_default():
        x = tf.constant(xv)
        with TowerContext("", is_training=True), argscope(Conv2D, kernel_shape=3, nl=tf.nn.relu, out_channel=4):
            y = (LinearWrap(x)
                 .Conv2D("c0")
                 .MaxPooling("p0", 2)
                 .Conv2D("c1", out_channel=6)
                 .BatchNorm("bn")
                 .tf.multiply(2.0)
                 .apply(tf.nn.relu)
                 .GlobalAvgPooling("gap")
                 .FullyConnected("fc", 10)())
        assert y.shape.as_list() == [2, 10]
        v = _vars()
        assert v["c0/W"].shape.as_list() == [3, 3, 1, 4] and v["c1/W"].shape.as_list() == [3, 3, 4, 6]
        assert _run(y).shape == (2, 10)
        with pytest.raises(AttributeError, match="no registered layer"):
            LinearWrap(x).NotALayer("n")


def test_layer_argument_errors_are_clear():
    with tf.Graph().as_default():
        x = tf.zeros([1, 4, 4, 2])
        with pytest.raises(TypeError, match="name"):
            Conv2D(x, 3, 3)
        with pytest.raises(TypeError, match="given twice"):
            Conv2D("c", x, 3, 3, nl=tf.nn.relu, activation=None)
        with pytest.raises(TypeError, match="unknown argument"):
            Conv2D("c2", x, 3, 3, colour="red")
        with pytest.raises(ValueError, match="data_format"):
            Conv2D("c3", x, 3, 3, data_format="NWHC")


def test_linearwrap_tf_falls_back_to_compat_v1_names():
    """``.tf.<name>`` takes TF 2's name first, then tf.compat.v1's (scripts written for TF 1 chain
    ``.tf.image.resize_nearest_neighbor``, which TF 2 renamed)."""
    xv = RNG.randn(1, 2, 2, 1).astype("float32")
    with tf.Graph().as_default():
        y = LinearWrap(tf.constant(xv)).tf.image.resize_nearest_neighbor([4, 4])()
        z = LinearWrap(tf.constant(xv)).tf.multiply(3.0)()  # a TF 2 name still wins
        out, three = _run([y, z])
    np.testing.assert_array_equal(out[0, :, :, 0], np.repeat(np.repeat(xv[0, :, :, 0], 2, 0), 2, 1))
    np.testing.assert_allclose(three, xv * 3)
    with tf.Graph().as_default():
        with pytest.raises(AttributeError, match=r"\.tf\.no_such_op: neither TensorFlow nor tf.compat.v1"):
            LinearWrap(tf.zeros([1])).tf.no_such_op()
