"""ModelDescBase / ModelDesc / InputDesc: input signature, names, training flag, optimizer."""

from __future__ import annotations

import pytest
import tensorflow as tf

import trainbus
import trainbus.train
from trainbus.tfutils.tower import TowerContext, TrainTowerContext
from trainbus.train.model_desc import InputDesc, ModelDesc, ModelDescBase

tf1 = tf.compat.v1


class SpecModel(ModelDesc):
    def __init__(self):
        self.calls = 0

    def inputs(self):
        self.calls += 1
        return [tf.TensorSpec([None, 3], tf.float32, "x"), tf.TensorSpec([None], tf.int64, "label")]

    def build_graph(self, x, label):
        self.flags = getattr(self, "flags", []) + [self.training]
        w = tf1.get_variable("w", [3], initializer=tf1.ones_initializer())
        return tf.reduce_sum(x * w, name="cost")

    def optimizer(self):
        self.opt_calls = getattr(self, "opt_calls", 0) + 1
        return tf1.train.GradientDescentOptimizer(0.1)


def test_the_same_classes_under_every_path():
    assert trainbus.ModelDesc is trainbus.train.ModelDesc is ModelDesc
    assert trainbus.ModelDescBase is trainbus.train.ModelDescBase is ModelDescBase


def test_signature_from_tensor_specs_is_computed_once_in_its_own_graph():
    m = SpecModel()
    with tf.Graph().as_default() as g:
        sig = m.get_input_signature()
        assert g.get_operations() == []          # inputs() did not build into the caller's graph
    assert [(s.name, s.dtype, s.shape.as_list()) for s in sig] == [("x", tf.float32, [None, 3]),
                                                                  ("label", tf.int64, [None])]
    assert m.input_names == ["x", "label"]
    m.get_input_signature()
    assert m.calls == 1
    sig.append("garbage")                        # the caller's list is a copy
    assert len(m.get_input_signature()) == 2
    assert SpecModel().get_input_signature() == m.get_input_signature()


def test_signature_from_placeholders_and_input_desc():
    class PH(ModelDescBase):
        def inputs(self):
            return [tf1.placeholder(tf.uint8, [None, 28, 28], "image"), tf1.placeholder(tf.int32, [None], "label")]

    sig = PH().get_input_signature()
    assert all(isinstance(s, tf.TensorSpec) for s in sig)
    assert [(s.name, s.dtype, s.shape.as_list()) for s in sig] == [("image", tf.uint8, [None, 28, 28]),
                                                                  ("label", tf.int32, [None])]

    class Old(ModelDescBase):
        def inputs(self):
            return [InputDesc(tf.float32, (None, 2), "a")]

    assert Old().get_input_signature() == [tf.TensorSpec([None, 2], tf.float32, "a")]
    d = InputDesc(tf.float32, (None, 2), "a")
    with tf.Graph().as_default():
        p = d.build_placeholder()
        assert p.name == "a:0" and p.op.type == "Placeholder"
        assert d.build_placeholder_reuse() is p


@pytest.mark.parametrize("inputs,err,match", [
    (lambda: [], TypeError, "non-empty list"),
    (lambda: tf.TensorSpec([1], tf.float32, "x"), TypeError, "non-empty list"),
    (lambda: ["x"], TypeError, r"inputs\(\)\[0\] is 'x'"),
    (lambda: [tf.TensorSpec([1], tf.float32)], ValueError, "has no name"),
    (lambda: [tf.TensorSpec([1], tf.float32, "x"), tf.TensorSpec([2], tf.int32, "x")], ValueError, r"\['x'\]"),
    (lambda: [tf.zeros([2], name="z")], TypeError, "made by a"),
])
def test_bad_inputs_say_what_is_wrong(inputs, err, match):
    class Bad(ModelDescBase):
        def inputs(self):
            return inputs()

    with pytest.raises(err, match=match):
        Bad().get_input_signature()


def test_placeholder_of_another_graph_is_refused():
    with tf.Graph().as_default():
        outside = tf1.placeholder(tf.float32, [None], "p")

    class Bad(ModelDescBase):
        def inputs(self):
            return [outside]

    with pytest.raises(ValueError, match="create the placeholders inside inputs"):
        Bad().get_input_signature()


def test_missing_overrides_are_reported():
    with pytest.raises(TypeError, match="must override inputs"):
        ModelDescBase().get_input_signature()
    with pytest.raises(TypeError, match="must override build_graph"):
        ModelDescBase().build_graph()
    with pytest.raises(TypeError, match="must override optimizer"):
        ModelDesc().get_optimizer()


def test_training_reads_the_tower_context():
    m = SpecModel()
    with pytest.raises(RuntimeError, match="only known while the model is built under a TowerContext"):
        m.training
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, [None, 3])
        y = tf1.placeholder(tf.int64, [None])
        with TowerContext("", is_training=True):
            m.build_graph(x, y)
        with TowerContext("pred", is_training=False):
            m.build_graph(x, y)
        with TrainTowerContext("tower1", index=1, total=2):
            m.build_graph(x, y)
    assert m.flags == [True, False, True]


def test_get_optimizer_is_memoized_and_checked():
    m = SpecModel()
    with tf.Graph().as_default():
        assert m.get_optimizer() is m.get_optimizer()
    assert m.opt_calls == 1

    class Wrong(ModelDesc):
        def optimizer(self):
            return "sgd"

    with pytest.raises(TypeError, match="must return a tf.compat.v1.train.Optimizer, got 'sgd'"):
        Wrong().get_optimizer()


def test_models_with_eq_are_fine():
    class Eq(SpecModel):
        __hash__ = None

        def __eq__(self, other):
            return True

    m = Eq()
    assert m.input_names == ["x", "label"]   # memoization does not hash the model
