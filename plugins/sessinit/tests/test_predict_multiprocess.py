"""MultiProcessDatasetPredictor: spawned worker processes, each with its own OfflinePredictor,
give one result per datapoint, equal to a predictor in this process; worker errors surface."""

import pickle

import numpy as np
import pytest
import tensorflow as tf

from trainbus.dataflow import DataFlow
from trainbus.testing import points_dataflow
from trainbus.predict import MultiProcessDatasetPredictor, OfflinePredictor, PredictConfig
from trainbus.tfutils.sessinit import SmartInit
from trainbus.train.model_desc import ModelDesc

tf1 = tf.compat.v1


class Affine(ModelDesc):
    """x (N, 3) -> x @ W + 1; W from the checkpoint."""

    def inputs(self):
        return [tf.TensorSpec([None, 3], tf.float32, "x")]

    def build_graph(self, x):
        w = tf1.get_variable("W", [3, 2])
        return tf.identity(tf.matmul(x, w) + 1.0, name="y")


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    d = tmp_path_factory.mktemp("mp_ckpt")
    with tf.Graph().as_default():
        w = tf1.get_variable("W", initializer=np.arange(6, dtype="float32").reshape(3, 2))
        with tf1.Session() as sess:
            sess.run(w.initializer)
            path = tf1.train.Saver().save(sess, str(d / "model"))
    return PredictConfig(model=Affine(), session_init=SmartInit(path), output_names=["y"])


class Rounds(DataFlow):
    """Each reset_state() moves to the next list of datapoints."""

    def __init__(self, rounds):
        self.rounds, self.k = rounds, -1

    def reset_state(self):
        self.k += 1

    def __iter__(self):
        return iter(self.rounds[self.k])

    def __len__(self):
        return len(self.rounds[self.k])


def test_worker_processes_predict_every_datapoint(config):
    # one pool of spawned workers for every case: each worker imports TensorFlow anew (seconds)
    rng = np.random.RandomState(0)
    dps = [[rng.rand(2, 3).astype("float32")] for _ in range(12)]
    steps = [[np.full((1, 3), i, "float32")] for i in range(6)]
    bad = [[np.ones((1, 4), "float32")]]
    local = OfflinePredictor(pickle.loads(pickle.dumps(config)))   # the config survives pickling
    pred = MultiProcessDatasetPredictor(config, Rounds([dps, dps, steps + bad]), nr_proc=2, use_gpu=False)
    try:
        results = list(pred.get_result())
        assert len(results) == 12                # one result per datapoint, in order
        for dp, res in zip(dps, results):
            np.testing.assert_allclose(res[0], local(*dp)[0], rtol=1e-6)
            np.testing.assert_allclose(res[0], dp[0] @ np.arange(6).reshape(3, 2) + 1, rtol=1e-5)
        again = pred.get_all_result()           # a second round over the reset DataFlow
        assert len(again) == 12
        np.testing.assert_allclose(again[-1][0], results[-1][0])
        pred.ordered = False                    # results as they come; a bad datapoint fails its worker
        got = []
        with pytest.raises(RuntimeError, match=r"worker \d failed while predicting datapoint 6"):
            for res in pred.get_result():
                got.append(res[0][0, 0])
        assert set(got) <= {1.0 + 6 * i for i in range(6)}      # x @ W's first column is 6 * i
    finally:
        pred.close()
    assert all(not p.is_alive() for p in pred.workers)
    with pytest.raises(RuntimeError, match="closed"):
        next(pred.get_result())


def test_bad_arguments(config):
    dps = [[np.ones((1, 3), "float32")]]
    with pytest.raises(ValueError, match="use_gpu=False"):
        MultiProcessDatasetPredictor(config, points_dataflow(dps), nr_proc=64, use_gpu=True)
    with pytest.raises(ValueError, match="nr_proc"):
        MultiProcessDatasetPredictor(config, points_dataflow(dps), nr_proc=0, use_gpu=False)

    def local_fn(x):
        return tf.identity(x, name="y")

    with pytest.raises(TypeError, match="module level"):
        MultiProcessDatasetPredictor(PredictConfig(tower_func=local_fn, input_signature=Affine().inputs(),
                                                   output_names=["y"]), points_dataflow(dps), nr_proc=1, use_gpu=False)
