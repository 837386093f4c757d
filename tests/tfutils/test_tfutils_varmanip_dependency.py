"""varmanip (checkpoints, npz, session updates) and dependency helpers."""

import os

import numpy as np
import pytest
import tensorflow as tf

from trainbus.tfutils import varmanip
from trainbus.tfutils.dependency import ancestor_ops, dependency_of_fetches, dependency_of_targets

tf1 = tf.compat.v1


def _write_saver_checkpoints(d, steps, prefix="model"):
    with tf.Graph().as_default():
        w = tf1.get_variable("W", initializer=np.arange(6, dtype="float32").reshape(2, 3))
        step = tf1.get_variable("step", initializer=tf.constant(0, tf.int64))
        saver = tf1.train.Saver(max_to_keep=10)
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for s in steps:
                sess.run(tf1.assign(step, tf.constant(s, tf.int64)))
                saver.save(sess, os.path.join(d, prefix), global_step=s)


def test_get_all_checkpoints_sorted_and_readable(tmp_path):
    _write_saver_checkpoints(str(tmp_path), [10, 2, 100])
    _write_saver_checkpoints(str(tmp_path), [5], prefix="other")
    found = varmanip.get_all_checkpoints(str(tmp_path))
    assert [s for _, s in found] == [2, 10, 100]
    for name, step in found:
        assert tf1.train.NewCheckpointReader(name).get_tensor("step") == step
    other = varmanip.get_all_checkpoints(str(tmp_path), prefix="other")
    assert [s for _, s in other] == [5]
    with pytest.raises(FileNotFoundError):
        varmanip.get_all_checkpoints(str(tmp_path / "missing"))


def test_load_checkpoint_vars_from_prefix_dir_and_state_file(tmp_path):
    _write_saver_checkpoints(str(tmp_path), [1, 7])
    for p in (tmp_path / "model-7", tmp_path, tmp_path / "checkpoint", tmp_path / "model-7.index"):
        d = varmanip.load_checkpoint_vars(str(p))
        assert int(d["step"]) == 7
        np.testing.assert_array_equal(d["W"], np.arange(6).reshape(2, 3))
    assert varmanip.load_checkpoint_vars(str(tmp_path / "model-1"))["step"] == 1
    with pytest.raises(FileNotFoundError, match="model-3"):
        varmanip.load_checkpoint_vars(str(tmp_path / "model-3"))


def test_save_checkpoint_vars_npz_and_checkpoint_roundtrip(tmp_path):
    dic = {"a/b": np.ones((2, 2), "float32") * 3, "c:0": np.array([1, 2], "int64")}
    varmanip.save_checkpoint_vars(dic, str(tmp_path / "p.npz"))
    with np.load(tmp_path / "p.npz") as f:
        assert sorted(f.files) == ["a/b", "c"]
        np.testing.assert_array_equal(f["a/b"], dic["a/b"])
    varmanip.save_checkpoint_vars(dic, str(tmp_path / "ck" / "model-5"))
    back = varmanip.load_checkpoint_vars(str(tmp_path / "ck" / "model-5"))
    assert sorted(back) == ["a/b", "c"]
    np.testing.assert_array_equal(back["c"], [1, 2])
    assert back["c"].dtype == np.int64
    assert [s for _, s in varmanip.get_all_checkpoints(str(tmp_path / "ck"))] == [5]


def test_dump_session_params_trainable_and_model_vars(tmp_path):
    with tf.Graph().as_default():
        tf1.get_variable("t", initializer=1.5)
        m = tf1.get_variable("m", initializer=2.5, trainable=False)
        tf1.add_to_collection(tf1.GraphKeys.MODEL_VARIABLES, m)
        tf1.get_variable("other", initializer=9.0, trainable=False)  # neither: not dumped
        with tf1.Session() as sess, sess.as_default():
            sess.run(tf1.global_variables_initializer())
            varmanip.dump_session_params(str(tmp_path / "p.npz"))
            with pytest.raises(ValueError, match="npz"):
                varmanip.dump_session_params(str(tmp_path / "p.bin"))
    with np.load(tmp_path / "p.npz") as f:
        assert sorted(f.files) == ["m", "t"]
        assert f["t"] == 1.5 and f["m"] == 2.5


def test_session_update_reshapes_upcasts_and_rejects():
    with tf.Graph().as_default():
        a = tf1.get_variable("a", [2, 2], dtype=tf.float64)
        b = tf1.get_variable("b", [3], dtype=tf.float32)
        init = tf1.global_variables_initializer()
        ops_before = len(tf1.get_default_graph().get_operations())
        with tf1.Session() as sess:
            sess.run(init)
            upd = varmanip.SessionUpdate(sess, [a, b])
            upd.update({"a": np.arange(4, dtype="float32")})   # reshape + up-cast
            np.testing.assert_array_equal(sess.run(a), [[0, 1], [2, 3]])
            with pytest.raises(ValueError, match="'b'.*shape"):
                upd.update({"b": np.zeros(4, "float32")})
            with pytest.raises(ValueError, match="'b'.*dtype"):
                upd.update({"b": np.zeros(3, "float64")})
            assert varmanip.SessionUpdate(sess, [b], ignore_mismatch=True).update({"b": np.zeros(4)}) == []
        assert len(tf1.get_default_graph().get_operations()) == ops_before


def test_name_helpers():
    assert varmanip.get_savename_from_varname("tower0/fc/W:0", varname_prefix="tower0") == "fc/W"
    assert varmanip.get_savename_from_varname("fc/W", savename_prefix="net") == "net/fc/W"
    assert varmanip.is_training_name("fc/W/Adam_1")
    assert varmanip.is_training_name("fc/W/Momentum:0")
    assert varmanip.is_training_name("EMA/cost/biased")
    assert varmanip.is_training_name("w/AccumGrad")
    assert not varmanip.is_training_name("fc/W")
    assert not varmanip.is_training_name("bn/mean/EMA")


def test_dependency_of_targets_and_fetches():
    with tf.Graph().as_default():
        a = tf.constant(1.0, name="a")
        b = tf.add(a, 1.0, name="b")
        c = tf.constant(5.0, name="c")
        with tf.control_dependencies([c]):
            d = tf.identity(b, name="d")
        e = tf.constant(0.0, name="e")
        assert dependency_of_targets([d], a)
        assert dependency_of_targets((d,), c.op)   # control edge
        assert dependency_of_targets(d, b)
        assert not dependency_of_targets([b], c)
        assert not dependency_of_targets([e], a)
        assert dependency_of_targets([e, b], a)
        # memoized: same answer again
        assert dependency_of_targets([d], a)
        assert dependency_of_fetches({"x": [e, ("d:0",)]}, a)
        assert dependency_of_fetches(["b"], a.op)
        assert not dependency_of_fetches([e, None], a)
        with pytest.raises(TypeError, match="expected a tf.Operation"):
            dependency_of_targets([3], a)


def test_ancestor_ops_yields_each_op_once_through_data_and_control_edges():
    with tf.Graph().as_default():
        a = tf.constant(1.0, name="a")
        gate = tf.constant(2.0, name="gate")
        b = tf.add(a, a, name="b")
        with tf1.control_dependencies([gate.op]):
            c = tf.identity(b, name="c")
        tf.constant(3.0, name="unrelated")
        walked = [op.name for op in ancestor_ops([c.op, b.op])]
        assert sorted(walked) == ["a", "b", "c", "gate"]  # a reached twice through b, listed once
        seen = []
        for op in ancestor_ops([c.op]):  # lazily: stopping early walks no further
            seen.append(op.name)
            if op.name == "c":
                break
        assert seen == ["c"]
