"""SaverRestore, SaverRestoreRelaxed and DictRestore with real checkpoints and sessions."""

import logging
import os

import numpy as np
import pytest
import tensorflow as tf

from trainbus.tfutils import sessinit

tf1 = tf.compat.v1

W_VAL = np.arange(6, dtype="float32").reshape(2, 3)
B_VAL = np.array([7.0, 8.0, 9.0], "float32")


@pytest.fixture()
def ckpt(tmp_path):
    """A checkpoint written by tf.compat.v1.train.Saver: W, b, learning_rate, global_step=42."""
    with tf.Graph().as_default():
        tf1.get_variable("W", initializer=W_VAL)
        tf1.get_variable("b", initializer=B_VAL)
        tf1.get_variable("learning_rate", initializer=0.5, trainable=False)
        gs = tf1.train.get_or_create_global_step()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            sess.run(tf1.assign(gs, 42))
            path = tf1.train.Saver().save(sess, str(tmp_path / "model"), global_step=42)
    assert path.endswith("model-42")
    return path


def _restore(init, build, run_init=True):
    """Build a graph with ``build()``, run ``init`` and return {var name: value} and op counts."""
    with tf.Graph().as_default() as g:
        build()
        init_op = tf1.global_variables_initializer()
        n0 = len(g.get_operations())
        with tf1.Session() as sess:
            sess.run(init_op)
            init._setup_graph()
            if run_init:
                init._run_init(sess)
            n1 = len(g.get_operations())
            vals = {v.op.name: sess.run(v) for v in tf1.global_variables()}
    return vals, n1 - n0


def _plain_graph(w_shape=(2, 3), w_dtype=tf.float32):
    def build():
        tf1.get_variable("W", w_shape, dtype=w_dtype, initializer=tf1.zeros_initializer())
        tf1.get_variable("b", [3], initializer=tf1.zeros_initializer())
        tf1.get_variable("learning_rate", initializer=0.1, trainable=False)
        tf1.train.get_or_create_global_step()
    return build


@pytest.mark.parametrize("form", ["prefix", "dir", "state_file", "index_file"])
def test_saver_restore_values_from_any_path_form(ckpt, form):
    path = {"prefix": ckpt, "dir": os.path.dirname(ckpt), "state_file": os.path.join(os.path.dirname(ckpt), "checkpoint"),
            "index_file": ckpt + ".index"}[form]
    init = sessinit.SaverRestore(path)
    assert init.checkpoint_path == ckpt and init.path == ckpt
    vals, _ = _restore(init, _plain_graph())
    np.testing.assert_array_equal(vals["W"], W_VAL)
    np.testing.assert_array_equal(vals["b"], B_VAL)
    assert vals["learning_rate"] == 0.5 and vals["global_step"] == 42


def test_saver_restore_ignore(ckpt):
    vals, _ = _restore(sessinit.SaverRestore(ckpt, ignore=["learning_rate:0", "b"]), _plain_graph())
    assert vals["learning_rate"] == pytest.approx(0.1)
    np.testing.assert_array_equal(vals["b"], np.zeros(3))
    np.testing.assert_array_equal(vals["W"], W_VAL)


def test_saver_restore_prefix_maps_checkpoint_names_under_prefix(ckpt):
    def build():
        with tf1.variable_scope("net"):
            tf1.get_variable("W", [2, 3], initializer=tf1.zeros_initializer())
            tf1.get_variable("b", [3], initializer=tf1.zeros_initializer())
        tf1.get_variable("W", [2, 3], initializer=tf1.ones_initializer())  # not under the prefix: untouched
    vals, _ = _restore(sessinit.SaverRestore(ckpt, prefix="net"), build)
    np.testing.assert_array_equal(vals["net/W"], W_VAL)
    np.testing.assert_array_equal(vals["net/b"], B_VAL)
    np.testing.assert_array_equal(vals["W"], np.ones((2, 3)))


def test_saver_restore_errors_name_path_and_variable(ckpt, tmp_path):
    with pytest.raises(FileNotFoundError, match="model-7"):
        sessinit.SaverRestore(str(tmp_path / "model-7"))
    os.makedirs(tmp_path / "empty_dir")
    with pytest.raises(FileNotFoundError, match="no checkpoint in directory"):
        sessinit.SaverRestore(str(tmp_path / "empty_dir"))
    with pytest.raises(ValueError, match=r"W: graph shape \[3, 2\], checkpoint shape \[2, 3\]"):
        _restore(sessinit.SaverRestore(ckpt), _plain_graph(w_shape=(3, 2)))
    with pytest.raises(TypeError, match="needs a path"):
        sessinit.SaverRestore(42)


def test_saver_restore_warns_about_unmatched(ckpt, caplog):
    def build():
        tf1.get_variable("W", [2, 3])
        tf1.get_variable("extra", [1])
        tf1.get_variable("extra/Adam", [1])  # optimizer slots are not reported
    with caplog.at_level(logging.WARNING, logger="trainbus"):
        _restore(sessinit.SaverRestore(ckpt), build)
    assert "extra" in caplog.text and "extra/Adam" not in caplog.text
    assert "b, global_step, learning_rate" in caplog.text  # in the checkpoint, not in the graph


def test_saver_restore_relaxed_upcasts_reshapes_skips_and_adds_no_ops(ckpt, caplog):
    def build():
        tf1.get_variable("W", [3, 2], dtype=tf.float64)   # reshape + up-cast
        tf1.get_variable("b", [4])                        # cannot fit: skipped
        tf1.get_variable("learning_rate", initializer=0.1, trainable=False)
    with caplog.at_level(logging.WARNING, logger="trainbus"):
        vals, added = _restore(sessinit.SaverRestoreRelaxed(ckpt), build)
    assert added == 0
    assert vals["W"].dtype == np.float64
    np.testing.assert_array_equal(vals["W"], W_VAL.reshape(3, 2))
    assert vals["learning_rate"] == 0.5
    assert "'b'" in caplog.text and "not loaded" in caplog.text


def test_dict_restore_values_and_mismatch(caplog):
    d = {"W:0": W_VAL, "b": B_VAL, "not_in_graph": np.zeros(1)}
    vals, added = _restore(sessinit.DictRestore(d), _plain_graph())
    assert added == 0
    np.testing.assert_array_equal(vals["W"], W_VAL)
    np.testing.assert_array_equal(vals["b"], B_VAL)
    with pytest.raises(ValueError, match="'W'.*shape"):
        _restore(sessinit.DictRestore({"W": np.zeros((5, 5), "float32")}), _plain_graph(), run_init=False)
    with caplog.at_level(logging.WARNING, logger="trainbus"):
        vals, _ = _restore(sessinit.DictRestore({"W": np.zeros((5, 5), "float32"), "b": B_VAL},
                                                ignore_mismatch=True), _plain_graph())
    assert "'W'" in caplog.text
    np.testing.assert_array_equal(vals["b"], B_VAL)
    with pytest.raises(TypeError, match="dict"):
        sessinit.DictRestore([1, 2])


def test_chain_of_restores(ckpt):
    init = sessinit.ChainInit([sessinit.SaverRestore(ckpt), sessinit.DictRestore({"b": np.ones(3, "float32")})])
    vals, _ = _restore(init, _plain_graph())
    np.testing.assert_array_equal(vals["W"], W_VAL)
    np.testing.assert_array_equal(vals["b"], np.ones(3))
