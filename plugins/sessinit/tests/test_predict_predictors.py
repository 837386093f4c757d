"""trainbus.predict: every predictor runs the model's inference tower and gives what a direct
``Session.run`` of the same graph gives, with the checkpoint's variables."""

import logging
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from trainbus.testing import points_dataflow
from trainbus.input_source import FeedInput, QueueInput, TFDatasetInput
from trainbus.predict import (DataParallelOfflinePredictor, DatasetPredictorBase, FeedfreePredictor,
                              MultiTowerOfflinePredictor, OfflinePredictor, OnlinePredictor, PredictConfig,
                              PredictorBase, SimpleDatasetPredictor)
from trainbus.tfutils.sessinit import SmartInit
from trainbus.tfutils.tower import TowerFunc, get_current_tower_context
from trainbus.train.model_desc import ModelDesc

tf1 = tf.compat.v1

SIG = [tf.TensorSpec([None, 4], tf.float32, "x")]


def mlp(x):
    """x (N, 4) -> hidden 5 (relu) -> logits 3; names 'x_in', 'logits', 'prob', 'is_training'."""
    tf.identity(x, name="x_in")
    w1 = tf1.get_variable("W1", [4, 5])
    w2 = tf1.get_variable("W2", [5, 3])
    logits = tf.identity(tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2), name="logits")
    tf.nn.softmax(logits, name="prob")
    ctx = get_current_tower_context()
    tf.constant(ctx.is_training, name="is_training")
    return logits


class MLPModel(ModelDesc):
    def inputs(self):
        return list(SIG)

    def build_graph(self, x):
        return mlp(x)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """A checkpoint of random weights; returns (path, reference function numpy x -> (logits, prob))."""
    d = tmp_path_factory.mktemp("predict_ckpt")
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(7)
        x = tf1.placeholder(tf.float32, [None, 4], name="x")
        logits = tf.matmul(tf.nn.relu(tf.matmul(x, tf1.get_variable("W1", [4, 5]))), tf1.get_variable("W2", [5, 3]))
        prob = tf.nn.softmax(logits)
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            path = tf1.train.Saver().save(sess, str(d / "model"))
            xs = np.random.RandomState(0).rand(6, 4).astype("float32")
            ref = sess.run([logits, prob], {x: xs})
    return path, xs, ref


def _config(ckpt_path, **kw):
    kw.setdefault("output_names", ["logits", "prob"])
    return PredictConfig(model=MLPModel(), session_init=SmartInit(ckpt_path), **kw)


def test_offline_predictor_equals_direct_run(ckpt):
    path, xs, (ref_logits, ref_prob) = ckpt
    pred = OfflinePredictor(_config(path))
    assert isinstance(pred, PredictorBase) and isinstance(pred, OnlinePredictor)
    logits, prob = pred(xs)
    np.testing.assert_allclose(logits, ref_logits, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(prob, ref_prob, rtol=1e-5, atol=1e-6)
    # built in its own graph, in an inference tower
    assert pred.graph is not tf1.get_default_graph()
    assert pred.sess.run(pred.graph.get_tensor_by_name("is_training:0")) == np.False_
    assert [t.name for t in pred.input_tensors] == ["x:0"]
    # return_input and tower_func + input_signature
    pred2 = OfflinePredictor(PredictConfig(tower_func=mlp, input_signature=SIG, session_init=SmartInit(path),
                                           output_names=["prob"], return_input=True))
    inputs, (prob2,) = pred2(xs)
    assert inputs[0] is xs
    np.testing.assert_allclose(prob2, ref_prob, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match=r"takes 1 inputs \['x:0'\], got 2"):
        pred(xs, xs)


def test_predict_config_errors(ckpt):
    with pytest.raises(ValueError, match="output_names"):
        PredictConfig(model=MLPModel())
    with pytest.raises(TypeError, match=r"write output_names=\['prob'\]"):
        PredictConfig(model=MLPModel(), output_names="prob")
    with pytest.raises(ValueError, match="input_signature"):
        PredictConfig(tower_func=mlp, output_names=["prob"])
    with pytest.raises(ValueError, match="not both"):
        PredictConfig(model=MLPModel(), tower_func=mlp, output_names=["prob"])
    with pytest.raises(TypeError, match="session_init must be a SessionInit"):
        PredictConfig(model=MLPModel(), output_names=["prob"], session_init=ckpt[0])
    with pytest.raises(TypeError, match="unknown arguments"):
        PredictConfig(model=MLPModel(), output_names=["prob"], outputs=["prob"])
    with pytest.raises(KeyError, match="no tensor 'nope'"):
        OfflinePredictor(PredictConfig(model=MLPModel(), output_names=["nope"]))
    cfg = PredictConfig(tower_func=TowerFunc(mlp, SIG), output_names=["prob"], inputs_desc=None)
    assert [s.name for s in cfg.input_signature] == ["x"] and cfg.input_names == ["x"]


def test_online_predictor_by_names_and_default_session():
    g = tf.Graph()
    with g.as_default():
        a = tf1.placeholder(tf.float32, [None], name="a")
        tf.multiply(a, 3.0, name="triple")
        pred = OnlinePredictor(["a"], ["triple"])
        assert pred.input_tensors == ["a:0"] and pred.output_tensors == ["triple:0"]
        with pytest.raises(RuntimeError, match="no session"):
            pred(np.ones(2, "float32"))
        with tf1.Session() as sess:
            with sess.as_default():
                out, = pred(np.array([1.0, 2.0], "float32"))
            np.testing.assert_allclose(out, [3.0, 6.0])
            assert pred.sess is sess          # the default session is kept after the first call
            out, = pred(np.array([5.0], "float32"))
            np.testing.assert_allclose(out, [15.0])


def test_multi_tower_offline_predictor(ckpt, caplog):
    path, xs, (ref_logits, ref_prob) = ckpt
    pred = MultiTowerOfflinePredictor(_config(path), [0, 1])
    preds = pred.get_predictors()
    assert len(preds) == 2
    assert all(p.sess is pred.sess for p in preds)
    # one tower per device, sharing one set of variables and the input placeholder
    assert [p.output_tensors[0].name for p in preds] == ["tower0/logits:0", "tower1/logits:0"]
    assert preds[0].input_tensors[0] is preds[1].input_tensors[0]
    with pred.graph.as_default():
        assert sorted(v.op.name for v in tf1.global_variables()) == ["W1", "W2"]
    dev = pred.graph.get_tensor_by_name("tower1/logits:0").device
    expect = "gpu:1" if len(tf.config.list_physical_devices("GPU")) > 1 else "cpu:0"
    assert dev.lower().endswith(expect), dev
    for p in preds:
        logits, prob = p(xs)
        np.testing.assert_allclose(logits, ref_logits, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(prob, ref_prob, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(pred(xs)[1], ref_prob, rtol=1e-5, atol=1e-6)
    assert pred.get_predictor(1) is preds[1]
    with caplog.at_level(logging.WARNING):
        assert pred.get_predictor(3) is preds[1]
    assert "round-robin" in caplog.text
    with pytest.raises(ValueError, match="towers is empty"):
        MultiTowerOfflinePredictor(_config(path), [])
    with pytest.raises(TypeError, match="list of device ids"):
        MultiTowerOfflinePredictor(_config(path), 2)


def test_data_parallel_offline_predictor(ckpt):
    path, xs, (ref_logits, ref_prob) = ckpt
    pred = DataParallelOfflinePredictor(_config(path, output_names=["prob"]), [0, 1])
    assert [t.name for t in pred.input_tensors] == ["tower0_x:0", "tower1_x:0"]
    assert [t.name for t in pred.output_tensors] == ["tower0/prob:0", "tower1/prob:0"]
    p0, p1 = pred(xs[:2], xs[2:])
    np.testing.assert_allclose(p0, ref_prob[:2], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(p1, ref_prob[2:], rtol=1e-5, atol=1e-6)


def test_simple_dataset_predictor(ckpt):
    path, xs, (ref_logits, ref_prob) = ckpt
    ds = points_dataflow([[xs[i:i + 2]] for i in range(0, 6, 2)])
    pred = SimpleDatasetPredictor(_config(path, output_names=["prob"]), ds)
    assert isinstance(pred, DatasetPredictorBase)
    gen = pred.get_result()
    assert not isinstance(gen, list)
    results = list(gen)
    assert len(results) == 3                  # one result per datapoint
    np.testing.assert_allclose(np.concatenate([r[0] for r in results]), ref_prob, rtol=1e-5, atol=1e-6)
    again = pred.get_all_result()             # the DataFlow is reset each time
    assert len(again) == 3
    np.testing.assert_allclose(again[2][0], ref_prob[4:], rtol=1e-5, atol=1e-6)
    with pytest.raises(TypeError, match="must be a DataFlow"):
        SimpleDatasetPredictor(_config(path), [xs])


def test_feedfree_predictor_queue_input(ckpt):
    path, xs, (ref_logits, ref_prob) = ckpt
    ds = points_dataflow([[xs[i:i + 3]] for i in range(0, 6, 3)])
    with FeedfreePredictor(_config(path, output_names=["prob", "x_in"]), QueueInput(ds)) as pred:
        outs = [pred() for _ in range(4)]   # the queue repeats the DataFlow
        thread = pred._input_source.thread
        assert thread.is_alive()
        with pytest.raises(TypeError, match="no arguments"):
            pred(xs)
    assert not thread.is_alive()            # closing stopped the enqueue thread
    for k, (prob, x) in enumerate(outs):
        i = (k % 2) * 3
        np.testing.assert_allclose(x, xs[i:i + 3])
        np.testing.assert_allclose(prob, ref_prob[i:i + 3], rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="closed"):
        pred()


def test_feedfree_predictor_feed_and_tf_dataset_inputs(ckpt):
    path, xs, (ref_logits, ref_prob) = ckpt
    ds = points_dataflow([[xs[i:i + 2]] for i in range(0, 6, 2)])
    pred = FeedfreePredictor(_config(path, output_names=["logits"]), FeedInput(ds))
    got = np.concatenate([pred()[0] for _ in range(3)])
    np.testing.assert_allclose(got, ref_logits, rtol=1e-5, atol=1e-6)
    pred.close()

    def make_ds():
        return tf.data.Dataset.from_tensor_slices(xs).batch(3)

    pred = FeedfreePredictor(_config(path, output_names=["logits"]), TFDatasetInput(make_ds))
    got = np.concatenate([pred()[0] for _ in range(2)])
    np.testing.assert_allclose(got, ref_logits, rtol=1e-5, atol=1e-6)
    with pytest.raises(tf.errors.OutOfRangeError):
        pred()
    pred.close()
    with pytest.raises(ValueError, match="return_input"):
        FeedfreePredictor(_config(path, return_input=True), FeedInput(ds))


ALL = ["AsyncPredictorBase", "DataParallelOfflinePredictor", "DatasetPredictorBase", "FeedfreePredictor",
       "MultiProcessDatasetPredictor", "MultiThreadAsyncPredictor", "MultiTowerOfflinePredictor", "OfflinePredictor",
       "OnlinePredictor", "PredictConfig", "PredictorBase", "SimpleDatasetPredictor"]


def test_package_imports_without_tensorflow_and_names_resolve():
    code = ("import sys\nsys.modules['tensorflow'] = None\n"
            "import trainbus.predict as p\nprint(sorted(p.__all__))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == str(ALL)
    import importlib

    import trainbus.predict as pkg
    for mod in ("base", "config", "concurrency", "dataset", "feedfree", "multigpu"):
        importlib.import_module(f"trainbus.predict.{mod}")
    ns = {}
    exec("from trainbus.predict import *", ns)
    assert sorted(k for k in ns if not k.startswith("__")) == ALL
    assert pkg.MultiTowerOfflinePredictor.__module__ == "trainbus.predict.multigpu"
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        pkg.Nope


def test_feedfree_predictor_reports_a_failed_input(ckpt):
    path, xs, _ = ckpt
    ds = points_dataflow([[np.ones((2, 5), "float32")]])     # 5 columns for a (None, 4) input
    pred = FeedfreePredictor(_config(path), QueueInput(ds))
    with pytest.raises(RuntimeError, match="input QueueInput failed"):
        pred()
    pred.close()
