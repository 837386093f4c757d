"""add_moving_summary's imported moving average (trainbus.tfutils._ema_graph) is the graph
TensorFlow's own constructors build, node for node, and is used only where it can be."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.training import moving_averages

from graphcmp import assert_same_nodes, built_by_tensorflow, var_attrs  # tests/_support
from trainbus.tfutils import _ema_graph
from trainbus.tfutils.summary import add_moving_summary

tf1 = tf.compat.v1


@pytest.fixture
def count_slow(monkeypatch):
    """The variables whose average TensorFlow's assign_moving_average built, in order."""
    calls = []
    real = moving_averages.assign_moving_average

    def spy(*a, **k):
        calls.append(a[0].op.name)
        return real(*a, **k)

    monkeypatch.setattr(moving_averages, "assign_moving_average", spy)
    return calls


def _build(make, slow):
    """A new graph with ``make()``'s tensors summarized: (graph, feeds, EMA tensors)."""
    g = tf.Graph()
    with built_by_tensorflow(_ema_graph, slow), g.as_default():
        feeds, summarize = make()
        emas = summarize()
    return g, feeds, emas


def _scalars(*names):
    def make():
        feeds = [tf1.placeholder(tf.float32, [], name=n) for n in names]
        return feeds, lambda: add_moving_summary(*feeds)
    return make


def _assert_same_graph(slow, fast):
    gs, gf = slow[0], fast[0]
    assert_same_nodes(gs, gf)
    vs, vf = gs.get_collection("variables"), gf.get_collection("variables")
    assert len(vf) == len(vs)
    for a, b in zip(vs, vf):
        assert type(b) is type(a)
        assert var_attrs(b, gf) == var_attrs(a, gs)  # the initial value, initializer, read, ...
        with gf.as_default():
            assert b.trainable is False and b.initializer.name == b.op.name + "/Assign"


def _run(built, steps=6):
    g, feeds, emas = built
    with g.as_default(), tf1.Session() as sess:
        sess.run(tf1.global_variables_initializer())
        out = [sess.run(emas, {f: np.float32(0.3 * i + 2 * j) for j, f in enumerate(feeds)}) for i in range(steps)]
        return np.array(out), {v.op.name: sess.run(v) for v in tf1.global_variables()}


@pytest.mark.parametrize("names", [("cost",), ("cost", "train/accuracy", "tower0/wd_cost")])
def test_imported_average_is_tensorflows_graph_and_values(names, count_slow):
    fast = _build(_scalars(*names), slow=False)
    assert count_slow == []  # imported, not built by TensorFlow's constructors
    slow = _build(_scalars(*names), slow=True)
    assert len(count_slow) == len(names)
    _assert_same_graph(slow, fast)
    stripped = [n.replace("tower0/", "") for n in names]
    assert [v.op.name for v in fast[0].get_collection("variables")] == \
        [x for n in stripped for x in (f"EMA/{n}", f"EMA/EMA/{n}/biased", f"EMA/EMA/{n}/local_step")]
    (vals_s, vars_s), (vals_f, vars_f) = _run(slow), _run(fast)
    np.testing.assert_array_equal(vals_f, vals_s)
    assert vars_f == vars_s
    # zero-debiased: the first average is the first value itself, then 0.95/0.05 mixing
    assert vals_f[0][0] == pytest.approx(0.0) and vals_f[1][0] == pytest.approx(0.3 * 0.05 / (1 - 0.95 ** 2))
    assert vars_f["EMA/EMA/cost/local_step"] == 6.0


def test_second_output_and_integer_tensors(count_slow):
    def make():
        pair = tf1.placeholder(tf.float32, [2], name="pair")
        a, b = tf.unstack(pair, name="halves")  # b is halves:1
        n = tf1.placeholder(tf.int32, [], name="count")  # cast to float32 first
        return [pair, n], lambda: add_moving_summary(b, n)

    fast = _build(make, slow=False)
    assert count_slow == []
    slow = _build(make, slow=True)
    _assert_same_graph(slow, fast)
    ops = {o.name for o in fast[0].get_operations()}
    assert {"EMA/halves", "EMA/count", "EMA/halves_EMA", "EMA/count_EMA"} <= ops


def test_variable_store_and_checkpoints_see_the_same_variables(tmp_path):
    fast = _build(_scalars("cost"), slow=False)
    with fast[0].as_default():
        with tf1.variable_scope("EMA", reuse=True):
            assert tf1.get_variable("cost") is fast[0].get_collection("variables")[0]
        with pytest.raises(ValueError, match="EMA/cost already exists"):
            tf1.get_variable("EMA/cost", shape=[])
    # a checkpoint written by one graph restores into the other, every variable
    paths = {}
    for tag, slow in (("fast", False), ("slow", True)):
        g, feeds, emas = _build(_scalars("cost"), slow=slow)
        with g.as_default(), tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for i in range(3):
                sess.run(emas, {feeds[0]: 1.0 + i})
            paths[tag] = tf1.train.Saver().save(sess, str(tmp_path / tag / "model"))
    assert tf.train.list_variables(paths["fast"]) == tf.train.list_variables(paths["slow"])
    for src, dst in (("fast", True), ("slow", False)):
        g, feeds, emas = _build(_scalars("cost"), slow=dst)
        with g.as_default(), tf1.Session() as sess:
            tf1.train.Saver().restore(sess, paths[src])
            assert sess.run(emas, {feeds[0]: 4.0})[0] == pytest.approx(
                np.average([1, 2, 3, 4], weights=[0.95 ** 3, 0.95 ** 2, 0.95, 1.0]), rel=1e-6)


def _in(context):
    def make():
        x = tf1.placeholder(tf.float32, [], name="cost")
        gate = tf1.placeholder(tf.float32, [], name="gate")

        def summarize():
            with context(x, gate):
                return add_moving_summary(x)
        return [x, gate], summarize
    return make


@pytest.mark.parametrize("context", [
    lambda x, gate: tf.control_dependencies([gate]),
    lambda x, gate: tf.device("/cpu:0"),
    lambda x, gate: tf1.colocate_with(gate),
], ids=["control_dependencies", "device", "colocate_with"])
def test_contexts_that_change_op_creation_build_tensorflows_way(context, count_slow):
    fast = _build(_in(context), slow=False)
    assert count_slow == ["EMA/cost"]  # built by TensorFlow, honouring the context
    slow = _build(_in(context), slow=True)
    _assert_same_graph(slow, fast)


def test_taken_names_and_other_dtypes_build_tensorflows_way(count_slow):
    def taken():  # a node of the name an update op would get: TensorFlow picks another name
        x = tf1.placeholder(tf.float32, [], name="cost")
        tf.constant(0.0, name="EMA/cost_EMA_apply")
        return [x], lambda: add_moving_summary(x)

    def scope_taken():  # "EMA" already used: the averages' scope is EMA_1
        x = tf1.placeholder(tf.float32, [], name="cost")
        tf.constant(0.0, name="EMA")
        return [x], lambda: add_moving_summary(x)

    def double():
        x = tf1.placeholder(tf.float64, [], name="cost")
        return [x], lambda: add_moving_summary(x)

    for make in (taken, scope_taken, double):
        count_slow.clear()
        fast = _build(make, slow=False)
        assert count_slow == [fast[0].get_collection("variables")[0].op.name]
        _assert_same_graph(_build(make, slow=True), fast)
    assert "EMA/cost_EMA_apply_1" in {o.name for o in _build(taken, slow=False)[0].get_operations()}


def test_nodes_this_tensorflow_refuses_build_tensorflows_way(count_slow, monkeypatch):
    """A TensorFlow whose ops differ from the written nodes (here: an op it does not know) refuses
    the import; the graph is left as it was and TensorFlow builds the average."""
    real = _ema_graph._plan

    def plan_with_unknown_op(*a):
        graph_def, variables, scopes = real(*a)
        graph_def.node[-1].op = "NoSuchOpInThisTensorFlow"  # after the variables: a late refusal
        return graph_def, variables, scopes

    monkeypatch.setattr(_ema_graph, "_plan", plan_with_unknown_op)
    fast = _build(_scalars("cost"), slow=False)
    assert count_slow == ["EMA/cost"]
    _assert_same_graph(_build(_scalars("cost"), slow=True), fast)


def test_later_names_are_chosen_as_after_tensorflows_construction():
    def make():
        x = tf1.placeholder(tf.float32, [], name="cost")

        def summarize():
            out = add_moving_summary(x)
            with tf1.name_scope("EMA/cost_EMA_apply/"):  # reopened: the next sub is sub_3
                _ = x - 1.0
                tf.identity(x, name="ReadVariableOp")
            tf.identity(x, name="EMA/cost/Read")
            return out
        return [x], summarize

    fast = _build(make, slow=False)
    _assert_same_graph(_build(make, slow=True), fast)
    names = {o.name for o in fast[0].get_operations()}
    assert {"EMA/cost_EMA_apply/sub_3", "EMA/cost_EMA_apply/ReadVariableOp_5", "EMA/cost/Read_1"} <= names


def test_training_uses_the_imported_average(count_slow, logdir):
    """The defaults workload's add_moving_summary (inside the trainer's tower) is imported, and
    its checkpoint holds the three variables the step kept."""
    from trainbus.callbacks import ModelSaver
    from trainbus.dataflow import DataFromList
    from trainbus.input_source import FeedInput
    from trainbus.train import ModelDesc, SimpleTrainer, TrainConfig, launch_train_with_config

    class Model(ModelDesc):
        def inputs(self):
            return [tf.TensorSpec([4, 3], tf.float32, "x")]

        def build_graph(self, x):
            w = tf1.get_variable("w", [3, 1])
            cost = tf.reduce_mean(tf.matmul(x, w) ** 2, name="cost")
            add_moving_summary(cost)
            return cost

        def optimizer(self):
            return tf1.train.GradientDescentOptimizer(0.1)

    data = [[np.ones((4, 3), np.float32)] for _ in range(3)]
    launch_train_with_config(TrainConfig(model=Model(), data=FeedInput(DataFromList(data, shuffle=False)),
                                         callbacks=[ModelSaver()], max_epoch=1, steps_per_epoch=3), SimpleTrainer())
    assert count_slow == []
    ckpt = tf.train.latest_checkpoint(str(logdir))
    names = dict(tf.train.list_variables(ckpt))
    assert {"EMA/cost", "EMA/EMA/cost/biased", "EMA/EMA/cost/local_step"} <= set(names)
    assert tf.train.load_variable(ckpt, "EMA/EMA/cost/local_step") == 3.0


def test_usable_only_where_nothing_changes_how_ops_are_made():
    with tf.Graph().as_default() as g:
        x = tf1.placeholder(tf.float32, [], name="x")
        assert _ema_graph.usable(g, x)
        with tf1.name_scope("outer"):  # the written names are absolute
            assert not _ema_graph.usable(g, x)
        assert not _ema_graph.usable(g, tf1.placeholder(tf.float64, []))
        assert not _ema_graph.usable(g, tf1.get_variable("v", []))  # a variable, not a tensor
        with tf.variable_creator_scope(lambda next_creator, **kw: next_creator(**kw)):
            assert not _ema_graph.usable(g, x)
        assert tf1.resource_variables_enabled()
        tf1.disable_resource_variables()  # reference variables (TF1 behaviour): other nodes
        try:
            assert not _ema_graph.usable(g, x)
        finally:
            tf1.enable_resource_variables()
    with tf.Graph().as_default() as other:
        assert not _ema_graph.usable(other, x)  # x is another graph's
