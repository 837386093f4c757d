"""trainbus.tfutils.summary: the summary helpers, in plain graphs and sessions."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from trainbus.tfutils.summary import (
    MOVING_SUMMARY_OPS_KEY,
    add_activation_summary,
    add_moving_summary,
    add_param_summary,
    add_tensor_summary,
)
from trainbus.tfutils.tower import PredictTowerContext, TrainTowerContext

tf1 = tf.compat.v1


def _values(graph, summ_op, feed=None):
    with tf1.Session(graph=graph) as sess:
        sess.run(tf1.global_variables_initializer())
        raw = sess.run(summ_op, feed)
    s = tf1.Summary.FromString(raw)
    return {v.tag: (v.simple_value if v.WhichOneof("value") == "simple_value" else "histo") for v in s.value}


def test_add_tensor_summary_types():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([[0.0, 3.0], [0.0, 4.0]], name="x")
        add_tensor_summary(x, ["scalar", "histogram", "sparsity", "mean", "rms"][1:], name="act")
        add_tensor_summary(tf.constant(7.0, name="seven"), ["scalar"])
        vals = _values(g, tf1.summary.merge_all())
    assert vals["act-histogram"] == "histo"
    assert vals["act-sparsity"] == pytest.approx(0.5)
    assert vals["act-mean"] == pytest.approx(7.0 / 4)
    assert vals["act-rms"] == pytest.approx(np.sqrt(25.0 / 4))
    assert vals["seven-summary"] == pytest.approx(7.0)


def test_add_tensor_summary_collections_and_towers():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0, name="x")
        add_tensor_summary(x, ["scalar"], collections=["MINE"])
        assert len(tf1.get_collection("MINE")) == 1 and not tf1.get_collection(tf1.GraphKeys.SUMMARIES)
        with TrainTowerContext("tower1", index=1, total=2):
            add_tensor_summary(x, ["scalar"])
        assert not tf1.get_collection(tf1.GraphKeys.SUMMARIES)
        with TrainTowerContext("tower1b", index=1, total=2):
            add_tensor_summary(x, ["scalar"], main_tower_only=False)
            assert len(tf1.get_collection(tf1.GraphKeys.SUMMARIES)) == 1
        # a non-main training tower leaves SUMMARIES as it found it (as tensorpack's does)
        assert not tf1.get_collection(tf1.GraphKeys.SUMMARIES)


def test_add_tensor_summary_bad_types():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0)
        with pytest.raises(ValueError, match="unknown summary type"):
            add_tensor_summary(x, ["scalar", "median"])
        with pytest.raises(TypeError, match=r"\['rms'\]"):
            add_tensor_summary(x, "rms")


def test_add_param_summary_regex_and_scope():
    g = tf.Graph()
    with g.as_default():
        with tf1.variable_scope("fc"):
            tf1.get_variable("W", initializer=tf.ones([2, 2]))
            tf1.get_variable("b", initializer=tf.zeros([2]))
        tf1.get_variable("other", initializer=tf.ones([3]), trainable=False)
        add_param_summary((".*/W", ["rms", "mean"]), ("fc/b", ["sparsity"]))
        vals = _values(g, tf1.summary.merge_all())
    assert vals == {"param-summary/fc/W-rms": pytest.approx(1.0), "param-summary/fc/W-mean": pytest.approx(1.0),
                    "param-summary/fc/b-sparsity": pytest.approx(1.0)}
    with pytest.raises(TypeError, match="pair"):
        add_param_summary(".*/W")


def test_add_activation_summary_defaults():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant([[1.0, 0.0], [0.0, 0.0]], name="relu")
        add_activation_summary(x)
        add_activation_summary(tf.constant([1.0, 2.0], name="vec"))  # rank 1: skipped with a warning
        vals = _values(g, tf1.summary.merge_all())
    assert set(vals) == {"activation-summary/relu-sparsity", "activation-summary/relu-rms",
                         "activation-summary/relu-histogram"}
    assert vals["activation-summary/relu-sparsity"] == pytest.approx(0.75)


def test_add_moving_summary_values_and_collection():
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, [], name="cost")
        n = tf1.placeholder(tf.int32, [], name="count")
        out = add_moving_summary(x, n, decay=0.5)
        assert len(out) == 2 and all(isinstance(t, tf.Tensor) for t in out)
        assert tf1.get_collection(MOVING_SUMMARY_OPS_KEY) == out
        assert {v.op.name for v in tf1.global_variables()} >= {"EMA/cost", "EMA/count"}
        assert not tf1.trainable_variables()
        merged = tf1.summary.merge_all()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            biased, t = 0.0, 0
            for val in [1.0, 3.0, 2.0]:
                raw, ema = sess.run([merged, out[0]], {x: val, n: 4})
                t += 1
                biased = 0.5 * biased + 0.5 * val
                tags = {v.tag: v.simple_value for v in tf1.Summary.FromString(raw).value}
                assert ema == pytest.approx(biased / (1 - 0.5 ** t), rel=1e-6)
                assert tags["cost-summary"] == pytest.approx(ema, rel=1e-6)
                assert tags["count-summary"] == pytest.approx(4.0, rel=1e-6)


def test_add_moving_summary_tower_rules():
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(1.0, name="loss")
        with TrainTowerContext("tower0", index=0, total=2):
            y = tf.identity(x, name="cost")
            assert len(add_moving_summary(y)) == 1
        with TrainTowerContext("tower1", index=1, total=2):
            assert add_moving_summary(tf.identity(x, name="cost")) == []
        with PredictTowerContext("pred"):
            assert add_moving_summary(tf.identity(x, name="cost")) == []
        # the tower prefix is dropped from the name
        assert [v.op.name for v in tf1.global_variables() if v.op.name.count("/") == 1] == ["EMA/cost"]
        assert len(tf1.get_collection(tf1.GraphKeys.SUMMARIES)) == 1


def test_add_moving_summary_bad_input():
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(ValueError, match="only scalar"):
            add_moving_summary(tf.zeros([3], name="vec"))
        with pytest.raises(TypeError, match="separate arguments"):
            add_moving_summary([tf.constant(1.0)])
        with pytest.raises(TypeError, match="scalar tf.Tensors"):
            add_moving_summary(1.0)
        with pytest.raises(ValueError, match="decay"):
            add_moving_summary(tf.constant(1.0), decay=1.5)
        add_moving_summary(tf.constant(1.0, name="dup"))
        with TrainTowerContext("tower0"), pytest.raises(ValueError, match="already exists"):
            add_moving_summary(tf.constant(2.0, name="dup"))  # tower0/dup: same name without the tower prefix
