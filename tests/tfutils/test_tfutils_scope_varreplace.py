"""scope_utils and varreplace in real graphs."""

import logging

import numpy as np
import tensorflow as tf

from trainbus.models import FullyConnected
from trainbus.tfutils.scope_utils import (auto_reuse_variable_scope, cached_name_scope, under_name_scope,
                                          under_variable_scope)
from trainbus.tfutils.varreplace import custom_getter_scope, freeze_variables, remap_variables

tf1 = tf.compat.v1


def _vars():
    return sorted(v.op.name for v in tf1.global_variables())


def test_auto_reuse_variable_scope():
    @auto_reuse_variable_scope
    def head(x):
        return tf.reduce_sum(x * tf1.get_variable("w", [2], initializer=tf1.ones_initializer()))

    with tf.Graph().as_default():
        x = tf.constant([1.0, 2.0])
        a = head(x)
        b = head(x * 2)           # reuses w
        with tf1.variable_scope("newscope"):
            c = head(x)           # new variable newscope/w
            d = head(x)           # reuses it
        assert _vars() == ["newscope/w", "w"]
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            assert sess.run([a, b, c, d]) == [3.0, 6.0, 3.0, 3.0]


def test_cached_name_scope_reenters_same_scope():
    with tf.Graph().as_default():
        with tf1.name_scope("outer"):
            with cached_name_scope("summ") as ns1:
                t1 = tf.constant(1.0, name="t")
            with cached_name_scope("summ") as ns2:
                t2 = tf.constant(1.0, name="u")
            with cached_name_scope("inner", top_level=False):
                t3 = tf.constant(1.0, name="v")
        assert ns1 == ns2 == "summ/"
        assert t1.op.name == "summ/t" and t2.op.name == "summ/u"
        assert t3.op.name == "outer/inner/v"


def test_under_name_scope_default_decorator_arg_and_call_arg(caplog):
    @under_name_scope()
    def rms(x):
        return tf.sqrt(tf.reduce_mean(tf.square(x)), name="out")

    @under_name_scope("fixed")
    def other(x):
        return tf.identity(x, name="out")

    with tf.Graph().as_default():
        x = tf.constant([3.0, 4.0])
        assert rms(x).op.name == "rms/out"
        assert rms(x, name_scope="scope").op.name == "scope/out"
        assert other(x).op.name == "fixed/out"
        with caplog.at_level(logging.WARNING, logger="trainbus"):
            y = rms(x, name_scope="scope")  # taken
        assert y.op.name == "scope_1/out"
        assert "taken" in caplog.text
        with tf1.Session() as sess:
            assert abs(sess.run(rms(x)) - np.sqrt(12.5)) < 1e-6


def test_under_variable_scope_and_reuse():
    @under_variable_scope()
    def mid_level(x):
        return FullyConnected("fc", x, 1)

    with tf.Graph().as_default():
        x = tf.ones([1, 3])
        mid_level(x)
        mid_level(x, reuse=True)
        assert _vars() == ["mid_level/fc/W", "mid_level/fc/b"]


def test_custom_getter_scope_keeps_scopes_and_calls_getter():
    names = []

    def getter(getter, *args, **kwargs):
        names.append(args[0] if args else kwargs["name"])
        return getter(*args, **kwargs)

    with tf.Graph().as_default():
        with tf1.variable_scope("vs"):
            with custom_getter_scope(getter):
                v = tf1.get_variable("a", [1])
                t = tf.identity(v, name="t")
        assert names == ["vs/a"]
        assert v.op.name == "vs/a" and t.op.name == "vs/t"


def test_remap_variables_maps_values():
    with tf.Graph().as_default():
        x = tf.ones([1, 2])
        with remap_variables(lambda v: tf.round(v)):
            y = FullyConnected("fc", x, 1, kernel_initializer=tf1.constant_initializer(0.7),
                               bias_initializer=tf1.constant_initializer(0.2))
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            assert sess.run(y)[0, 0] == 2.0   # round(0.7) * 2 + round(0.2)


def _train_two_layers(stop_gradient, skip_collection):
    with tf.Graph().as_default():
        x = tf.constant([[1.0, 2.0]])
        with freeze_variables(stop_gradient=stop_gradient, skip_collection=skip_collection):
            h = FullyConnected("frozen", x, 2, kernel_initializer=tf1.ones_initializer())
        y = FullyConnected("free", h, 1, kernel_initializer=tf1.ones_initializer())
        loss = tf.reduce_sum(tf.square(y))
        trainable = sorted(v.op.name for v in tf1.trainable_variables())
        model = sorted(v.op.name for v in tf1.get_collection(tf1.GraphKeys.MODEL_VARIABLES))
        train_op = tf1.train.GradientDescentOptimizer(0.01).minimize(
            loss, var_list=[v for v in tf1.trainable_variables()])
        all_vars = {v.op.name: v for v in tf1.global_variables()}
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            before = sess.run(all_vars)
            sess.run(train_op)
            after = sess.run(all_vars)
    return trainable, model, before, after


def test_freeze_variables_stop_gradient_keeps_values():
    trainable, model, before, after = _train_two_layers(stop_gradient=True, skip_collection=False)
    assert "frozen/W" in trainable  # still in the collection, but gets no gradient
    np.testing.assert_array_equal(before["frozen/W"], after["frozen/W"])
    np.testing.assert_array_equal(before["frozen/b"], after["frozen/b"])
    assert not np.array_equal(before["free/W"], after["free/W"])


def test_freeze_variables_skip_collection_keeps_values():
    trainable, model, before, after = _train_two_layers(stop_gradient=False, skip_collection=True)
    assert trainable == ["free/W", "free/b"]
    assert model == ["frozen/W", "frozen/b"]
    np.testing.assert_array_equal(before["frozen/W"], after["frozen/W"])
    assert not np.array_equal(before["free/W"], after["free/W"])
