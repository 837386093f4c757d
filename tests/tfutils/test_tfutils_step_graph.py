"""The trainer's imported global step and increment (trainbus.tfutils._step_graph) are the graph
TensorFlow's own constructors build, node for node, and are used only where they can be."""

import numpy as np
import pytest
import tensorflow as tf

from graphcmp import assert_same_nodes, built_by_tensorflow, var_attrs  # tests/_support
from trainbus.tfutils import _step_graph
from trainbus.tfutils.common import get_global_step_var
from trainbus.train import SimpleTrainer

tf1 = tf.compat.v1


@pytest.fixture
def imports(monkeypatch):
    """How many times the trainer's increment was imported (build() returned an op)."""
    made = []
    real = _step_graph.build

    def spy(graph):
        op = real(graph)
        if op is not None:
            made.append(op.name)
        return op

    monkeypatch.setattr(_step_graph, "build", spy)
    return made


def _model():
    """A little graph first, with constants at the top level: the increment's constant is then
    named Const_<n>, as TensorFlow names it."""
    x = tf1.placeholder(tf.float32, [None, 3], name="x")
    w = tf1.get_variable("w", [3, 1])
    tf.reduce_mean(tf.matmul(x, w) * tf.constant(2.0) + tf.constant(1.0), name="cost")


def _build(slow, make=_model, context=None):
    """(graph, increment op, the global step) made by the trainer's own code, imported or
    (``slow``) TensorFlow's way."""
    g = tf.Graph()
    with built_by_tensorflow(_step_graph, slow), g.as_default():
        make()
        trainer = SimpleTrainer()
        if context is None:
            op = trainer._make_step_incr_op()
        else:
            with context():
                op = trainer._make_step_incr_op()
        return g, op, get_global_step_var()


def _assert_same_graph(slow, fast):
    (gs, op_s, var_s), (gf, op_f, var_f) = slow, fast
    assert_same_nodes(gs, gf)
    assert op_f.name == op_s.name
    assert type(var_f) is type(var_s)
    assert var_attrs(var_f, gf) == var_attrs(var_s, gs)


def test_imported_step_is_tensorflows_graph_and_counts(imports):
    fast = _build(slow=False)
    assert imports == ["AssignAddVariableOp"]
    slow = _build(slow=True)
    assert len(imports) == 1
    _assert_same_graph(slow, fast)
    g, op, step = fast
    assert op.inputs[1].op.name.startswith("Const_")  # after the model's top-level constants
    assert step.dtype.base_dtype == tf.int64 and step.trainable is False
    assert step.aggregation == tf.VariableAggregation.ONLY_FIRST_REPLICA
    with g.as_default():
        assert tf1.train.get_global_step() is step
        assert tf1.train.get_or_create_global_step() is step
        with tf1.variable_scope("", reuse=True):
            assert tf1.get_variable("global_step", dtype=tf.int64) is step  # the variable store knows it
        with pytest.raises(ValueError, match="already exists"):
            tf1.get_variable("global_step", [], dtype=tf.int64)
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for _ in range(3):
                sess.run(op)
            assert sess.run(step) == 3


def test_names_made_after_are_tensorflows():
    """Names made after it, at the top level and in the variable's scopes, are TensorFlow's."""
    names = []
    for slow in (True, False):
        g = _build(slow=slow)[0]
        with g.as_default():
            made = [tf.constant(3, name="Const").op.name, tf.identity(1, name="AssignAddVariableOp").op.name]
            with tf1.name_scope("global_step/Read/"):
                made.append(tf.identity(1, name="ReadVariableOp").op.name)
            with tf1.name_scope("global_step"):
                made.append(tf.identity(1, name="x").op.name)
        names.append(made)
    assert names[0] == names[1]
    assert names[1][1:] == ["AssignAddVariableOp_1", "global_step/Read/ReadVariableOp_1", "global_step_1/x"]


def test_checkpoints_hold_the_same_global_step(tmp_path):
    paths = {}
    for slow in (True, False):
        g, op, step = _build(slow=slow)
        with g.as_default(), tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for _ in range(2 if slow else 5):
                sess.run(op)
            paths[slow] = tf1.train.Saver().save(sess, str(tmp_path / f"s{slow}" / "model"))
    for slow in (True, False):
        g, op, step = _build(slow=not slow)
        with g.as_default(), tf1.Session() as sess:
            tf1.train.Saver().restore(sess, paths[slow])
            assert sess.run(step) == (2 if slow else 5)
            sess.run(op)
            assert sess.run(step) == (3 if slow else 6)


@pytest.mark.parametrize("context", ["control_dependencies", "device", "colocate_with", "variable_creator"])
def test_contexts_that_change_op_creation_build_tensorflows_way(context, imports):
    def make_context():
        anchor = tf1.get_default_graph().get_tensor_by_name("cost:0")
        return {"control_dependencies": lambda: tf1.control_dependencies([anchor]),
                "device": lambda: tf1.device("/device:CPU:0"),
                "colocate_with": lambda: tf1.colocate_with(anchor),
                "variable_creator": lambda: tf1.variable_creator_scope(lambda next_creator, **kw: next_creator(**kw)),
                }[context]()

    fast = _build(slow=False, context=make_context)
    assert imports == []
    _assert_same_graph(_build(slow=True, context=make_context), fast)


def _existing_step():
    _model()
    tf1.train.get_or_create_global_step()


def _taken_name():
    _model()
    tf.constant(0, name="global_step/Read")  # a name the variable's nodes need, taken


def _reference_variables():
    tf1.disable_resource_variables()
    _model()


@pytest.mark.parametrize("make", [_existing_step, _taken_name, _reference_variables],
                         ids=["existing-global-step", "taken-name", "reference-variables"])
def test_other_graphs_build_tensorflows_way(make, imports):
    try:
        fast = _build(slow=False, make=make)
        assert imports == []
        slow = _build(slow=True, make=make)
    finally:
        tf1.enable_resource_variables()
    _assert_same_graph(slow, fast)


def test_nodes_this_tensorflow_refuses_build_tensorflows_way(monkeypatch, imports):
    """The import refused (an op this TensorFlow does not know): nothing is added, the names
    it had marked are free again, and TensorFlow's constructors build the same graph."""
    real = tf.graph_util.import_graph_def

    def refusing(graph_def, **kw):
        graph_def.node[-1].op = "NoSuchOpInThisTensorFlow"  # the last node: a late refusal
        return real(graph_def, **kw)

    monkeypatch.setattr(tf.graph_util, "import_graph_def", refusing)
    fast = _build(slow=False)
    assert imports == []
    monkeypatch.undo()
    _assert_same_graph(_build(slow=True), fast)


def test_a_training_uses_it(imports, logdir):
    from trainbus.callbacks import ModelSaver
    from trainbus.input_source import FeedInput
    from trainbus.testing import TinyModel, tiny_dataflow
    from trainbus.train import TrainConfig, launch_train_with_config

    launch_train_with_config(TrainConfig(model=TinyModel(), data=FeedInput(tiny_dataflow()), callbacks=[ModelSaver()],
                                         max_epoch=2, steps_per_epoch=3), SimpleTrainer())
    assert imports == ["AssignAddVariableOp"]
    ckpt = tf.train.latest_checkpoint(str(logdir))
    assert tf.train.load_variable(ckpt, "global_step") == 6
    assert np.asarray(tf.train.load_variable(ckpt, "global_step")).dtype == np.int64
