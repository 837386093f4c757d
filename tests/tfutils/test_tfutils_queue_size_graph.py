"""QueueInput's imported moving average of its queue's size (trainbus.tfutils._queue_size_graph)
is the graph TensorFlow's own constructors build, node for node, and is used only where it can be."""

import contextlib

import numpy as np
import pytest
import tensorflow as tf

from graphcmp import assert_same_nodes, built_by_tensorflow  # tests/_support
from trainbus.dataflow import DataFromList
from trainbus.input_source import BatchQueueInput, QueueInput
from trainbus.input_source.queue import _QueueSizeStat
from trainbus.testing import TinyModel, tiny_dataflow
from trainbus.tfutils import _queue_size_graph
from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config

tf1 = tf.compat.v1
SPEC = [tf.TensorSpec([2, 3], tf.float32, "x"), tf.TensorSpec([2], tf.int32, "y")]


@pytest.fixture
def imports(monkeypatch):
    """The name scopes under which the average was imported (build() returned its ops)."""
    made = []
    real = _queue_size_graph.build

    def spy(graph, scope, size, decay):
        out = real(graph, scope, size, decay)
        if out is not None:
            made.append(scope)
        return out

    monkeypatch.setattr(_queue_size_graph, "build", spy)
    return made


def _df():
    return DataFromList([[np.zeros((2, 3), "float32"), np.zeros(2, "int32")]], shuffle=False)


def _source():
    return QueueInput(_df())


def _build(slow, make=_source, context=None, before=None):
    """(graph, the stat callback, the input source): ``make()``'s source set up in a new graph and
    its queue-size average built by the callback's own code, imported or (``slow``) TensorFlow's way."""
    g = tf.Graph()
    with built_by_tensorflow(_queue_size_graph, slow), g.as_default():
        if before is not None:
            before()
        src = make()
        src.setup(SPEC)
        src.get_input_tensors()
        stat = [cb for cb in src.get_callbacks() if isinstance(cb, _QueueSizeStat)][0]
        with context() if context is not None else contextlib.nullcontext():
            stat._setup_graph()
    return g, stat, src


def _averages(built, sizes):
    """The average after each step, the queue holding ``sizes[i]`` datapoints at step i."""
    g, stat, src = built
    out = []
    with g.as_default(), tf1.Session() as sess:
        sess.run(stat._init)
        for n in sizes:
            while sess.run(src._size_op) < n:
                sess.run(src.thread.op, {src._all_placehdrs[0]: np.zeros((2, 3), "float32"),
                                         src._all_placehdrs[1]: np.zeros(2, "int32")})
            while sess.run(src._size_op) > n:
                sess.run(src._drain_op)
            out.append(float(sess.run(stat._args.fetches.outputs[0])))
    return out


@pytest.mark.parametrize("decay", [0.5, 0.8])
def test_imported_average_is_tensorflows_graph_and_values(decay, imports, monkeypatch):
    monkeypatch.setattr(_QueueSizeStat, "DECAY", decay)
    fast = _build(slow=False)
    assert imports == ["QueueInput"]
    slow = _build(slow=True)
    assert imports == ["QueueInput"]
    assert_same_nodes(slow[0], fast[0])  # every NodeDef, the names in use, the collections
    assert fast[1]._args.fetches.name == slow[1]._args.fetches.name == "QueueInput/queue_size_EMA"
    assert fast[1]._init.name == slow[1]._init.name == "QueueInput/queue_size_init"
    g = fast[0]
    assert [t.name for t in g.get_collection(tf1.GraphKeys.SUMMARIES)] == ["QueueInput/queue_size-summary:0"]
    assert g.get_collection(tf1.GraphKeys.GLOBAL_VARIABLES) == []  # in no collection: checkpoints don't see them
    assert g.get_collection(tf1.GraphKeys.LOCAL_VARIABLES) == []
    sizes = [4, 4, 0, 10, 7, 3]
    expected, biased = [], 0.0
    for i, n in enumerate(sizes, 1):  # zero-debiased
        biased = biased * decay + n * (1 - decay)
        expected.append(biased / (1 - decay ** i))
    assert _averages(fast, sizes) == pytest.approx(expected, rel=1e-6)
    assert _averages(slow, sizes) == pytest.approx(expected, rel=1e-6)


def test_names_made_after_are_tensorflows():
    names = []
    for slow in (True, False):
        g = _build(slow=slow)[0]
        with g.as_default():
            made = [tf.identity(1.0, name="QueueInput/ReadVariableOp").op.name]
            with tf1.name_scope("QueueInput/"):
                made += [tf.identity(1.0, name=n).op.name for n in ("mul", "queue_size", "Const", "Pow")]
            with tf1.name_scope("QueueInput/queue_size_biased/Read/"):
                made.append(tf.identity(1.0, name="ReadVariableOp").op.name)
        names.append(made)
    assert names[0] == names[1]
    assert names[1] == ["QueueInput/ReadVariableOp_4", "QueueInput/mul_2", "QueueInput/queue_size_1",
                        "QueueInput/Const_1", "QueueInput/Pow_1", "QueueInput/queue_size_biased/Read/ReadVariableOp_1"]


@pytest.mark.parametrize("make, scope", [
    (lambda: BatchQueueInput(DataFromList([[np.zeros(3, "float32"), np.int32(0)]], shuffle=False), 2),
     "BatchQueueInput"),
    (lambda: _named(QueueInput(_df()), "train/input"), "train/input"),
])
def test_other_sources_and_scopes_are_imported_as_tensorflow_builds_them(make, scope, imports):
    fast = _build(slow=False, make=make)
    assert imports == [scope]
    assert_same_nodes(_build(slow=True, make=make)[0], fast[0])
    assert fast[1]._args.fetches.name == f"{scope}/queue_size_EMA"


def _named(src, name):
    src.use_name_scope(name)
    return src


@pytest.mark.parametrize("context", [
    lambda: tf1.control_dependencies([tf.constant(1.0, name="dep").op]),
    lambda: tf1.device("/cpu:0"),
    lambda: tf1.colocate_with(tf.constant(1.0, name="here")),
    lambda: tf1.variable_creator_scope(lambda next_creator, **kw: next_creator(**kw)),
])
def test_contexts_that_change_op_creation_build_tensorflows_way(context, imports):
    fast = _build(slow=False, context=context)
    assert imports == []
    assert_same_nodes(_build(slow=True, context=context)[0], fast[0])


def test_taken_names_build_tensorflows_way(imports):
    """A second QueueInput in one graph, or a name of the average already used: TensorFlow's
    constructors would choose other names, so they build it."""
    def two_sources():
        first = _source()
        first.setup(SPEC)
        first.get_input_tensors()
        [cb for cb in first.get_callbacks() if isinstance(cb, _QueueSizeStat)][0]._setup_graph()
    fast = _build(slow=False, before=two_sources)
    assert imports == ["QueueInput"]  # the first source's average only
    slow = _build(slow=True, before=two_sources)
    assert_same_nodes(slow[0], fast[0])
    assert fast[1]._args.fetches.name == "QueueInput/queue_size_EMA_1"

    imports.clear()
    taken = lambda: tf.constant(0.0, name="QueueInput/mul_1")  # noqa: E731
    fast = _build(slow=False, before=taken)
    assert imports == []
    assert_same_nodes(_build(slow=True, before=taken)[0], fast[0])


def test_ref_variables_build_tensorflows_way(imports):
    tf1.disable_resource_variables()
    try:
        fast = _build(slow=False)
        assert imports == []
        assert fast[0].get_operation_by_name("QueueInput/queue_size_biased").type == "VariableV2"
    finally:
        tf1.enable_resource_variables()


def test_nodes_this_tensorflow_refuses_build_tensorflows_way(monkeypatch, imports):
    """The import refused (an op this TensorFlow does not know): nothing is added, the names stay
    free, and TensorFlow's constructors build the same graph as without the attempt."""
    real = _queue_size_graph._plan

    def plan_with_unknown_op(scope, size_name, decay):
        graph_def, names = real(scope, size_name, decay)
        graph_def.node[-1].op = "NoSuchOpInThisTensorFlow"
        return graph_def, names

    monkeypatch.setattr(_queue_size_graph, "_plan", plan_with_unknown_op)
    fast = _build(slow=False)
    assert imports == []
    assert_same_nodes(_build(slow=True)[0], fast[0])


def test_usable_only_for_an_int32_size_of_this_graph():
    g = tf.Graph()
    with g.as_default():
        size = tf1.FIFOQueue(2, [tf.float32]).size()
        assert _queue_size_graph.usable(g, size)
        assert not _queue_size_graph.usable(g, tf.cast(size, tf.int64))
    assert not _queue_size_graph.usable(tf.Graph(), size)


def test_a_training_fed_by_a_dataflow_uses_it(imports, logdir):
    """TrainConfig(dataflow=...) trains through a QueueInput: its average is imported, updated at
    every step and written with the other summaries."""
    trainer = SimpleTrainer()
    launch_train_with_config(TrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), max_epoch=1, steps_per_epoch=5),
                             trainer)
    assert imports == ["QueueInput"]
    history = trainer.monitors.get_history("QueueInput/queue_size")
    assert [s for s, _ in history] == [5]
    assert 0.0 <= history[0][1] <= 50.0
