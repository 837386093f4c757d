"""argscope and collection helpers, with real graphs and sessions."""

import types

import numpy as np
import pytest
import tensorflow as tf

from trainbus.models import Conv2D, FullyConnected
from trainbus.tfutils.argscope import argscope, enable_argscope_for_function, enable_argscope_for_module, get_arg_scope
from trainbus.tfutils.collection import backup_collection, freeze_collection, restore_collection

tf1 = tf.compat.v1


def test_argscope_defaults_nesting_and_override():
    assert get_arg_scope()["Conv2D"] == {}
    with argscope(Conv2D, kernel_shape=3, nl=tf.nn.relu, out_channel=32):
        s = get_arg_scope()
        assert s["Conv2D"] == {"kernel_size": 3, "activation": tf.nn.relu, "filters": 32}
        with argscope([Conv2D, FullyConnected], use_bias=False):
            assert get_arg_scope()["Conv2D"]["use_bias"] is False
            assert get_arg_scope()["Conv2D"]["filters"] == 32
            assert get_arg_scope()["FullyConnected"] == {"use_bias": False}
        assert "use_bias" not in get_arg_scope()["Conv2D"]
    assert get_arg_scope()["Conv2D"] == {}


def test_argscope_applies_to_layers_and_call_overrides():
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, [None, 6, 6, 2])
        with argscope(Conv2D, kernel_shape=3, nl=tf.nn.relu, out_channel=5):
            a = Conv2D("conv0", x)
            b = Conv2D("conv1", a, out_channel=7)           # override by alias
            c = Conv2D("conv2", b, filters=4, activation=None)  # override by new name
        assert a.shape.as_list() == [None, 6, 6, 5]
        assert b.shape.as_list() == [None, 6, 6, 7]
        assert c.shape.as_list() == [None, 6, 6, 4]
        g = tf1.get_default_graph()
        W = {v.op.name: v for v in tf1.global_variables()}["conv0/W"]
        assert W.shape.as_list() == [3, 3, 2, 5]
        assert "Relu" in [op.type for op in g.get_operations() if op.name.startswith("conv1/")]
        assert "Relu" not in [op.type for op in g.get_operations() if op.name.startswith("conv2/")]
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            out = sess.run(a, {x: np.random.RandomState(0).randn(2, 6, 6, 2)})
            assert (out >= 0).all()  # relu from the argscope


def test_argscope_rejects_unknown_layers_and_args():
    with pytest.raises(TypeError, match="not a registered layer"):
        with argscope(tf.nn.relu, alpha=1):
            pass
    with pytest.raises(TypeError, match="no argument"):
        with argscope(Conv2D, not_an_arg=1):
            pass
    with pytest.raises(TypeError, match="given twice"):
        with argscope(Conv2D, nl=tf.nn.relu, activation=None):
            pass


def _scale(x, factor=1.0, bias=0.0):
    return x * factor + bias


def test_enable_argscope_for_function_values():
    f = enable_argscope_for_function(_scale)
    with tf.Graph().as_default():
        x = tf.constant([1.0, 2.0])
        with argscope(f, factor=3.0):
            y1 = f(x)
            y2 = f(x, factor=10.0, bias=1.0)
        y3 = f(x)
        with tf1.Session() as sess:
            v1, v2, v3 = sess.run([y1, y2, y3])
    np.testing.assert_allclose(v1, [3.0, 6.0])
    np.testing.assert_allclose(v2, [11.0, 21.0])
    np.testing.assert_allclose(v3, [1.0, 2.0])


def test_enable_argscope_for_module_patches_public_functions():
    mod = types.ModuleType("mylayers")

    def double(x, k=2.0):
        return x * k

    def _private(x):
        return x

    mod.double = double
    mod._private = _private
    enable_argscope_for_module(mod, log_shape=False)
    assert hasattr(mod.double, "symbolic_function")
    assert mod._private is _private
    with tf.Graph().as_default():
        with argscope(mod.double, k=5.0):
            y = mod.double(tf.constant(2.0))
        with tf1.Session() as sess:
            assert sess.run(y) == 10.0


def test_backup_restore_and_freeze_collection():
    with tf.Graph().as_default():
        tf1.add_to_collection("mine", 1)
        tf1.add_to_collection("other", "a")
        bk = backup_collection(["mine"])
        tf1.add_to_collection("mine", 2)
        tf1.add_to_collection("other", "b")
        assert tf1.get_collection("mine") == [1, 2]
        restore_collection(bk)
        assert tf1.get_collection("mine") == [1]
        assert tf1.get_collection("other") == ["a", "b"]  # not in the backup: untouched

        all_bk = backup_collection()
        assert set(all_bk) >= {"mine", "other"}

        with freeze_collection(["mine", tf1.GraphKeys.TRAINABLE_VARIABLES]):
            tf1.add_to_collection("mine", 3)
            v = tf1.get_variable("v", [2])
            assert v in tf1.trainable_variables()
            tf1.get_collection_ref("mine").remove(1)
        assert tf1.get_collection("mine") == [1]
        assert tf1.trainable_variables() == []
        assert v in tf1.global_variables()  # other collections keep their changes
