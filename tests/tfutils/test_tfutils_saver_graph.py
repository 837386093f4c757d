"""The Saver whose restore ops are imported (trainbus.tfutils._saver_graph) builds the graph
TensorFlow's own builder builds, node for node, restores the same values, and imports only
where it can."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.training import saver as saver_lib

from graphcmp import assert_same_nodes  # tests/_support
from trainbus.tfutils import _saver_graph
from trainbus.tfutils.varmanip import make_saver

tf1 = tf.compat.v1


@pytest.fixture
def counts():
    """The builder's counts, from zero, as a dict updated in place."""
    saved = dict(_saver_graph.ImportingSaverBuilder.counts)
    _saver_graph.ImportingSaverBuilder.counts.update(imported=0, tensorflow=0)
    yield _saver_graph.ImportingSaverBuilder.counts
    _saver_graph.ImportingSaverBuilder.counts.update(saved)


def _model():
    """Variables of several kinds, dtypes, devices and scopes."""
    with tf1.variable_scope("conv0"):
        tf1.get_variable("W", [3, 3, 2, 4], initializer=tf1.random_normal_initializer(seed=1))
        tf1.get_variable("b", [4], initializer=tf1.constant_initializer(0.5))
    with tf1.device("/device:CPU:0"):
        tf1.get_variable("on_cpu", [2, 2], initializer=tf1.ones_initializer())
    tf1.get_variable("steps", [], dtype=tf.int64, initializer=tf1.constant_initializer(7), trainable=False)
    tf1.get_variable("flag", [], dtype=tf.bool, initializer=tf1.constant_initializer(True), trainable=False)
    tf1.get_variable("half", [5], dtype=tf.float16, initializer=tf1.constant_initializer(0.25))
    tf1.train.get_or_create_global_step()


def _build(fast, make=_model, **saver_kwargs):
    """A new graph with ``make()``'s variables and a Saver (trainbus's or TensorFlow's)."""
    g = tf.Graph()
    with g.as_default():
        make()
        saver = (make_saver if fast else tf1.train.Saver)(**saver_kwargs)
    return g, saver


def _assert_same_graph(slow, fast):
    (gs, ss), (gf, sf) = slow, fast
    assert_same_nodes(gs, gf, collections=False)
    if ss is not None:
        assert sf.saver_def == ss.saver_def


def _one_device():
    """Variables on one device: one NoOp groups the assignments, imported with them."""
    tf1.get_variable("a", [3], initializer=tf1.constant_initializer(2.0))
    tf1.get_variable("b", [], dtype=tf.int32, initializer=tf1.constant_initializer(5))


def test_one_device_imports_the_group_too(counts):
    fast = _build(True, _one_device)
    assert counts == {"imported": 1, "tensorflow": 0}
    _assert_same_graph(_build(False, _one_device), fast)
    restore = fast[0].get_operation_by_name("save/restore_all")
    assert [op.name for op in restore.control_inputs] == ["save/AssignVariableOp", "save/AssignVariableOp_1"]
    assert all(op.get_attr("_has_manual_control_dependencies") for op in restore.control_inputs)


def _parameter_server():
    """Variables on a parameter server and on a worker's GPU, as the distributed and multi-GPU
    trainers place them (the graph is only built here, never run)."""
    with tf1.device(tf1.train.replica_device_setter(ps_tasks=1, worker_device="/job:worker/task:0")):
        tf1.get_variable("W", [4, 3])
        tf1.train.get_or_create_global_step()
    with tf1.device("/job:worker/task:0/device:GPU:1"):
        tf1.get_variable("local", [2])


def test_variables_on_other_devices_restore_there(counts):
    fast = _build(True, _parameter_server)
    assert counts == {"imported": 1, "tensorflow": 0}
    _assert_same_graph(_build(False, _parameter_server), fast)
    g = fast[0]
    assert g.get_operation_by_name("save/AssignVariableOp").device == "/job:ps/task:0"
    assert g.get_operation_by_name("save/Identity_2").device == "/job:worker/task:0/device:GPU:1"


@pytest.mark.parametrize("kwargs", [{}, {"max_to_keep": 2, "save_relative_paths": True, "name": "restore_X"},
                                    {"write_version": tf1.train.SaverDef.V1}])
def test_imported_restore_ops_are_tensorflows_graph(kwargs, counts):
    fast = _build(True, **kwargs)
    assert counts == {"imported": 1, "tensorflow": 0}
    _assert_same_graph(_build(False, **kwargs), fast)
    g = fast[0]
    scope = kwargs.get("name", "save")
    restore = g.get_operation_by_name(f"{scope}/restore_all")
    # one NoOp per device (two here) under the one restore op
    assert restore.type == "NoOp" and [op.type for op in restore.control_inputs] == ["NoOp", "NoOp"]
    assigns = [op for group in restore.control_inputs for op in group.control_inputs]
    assert [op.type for op in assigns] == ["AssignVariableOp"] * 7
    assigned = {op.inputs[0].op.name for op in assigns}
    assert assigned == {v.op.name for v in g.get_collection("variables")}
    devices = {op.inputs[0].op.name: (op.device, op.inputs[1].op.device) for op in assigns}
    assert devices["on_cpu"] == ("/device:CPU:0", "/device:CPU:0")  # the variable's, for its Identity too
    assert devices["conv0/W"] == ("", "")


def _values(sess, g):
    return {v.op.name: sess.run(v) for v in g.get_collection("variables")}


def test_checkpoints_restore_both_ways(tmp_path, counts):
    """A checkpoint written through TensorFlow's Saver restores through trainbus's and the other
    way round, with every value (after the variables were changed)."""
    for writer_fast in (False, True):
        gw, sw = _build(writer_fast)
        with tf1.Session(graph=gw) as sess:
            sess.run(tf1.global_variables_initializer())
            expected = _values(sess, gw)
            path = sw.save(sess, str(tmp_path / f"w{writer_fast}" / "model"), global_step=3)
        gr, sr = _build(not writer_fast)
        with tf1.Session(graph=gr) as sess:
            sess.run(tf1.global_variables_initializer())
            with gr.as_default():
                sess.run([tf1.assign_add(v, tf.ones_like(v)) if v.dtype.base_dtype != tf.bool else tf1.assign(v, False)
                          for v in tf1.global_variables()])
            assert _values(sess, gr)["steps"] == 8
            sr.restore(sess, path)
            got = _values(sess, gr)
        assert got.keys() == expected.keys()
        for k in expected:
            np.testing.assert_array_equal(got[k], expected[k], err_msg=k)
    assert counts == {"imported": 2, "tensorflow": 0}


def test_a_var_list_dict_restores_under_its_checkpoint_names(tmp_path, counts):
    """SaverRestore's way: the variables under other names in the checkpoint."""
    def build(fast):
        g = tf.Graph()
        with g.as_default():
            _one_device()
            a, b = tf1.global_variables()
            s = (make_saver if fast else tf1.train.Saver)({"old/a": a, "old/b": b}, name="restore_S")
        return g, s

    slow_g, _ = build(False)
    g, fast = build(True)
    _assert_same_graph((slow_g, None), (g, None))
    with tf1.Session(graph=g) as sess:
        sess.run(tf1.global_variables_initializer())
        path = fast.save(sess, str(tmp_path / "m"))
    assert sorted(tf.train.list_variables(path)) == [("old/a", [3]), ("old/b", [])]
    with tf1.Session(graph=g) as sess:
        sess.run(tf1.global_variables_initializer())
        sess.run(tf1.assign(tf1.global_variables()[0], [0.0, 0.0, 0.0]))
        fast.restore(sess, path)
        np.testing.assert_array_equal(sess.run(tf1.global_variables()[0]), [2.0, 2.0, 2.0])
    assert counts["imported"] == 1


def test_names_made_after_are_tensorflows():
    """A second Saver, and ops made afterwards in the saver's scope, get the same names."""
    def more(fast):
        g, _ = _build(fast)
        with g.as_default():
            (make_saver if fast else tf1.train.Saver)()
            with tf1.name_scope("save/"):
                tf.identity(tf.constant(1.0))
                tf1.no_op(name="restore_all")
        return g, None

    slow, fast = more(False), more(True)
    _assert_same_graph(slow, fast)
    names = {op.name for op in fast[0].get_operations()}
    assert {"save_1/restore_all", "save/Identity_7", "save/restore_all_1"} <= names


def _partitioned():
    tf1.get_variable("p", [8, 2], partitioner=tf1.fixed_size_partitioner(2))
    tf1.get_variable("q", [2])


def _reference():
    with tf1.variable_scope("r", use_resource=False):
        tf1.get_variable("w", [2])
    tf1.get_variable("q", [2])


@pytest.mark.parametrize("make,kwargs", [
    (_model, {"reshape": True}),
    (_model, {"sharded": True}),
    (_partitioned, {}),
    (_reference, {}),
], ids=["reshape", "sharded", "partitioned", "reference-variable"])
def test_other_savers_are_built_tensorflows_way(make, kwargs, counts):
    fast = _build(True, make, **kwargs)
    assert counts["imported"] == 0 and counts["tensorflow"] >= 1
    _assert_same_graph(_build(False, make, **kwargs), fast)


@pytest.mark.parametrize("context", ["control_dependencies", "device", "colocate_with"])
def test_contexts_that_change_op_creation_build_tensorflows_way(context, counts):
    def build(fast):
        g = tf.Graph()
        with g.as_default():
            _model()
            anchor = tf.constant(0.0, name="anchor")
            ctx = {"control_dependencies": lambda: tf1.control_dependencies([anchor]),
                   "device": lambda: tf1.device("/device:CPU:0"),
                   "colocate_with": lambda: tf1.colocate_with(anchor)}[context]
            with ctx():
                s = (make_saver if fast else tf1.train.Saver)()
        return g, s

    fast = build(True)
    assert counts == {"imported": 0, "tensorflow": 1}
    _assert_same_graph(build(False), fast)


def test_a_taken_name_builds_tensorflows_way(counts):
    """A Saver entering an existing scope (a name ending with "/") where a name the import would
    use is taken: TensorFlow's builder picks other names, and so does trainbus's."""
    def build(fast):
        g = tf.Graph()
        with g.as_default():
            _model()
            with tf1.name_scope("mine/"):
                with tf1.name_scope("Identity_3"):  # a name taken by a scope alone: no op has it
                    pass
            s = (make_saver if fast else tf1.train.Saver)(name="mine/")
        return g, s

    fast = build(True)
    assert counts == {"imported": 0, "tensorflow": 1}
    _assert_same_graph(build(False), fast)
    assert fast[0].get_operation_by_name("mine/Identity_4").type == "Identity"


def test_nodes_this_tensorflow_refuses_build_tensorflows_way(counts, monkeypatch):
    """A TensorFlow whose ops differ from the written nodes refuses the import, which adds
    nothing; TensorFlow's builder then builds the same graph as without trainbus."""
    real = _saver_graph._plan

    def plan_with_unknown_op(*a, **k):
        graph_def, assigns = real(*a, **k)
        graph_def.node[-2].op = "NoSuchOpInThisTensorFlow"  # near the end: a late refusal
        return graph_def, assigns

    monkeypatch.setattr(_saver_graph, "_plan", plan_with_unknown_op)
    fast = _build(True)
    assert counts == {"imported": 0, "tensorflow": 1}
    _assert_same_graph(_build(False), fast)


def test_a_builder_or_saver_def_given_is_used_as_given():
    g = tf.Graph()
    with g.as_default():
        _model()
        builder = saver_lib.BulkSaverBuilder()
        s = make_saver(builder=builder)
        assert s._builder is builder
        again = make_saver(saver_def=s.saver_def)
        assert again.saver_def is s.saver_def and again._builder is None


def test_model_saver_and_saver_restore_use_it(tmp_path, counts, logdir):
    """A real training with ModelSaver, then a second one restoring its checkpoint with
    SaverRestore: both Savers' restore ops are imported, and the values come back."""
    from trainbus.callbacks import ModelSaver
    from trainbus.input_source import FeedInput
    from trainbus.testing import TinyModel, tiny_dataflow
    from trainbus.tfutils.sessinit import SaverRestore
    from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config

    first = tmp_path / "first"
    cfg = TrainConfig(model=TinyModel(), data=FeedInput(tiny_dataflow()), callbacks=[ModelSaver(checkpoint_dir=str(first))],
                      max_epoch=1, steps_per_epoch=3)
    launch_train_with_config(cfg, SimpleTrainer())
    assert counts == {"imported": 1, "tensorflow": 0}
    ckpt = tf.train.latest_checkpoint(str(first))
    w = tf.train.load_variable(ckpt, "W")

    seen = {}

    class Probe(ModelSaver):
        def _before_train(self):
            super()._before_train()
            w_var = [v for v in self.graph.get_collection("variables") if v.op.name == "W"][0]
            seen["W"] = self.trainer.sess.run(w_var)

    cfg = TrainConfig(model=TinyModel(), data=FeedInput(tiny_dataflow()), session_init=SaverRestore(ckpt),
                      callbacks=[Probe(checkpoint_dir=str(tmp_path / "second"))], max_epoch=1, steps_per_epoch=1)
    launch_train_with_config(cfg, SimpleTrainer())
    assert counts == {"imported": 3, "tensorflow": 0}
    np.testing.assert_array_equal(seen["W"], w)
