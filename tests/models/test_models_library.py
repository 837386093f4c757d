"""trainbus.models: the whole layer library checked against tf.nn / numpy, argscope on every
layer, layer_register semantics, regularizers, and enable_argscope_for_module."""

from __future__ import annotations

import importlib
import logging
import sys
import types

import numpy as np
import pytest
import tensorflow as tf

import trainbus.models as models
from trainbus.models import (AvgPooling, BatchNorm, BatchRenorm, BilinearUpSample, BNReLU, ConcatWith, Conv2D,
                             Conv2DTranspose, Deconv2D, Dropout, FixedUnPooling, FullyConnected, GlobalAvgPooling,
                             InstanceNorm, LayerNorm, LeakyReLU, LinearWrap, Maxout, MaxPooling, PReLU,
                             VariableHolder, disable_layer_logging, l1_regularizer, l2_regularizer, layer_register,
                             regularize_cost, regularize_cost_from_collection, rename_tflayer_get_variable)
from trainbus.models import registry
from trainbus.tfutils import TowerContext, argscope
from trainbus.tfutils.argscope import enable_argscope_for_module

tf1 = tf.compat.v1
RNG = np.random.RandomState(1)

# what `from tensorpack.models import *` binds (its modules' __all__ lists)
TENSORPACK_MODELS_ALL = sorted([
    'AvgPooling', 'BNReLU', 'BatchNorm', 'BatchRenorm', 'ConcatWith', 'Conv2D', 'Conv2DTranspose', 'Deconv2D',
    'Dropout', 'FixedUnPooling', 'FullyConnected', 'GlobalAvgPooling', 'InstanceNorm', 'LayerNorm', 'LinearWrap',
    'MaxPooling', 'Maxout', 'PReLU', 'VariableHolder', 'disable_layer_logging', 'l1_regularizer', 'l2_regularizer',
    'layer_register', 'regularize_cost', 'regularize_cost_from_collection', 'rename_tflayer_get_variable'])


def _vars():
    return {v.op.name: v for v in tf1.global_variables()}


def _run(fetches, feed=None, init=True):
    with tf1.Session() as sess:
        if init:
            sess.run(tf1.global_variables_initializer())
        return sess.run(fetches, feed)


def test_star_import_binds_tensorpacks_26_names():
    assert sorted(models.__all__) == TENSORPACK_MODELS_ALL and len(models.__all__) == 26
    ns: dict = {}
    exec("from trainbus.models import *", ns)
    assert sorted(k for k in ns if not k.startswith("__")) == TENSORPACK_MODELS_ALL
    assert Deconv2D is Conv2DTranspose
    assert registry.get_registered_layer("Deconv2D") is Conv2DTranspose


# ---------------------------------------------------------------- numerics

@pytest.mark.parametrize("shape,fmt", [([3, 5], "NHWC"), ([2, 3, 3, 4], "NHWC"), ([2, 4, 3, 3], "NCHW")])
def test_layernorm_matches_moments_formula(shape, fmt):
    xv = (RNG.randn(*shape) * 3 + 1).astype("float32")
    with tf.Graph().as_default():
        y = LayerNorm("ln", tf.constant(xv), epsilon=1e-3, data_format=fmt,
                      gamma_init=tf1.constant_initializer(2.0))
        v = _vars()
        sess_out = _run([y, v["ln/beta"], v["ln/gamma"]])
    out, beta, gamma = sess_out
    axes = tuple(range(1, len(shape)))
    ref = (xv - xv.mean(axes, keepdims=True)) / np.sqrt(xv.var(axes, keepdims=True) + 1e-3)
    np.testing.assert_allclose(out, ref * 2.0, rtol=1e-4, atol=1e-5)
    assert beta.shape == gamma.shape == (shape[1] if fmt == "NCHW" or len(shape) == 2 else shape[-1],)


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
def test_instancenorm_matches_per_channel_moments(fmt):
    xv = (RNG.randn(2, 4, 4, 3) * 2 - 1).astype("float32")
    xin = xv if fmt == "NHWC" else xv.transpose(0, 3, 1, 2)
    with tf.Graph().as_default():
        y = InstanceNorm("in", tf.constant(xin), data_format=fmt, use_affine=False)
        assert _vars() == {}
        out = _run(y)
    if fmt == "NCHW":
        out = out.transpose(0, 2, 3, 1)
    ref = (xv - xv.mean((1, 2), keepdims=True)) / np.sqrt(xv.var((1, 2), keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_prelu_leakyrelu_maxout_bnrelu_concat():
    xv = RNG.randn(4, 2, 2, 6).astype("float32")
    with tf.Graph().as_default():
        x = tf.constant(xv)
        with TowerContext("", is_training=True):
            pr = PReLU("prelu", x, init=0.2)
            lr = LeakyReLU(x, 0.1)
            mo = Maxout(x, 3)
            mo2 = Maxout("mo2", tf.reshape(x, [4, -1]), 4)
            bnr = BNReLU("bnr", x)
            ref_bn = tf.nn.relu(BatchNorm("ref", x))
            cat = ConcatWith(x, [x * 2, x * 3], 3)
        assert pr.variables.alpha is _vars()["prelu/alpha"] and pr.name == "prelu/output:0"
        assert mo.shape.as_list() == [4, 2, 2, 2] and mo.op.name.startswith("output")
        assert "bnr/bn/gamma" in _vars()
        a, b, c, d, e, f, g = _run([pr, lr, mo, mo2, bnr, ref_bn, cat])
    np.testing.assert_allclose(a, np.where(xv > 0, xv, 0.2 * xv), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(b, np.where(xv > 0, xv, 0.1 * xv), rtol=1e-6)
    np.testing.assert_array_equal(c, xv.reshape(4, 2, 2, 2, 3).max(-1))
    np.testing.assert_array_equal(d, xv.reshape(4, 6, 4).max(-1))
    np.testing.assert_allclose(e, f, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(g, np.concatenate([xv, 2 * xv, 3 * xv], 3))


def test_fixed_unpooling_is_a_kronecker_product():
    xv = RNG.randn(2, 3, 2, 2).astype("float32")
    mat = np.arange(6, dtype="float32").reshape(2, 3)
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, [None, None, 2, 2])
        y0 = FixedUnPooling("u0", x, 2)
        y1 = FixedUnPooling("u1", x, (2, 3), unpool_mat=mat)
        y2 = FixedUnPooling("u2", tf.transpose(x, [0, 3, 1, 2]), (2, 3), unpool_mat=tf.constant(mat),
                            data_format="channels_first")
        assert y0.shape.as_list() == [None, None, 4, 2] and y1.shape.as_list() == [None, None, 6, 2]
        a, b, c = _run([y0, y1, y2], {x: xv})
        with pytest.raises(ValueError, match="FixedUnPooling: unpool_mat has shape"):
            FixedUnPooling("bad", x, 2, unpool_mat=mat)
    corner = np.zeros((2, 2), "float32")
    corner[0, 0] = 1
    for out, m in ((a, corner), (b, mat)):
        ref = np.stack([np.stack([np.kron(xv[n, :, :, ch], m) for ch in range(2)], -1) for n in range(2)])
        np.testing.assert_allclose(out, ref, rtol=1e-6)
    np.testing.assert_allclose(c.transpose(0, 2, 3, 1), b, rtol=1e-6)


@pytest.mark.parametrize("factor", [2, 3])
def test_bilinear_upsample_equals_half_pixel_bilinear_resize(factor):
    xv = RNG.randn(2, 4, 5, 3).astype("float32")
    with tf.Graph().as_default():
        y = BilinearUpSample("up", tf.constant(xv), factor)
        ref = tf.image.resize(tf.constant(xv), [4 * factor, 5 * factor], "bilinear")
        assert y.shape.as_list() == [2, 4 * factor, 5 * factor, 3]
        a, b = _run([y, ref])
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_batchnorm_virtual_batch_and_unbiased_moving_variance():
    xv = (RNG.randn(8, 2, 2, 3) * 2 + 1).astype("float32")
    with tf.Graph().as_default():
        with TowerContext("", is_training=True):
            y = BatchNorm("bn", tf.constant(xv), virtual_batch_size=4, momentum=0.0)
            y4 = BatchNorm("bn4", tf.constant(xv), momentum=0.0)
        assert tf1.get_collection(tf1.GraphKeys.UPDATE_OPS) != [] and len(tf1.get_collection(
            tf1.GraphKeys.UPDATE_OPS)) == 2  # only bn4: ghost batch norm updates inside the layer
        v = _vars()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            out = sess.run(y)
            mean, var = sess.run([v["bn/mean/EMA"], v["bn/variance/EMA"]])
            sess.run([y4] + tf1.get_collection(tf1.GraphKeys.UPDATE_OPS))
            var4 = sess.run(v["bn4/variance/EMA"])
    groups = xv.reshape(2, 4, 2, 2, 3)
    ref = (groups - groups.mean((1, 2, 3), keepdims=True)) / np.sqrt(groups.var((1, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(out, ref.reshape(xv.shape), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(mean, groups[0].mean((0, 1, 2)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(var, groups[0].var((0, 1, 2)), rtol=1e-4)
    # 4D input: the moving variance takes the unbiased batch variance (32 values per channel)
    np.testing.assert_allclose(var4, xv.var((0, 1, 2)) * 32 / 31, rtol=1e-4)


def test_batchnorm_sync_statistics_single_tower_is_local_with_internal_update(caplog):
    xv = RNG.randn(6, 3).astype("float32")
    with tf.Graph().as_default():
        with TowerContext("", is_training=True), caplog.at_level(logging.WARNING, logger="trainbus"):
            y = BatchNorm("bn", tf.constant(xv), sync_statistics="NCCL", momentum=0.5)
        assert "only one tower" in caplog.text
        assert tf1.get_collection(tf1.GraphKeys.UPDATE_OPS) == []
        mean_var = _vars()["bn/mean/EMA"]
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            out = sess.run(y)
            np.testing.assert_allclose(sess.run(mean_var), 0.5 * xv.mean(0), rtol=1e-5, atol=1e-6)
        with pytest.raises(ValueError, match="sync_statistics"):
            with TowerContext("t", is_training=True):
                BatchNorm("bn2", tf.constant(xv), sync_statistics="mpi")
    np.testing.assert_allclose(out, (xv - xv.mean(0)) / np.sqrt(xv.var(0) + 1e-5), rtol=1e-4, atol=1e-4)


def test_batch_renorm_training_corrections_updates_and_inference():
    xv = (RNG.randn(6, 3) * 3 + 2).astype("float32")
    with tf.Graph().as_default():
        x = tf.constant(xv)
        with TowerContext("", is_training=True):
            y = BatchRenorm("brn", x, 1.5, 0.5, momentum=0.5)
        upd = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)
        assert len(upd) == 2
        with TowerContext("pred", is_training=False), tf1.variable_scope(tf1.get_variable_scope(), reuse=True):
            y_inf = BatchRenorm("brn", x, 1.5, 0.5, momentum=0.5)
        assert len(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)) == 2
        v = _vars()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            out = sess.run(y)
            sess.run(upd)
            stats = sess.run({k: v[f"brn/{k}"] for k in ("moving_mean", "moving_variance", "moving_stddev",
                                                          "renorm_mean", "renorm_stddev")})
            inf = sess.run(y_inf)
    m, var = xv.mean(0), xv.var(0)
    std = np.sqrt(var + 1e-5)
    r = np.clip(std / 1.0, 1 / 1.5, 1.5)        # renorm stats start at mean 0, stddev 1
    d = np.clip(m / 1.0, -0.5, 0.5)
    np.testing.assert_allclose(out, (xv - m) / std * r + d, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(stats["renorm_mean"], 0.01 * m, rtol=1e-4)
    np.testing.assert_allclose(stats["renorm_stddev"], 0.99 + 0.01 * std, rtol=1e-5)
    np.testing.assert_allclose(stats["moving_mean"], 0.5 * m, rtol=1e-5)
    np.testing.assert_allclose(stats["moving_stddev"], 0.5 + 0.5 * std, rtol=1e-5)
    np.testing.assert_allclose(stats["moving_variance"], (0.5 + 0.5 * std) ** 2 - 1e-5, rtol=1e-5)
    ref_inf = (xv - stats["moving_mean"]) / np.sqrt(stats["moving_variance"] + 1e-5)
    np.testing.assert_allclose(inf, ref_inf, rtol=1e-4, atol=1e-5)
    with tf.Graph().as_default(), pytest.raises(ValueError, match="BatchRenorm must be called inside a TowerContext"):
        BatchRenorm("brn", tf.zeros([2, 3]), 3.0, 5.0)


def test_dropout_old_spellings():
    with tf.Graph().as_default():
        x = tf.ones([4000])
        with TowerContext("", is_training=True):
            keep08 = Dropout(x, 0.8)                 # positional: probability to KEEP
            rate08 = Dropout("d", x, rate=0.8)
            off = Dropout(x, keep_prob=0.5, is_training=False)
        a, b, c = _run([keep08, rate08, off])
    assert set(np.unique(a)) <= {0.0, np.float32(1 / 0.8)} and 0.15 < (a == 0).mean() < 0.25
    assert 0.75 < (b == 0).mean() < 0.85
    np.testing.assert_array_equal(c, 1.0)
    with tf.Graph().as_default(), pytest.raises(ValueError, match="Dropout: give only one of"):
        Dropout(tf.ones([2]), 0.5, rate=0.1, training=True)


def test_regularizers_and_regularize_cost():
    with tf.Graph().as_default():
        x = tf.ones([2, 3])
        with TowerContext("", is_training=True):
            FullyConnected("fc0", x, 4, kernel_regularizer=l2_regularizer(0.1), bias_initializer=tf1.ones_initializer(),
                           bias_regularizer=l1_regularizer(0.5))
            y = FullyConnected("fc1", x, 2, activity_regularizer=l1_regularizer(1.0), use_bias=False)
            cost = regularize_cost("fc.*/W", l2_regularizer(0.1))
            none = regularize_cost("nothing", l2_regularizer(0.1))
            from_coll = regularize_cost_from_collection()
        with TowerContext("pred", is_training=False):
            inf_cost = regularize_cost("fc.*/W", tf.nn.l2_loss)
            inf_coll = regularize_cost_from_collection(name="wd")
        assert cost.name == "regularize_cost:0" and none.name.startswith("empty_regularize_cost")
        assert inf_coll.name.startswith("pred/empty_wd")
        v = _vars()
        c, n, fc, ic, icol, w0, w1, out = _run([cost, none, from_coll, inf_cost, inf_coll, v["fc0/W"], v["fc1/W"], y])
    assert c == pytest.approx(0.05 * ((w0 ** 2).sum() + (w1 ** 2).sum()), rel=1e-5)
    assert n == 0 and ic == 0 and icol == 0
    # collection: 0.1 * l2_loss(W0) + 0.5 * |b0| (4 ones) + |fc1 output| / batch size
    assert fc == pytest.approx(0.05 * (w0 ** 2).sum() + 0.5 * 4 + np.abs(out).sum() / 2, rel=1e-5)
    with pytest.raises(ValueError, match="scale"):
        l2_regularizer(-1)


# ---------------------------------------------------------------- argscope on every layer

def _no(name):
    return lambda: name not in _vars()


ARGSCOPE_CASES = [
    (Conv2D, {"use_bias": False}, lambda x: Conv2D("c", x, 2, 3), _no("c/b")),
    (Deconv2D, {"use_bias": False}, lambda x: Deconv2D("d", x, 2, 3), _no("d/b")),
    (FullyConnected, {"use_bias": False}, lambda x: FullyConnected("f", x, 2), _no("f/b")),
    (BatchNorm, {"center": False}, lambda x: BatchNorm("bn", x), _no("bn/beta")),
    (BatchNorm, {"center": False}, lambda x: BNReLU("bnr", x), _no("bnr/bn/beta")),
    (BatchRenorm, {"use_scale": False}, lambda x: BatchRenorm("brn", x, rmax=2.0, dmax=1.0), _no("brn/gamma")),
    (LayerNorm, {"center": False}, lambda x: LayerNorm("ln", x), _no("ln/beta")),
    (InstanceNorm, {"scale": False}, lambda x: InstanceNorm("in", x), _no("in/gamma")),
    (PReLU, {"init": 0.3}, lambda x: PReLU("p", x), None),
    (MaxPooling, {"pool_size": 2}, lambda x: MaxPooling("mp", x), [2, 2, 2, 4]),
    (AvgPooling, {"shape": 4}, lambda x: AvgPooling("ap", x), [2, 1, 1, 4]),
    (GlobalAvgPooling, {"data_format": "NCHW"}, lambda x: GlobalAvgPooling("g", x), [2, 4]),
    (FixedUnPooling, {"shape": 3}, lambda x: FixedUnPooling("u", x), [2, 12, 12, 4]),
    (Maxout, {"num_unit": 4}, lambda x: Maxout(x), [2, 4, 4, 1]),
    (ConcatWith, {"dim": 1}, lambda x: ConcatWith(x, x), [2, 8, 4, 4]),
    (Dropout, {"training": False}, lambda x: Dropout(x, rate=0.9), [2, 4, 4, 4]),
    (BilinearUpSample, {"shape": 2}, lambda x: BilinearUpSample("b", x), [2, 8, 8, 4]),
    (LeakyReLU, {"alpha": 0.5}, lambda x: LeakyReLU(x), [2, 4, 4, 4]),
]


@pytest.mark.parametrize("layer,kwargs,build,check", ARGSCOPE_CASES,
                         ids=[f"{c[0].__name__}-{i}" for i, c in enumerate(ARGSCOPE_CASES)])
def test_argscope_sets_defaults_of_every_layer(layer, kwargs, build, check):
    with tf.Graph().as_default():
        x = tf.constant(RNG.randn(2, 4, 4, 4).astype("float32"))
        with TowerContext("", is_training=True), argscope(layer, **kwargs):
            out = build(x)
        if callable(check):
            assert check()
            assert _vars()  # the layer made its other variables
        elif check is None:
            assert _run(_vars()["p/alpha"]) == pytest.approx(0.3)
        else:
            assert out.shape.as_list() == check


def test_argscope_on_a_list_of_layers_and_call_arguments_win():
    with tf.Graph().as_default():
        x = tf.zeros([1, 4, 4, 2])
        with argscope([Conv2D, Deconv2D], use_bias=False, kernel_shape=1):
            Conv2D("c", x, 3)
            Deconv2D("d", x, 3, use_bias=True)
        v = _vars()
        assert sorted(v) == ["c/W", "d/W", "d/b"]
        assert v["c/W"].shape.as_list() == [1, 1, 2, 3]


# ---------------------------------------------------------------- layer_register and helpers

def test_layer_register_scopes_positional_arguments_and_errors(caplog):
    @layer_register(use_scope=None)
    def OptName(x, k=1):
        return tf.identity(x * k, name="out")

    @layer_register(use_scope=False)
    def NoName(x):
        return tf.identity(x, name="out")

    with tf.Graph().as_default():
        x = tf.ones([2])
        assert OptName(x).name == "out:0"
        assert OptName("s", x, 3).name == "s/out:0"
        with caplog.at_level(logging.WARNING, logger="trainbus"):
            assert NoName("named", x).name == "named/out:0"
        assert "use_scope=False" in caplog.text
        with pytest.raises(TypeError, match=r"FullyConnected\('fc'\): unknown argument\(s\) \['colour'\]"):
            FullyConnected("fc", tf.ones([2, 2]), 3, colour=1)
        with pytest.raises(TypeError, match=r"BatchNorm\('bn'\) takes at most 1 positional"):
            BatchNorm("bn", tf.ones([2, 2]), 1, 0.9)
        with pytest.raises(ValueError, match=r"Conv2D\('c'\): invalid input"):
            Conv2D("c", np.ones([1, 3, 3, 1], "float32"), 2, 3)
        with pytest.raises(ValueError, match="Maxout: num_unit=4 must divide"):
            Maxout(tf.ones([2, 6]), 4)
        with pytest.raises(ValueError, match="log_shape=True needs use_scope=True"):
            layer_register(log_shape=True, use_scope=None)
        with pytest.raises(TypeError,
                           match=r"BatchNorm\('bn'\): argument 'momentum' given twice "
                                 r"\(as 'decay' and as 'momentum'\)"):
            BatchNorm("bn", tf.ones([2, 2]), training=True, decay=0.9, momentum=0.9)


def test_layer_shapes_logged_once_and_disable_layer_logging(caplog, monkeypatch):
    monkeypatch.setattr(registry, "_LAYER_LOGGED", set())
    with tf.Graph().as_default(), caplog.at_level(logging.INFO, logger="trainbus"):
        x = tf.zeros([1, 4, 4, 2])
        Conv2D("logconv", x, 3, 3)
        with tf1.variable_scope("", reuse=True):
            Conv2D("logconv", x, 3, 3)
        assert caplog.text.count("'logconv': [1, 4, 4, 2] --> [1, 4, 4, 3]") == 1
        disable_layer_logging()
        Conv2D("other", x, 3, 3)
        assert "'other'" not in caplog.text


def test_variable_holder_and_rename_tflayer_get_variable():
    vh = VariableHolder(a=1)
    vh.b = 2
    assert vh.all() == [1, 2] and vh.b == 2
    with pytest.raises(ValueError, match="already held"):
        vh.a = 3
    with pytest.raises(AttributeError, match="no variable 'c'"):
        vh.c  # noqa: B018
    with tf.Graph().as_default():
        with tf1.variable_scope("conv0"), rename_tflayer_get_variable():
            names = [tf1.get_variable(n, [1]).op.name for n in ("kernel", "bias", "moving_mean", "moving_variance",
                                                                 "other")]
        assert names == ["conv0/W", "conv0/b", "conv0/mean/EMA", "conv0/variance/EMA", "conv0/other"]


def test_linearwrap_with_the_new_layers():
    with tf.Graph().as_default():
        x = tf.ones([2, 4, 4, 4])
        with TowerContext("", is_training=True):
            y = (LinearWrap(x).Deconv2D("d", 4, 3, strides=2).LayerNorm("ln").PReLU("p").Maxout(2)
                 .ConcatWith(tf.zeros([2, 8, 8, 3]), 3).FixedUnPooling("u", 2).BNReLU("bnr").Dropout(rate=0.5)())
        assert y.shape.as_list() == [2, 16, 16, 5]


# ---------------------------------------------------------------- enable_argscope_for_module

def _fresh_module(name):
    mod = types.ModuleType(name)
    exec("def scale(x, factor=1.0):\n    return x * factor\n\n"
         "def _private(x):\n    return x\n\nCONSTANT = 3\n", mod.__dict__)
    return mod


def test_enable_argscope_for_module_patches_functions():
    mod = _fresh_module("tb_test_plain_module")
    assert enable_argscope_for_module(mod, log_shape=False) == ["scale"]
    assert hasattr(mod.scale, "symbolic_function") and not hasattr(mod._private, "symbolic_function")
    with tf.Graph().as_default():
        with argscope(mod.scale, factor=4.0):
            assert _run(mod.scale(tf.constant(2.0)), init=False) == 8.0
        assert _run(mod.scale(tf.constant(2.0)), init=False) == 2.0
    empty = types.ModuleType("tb_empty")
    with pytest.raises(ValueError, match="has no public functions, so nothing was patched"):
        enable_argscope_for_module(empty)


def test_enable_argscope_for_module_loads_a_lazily_loaded_module(tmp_path, monkeypatch):
    from tensorflow.python.util.lazy_loader import LazyLoader

    (tmp_path / "tb_lazy_target.py").write_text("def double(x, k=2):\n    return x * k\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "tb_lazy_target", raising=False)
    parent: dict = {}
    lazy = LazyLoader("tb_lazy", parent, "tb_lazy_target")
    assert "double" not in vars(lazy)               # nothing loaded yet: the old code found nothing here
    assert enable_argscope_for_module(lazy, log_shape=False) == ["double"]
    real = importlib.import_module("tb_lazy_target")
    assert real.double is lazy.double and hasattr(real.double, "symbolic_function")
    with argscope(lazy.double, k=5):
        assert lazy.double(3) == 15 and real.double(3) == 15


def test_enable_argscope_for_module_on_tf_compat_v1_layers():
    try:
        import keras

        keras3 = keras.__version__.startswith("3.")
    except ImportError:
        keras3 = False
    import os

    legacy = os.environ.get("TF_USE_LEGACY_KERAS", "").lower() in ("1", "true", "yes")
    if keras3 and not legacy:
        with pytest.raises(ImportError, match="Keras 3, tf.compat.v1.layers does not exist: install the tf_keras"):
            enable_argscope_for_module(tf1.layers)
    else:   # tf_keras routes tf.compat.v1.layers to real functions: they get patched
        names = enable_argscope_for_module(tf1.layers, log_shape=False)
        assert "conv2d" in names and hasattr(tf1.layers.conv2d, "symbolic_function")


def test_batchnorm_frozen_in_training_warns_once_and_uses_moving_statistics(caplog):
    xv = RNG.randn(4, 3).astype("float32")
    with tf.Graph().as_default():
        with TowerContext("", is_training=True), caplog.at_level(logging.WARNING, logger="trainbus"):
            y = BatchNorm("bn", tf.constant(xv), use_local_stat=False)
            BatchNorm("bn2", tf.constant(xv), training=False)
        assert caplog.text.count("uses the moving mean/variance while training") == 1
        assert tf1.get_collection(tf1.GraphKeys.UPDATE_OPS) == []
        assert {v.op.name for v in tf1.model_variables()} == {"bn/mean/EMA", "bn/variance/EMA", "bn2/mean/EMA",
                                                              "bn2/variance/EMA"}
        out = _run(y)
    np.testing.assert_allclose(out, xv / np.sqrt(1 + 1e-5), rtol=1e-5)


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.timeout(120)
def test_batchnorm_sync_statistics_horovod_normalizes_with_the_whole_batch(tmp_path):
    """Two real Horovod ranks each hold half of a batch: both normalize with the statistics of
    the whole batch and update the moving mean with the whole batch's mean."""
    import os

    import zygote  # tests/_support: horovodrun and its ranks are forked from it (no TensorFlow import each)

    horovodrun = os.path.join(os.path.dirname(sys.executable), "horovodrun")
    worker = os.path.join(os.path.dirname(__file__), "hvd_sync_bn_worker.py")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    proc = zygote.run([sys.executable, horovodrun, "--gloo", "-np", "2", "-H", "localhost:2", *zygote.zygote().launcher(),
                       worker, str(tmp_path)], env=env, timeout=110)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    batch = (np.random.RandomState(0).randn(8, 2, 2, 3) * 2 + 1).astype("float32")
    mean, var = batch.mean((0, 1, 2)), batch.var((0, 1, 2))
    full = (batch - mean) / np.sqrt(var + 1e-5)
    for rank in (0, 1):
        got = np.load(tmp_path / f"rank{rank}.npz")
        assert int(got["size"]) == 2
        np.testing.assert_allclose(got["out"], full[rank * 4:(rank + 1) * 4], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got["moving_mean"], 0.5 * mean, rtol=1e-4, atol=1e-6)
