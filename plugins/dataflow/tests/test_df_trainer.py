"""The trainer consumes trainbus.dataflow pipelines through every input source: FeedInput,
QueueInput, StagingInput(QueueInput) and TFDatasetInput.dataflow_to_dataset — real training runs
whose weights must equal those of the same datapoints fed directly."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from trainbus.callbacks import Callback
from trainbus.dataflow import BatchData, DataFromList, MapData, MultiProcessRunnerZMQ, MultiThreadMapData
from trainbus.input_source import FeedInput, QueueInput, StagingInput, TFDatasetInput
from trainbus.testing import TinyModel, tiny_dataflow

tf1 = tf.compat.v1

STEPS = 8  # one epoch of tiny_dataflow(): 32 datapoints in batches of 4


class Grab(Callback):
    """Keeps the weights and the global step at the end of training."""

    def _after_train(self):
        self.weights = self.trainer.sess.run([v for v in tf1.global_variables() if v.op.name in ("W", "b")])
        self.final_step = self.trainer.global_step


def train(data, steps=STEPS):
    from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config

    tf1.reset_default_graph()
    grab = Grab()
    cfg = TrainConfig(model=TinyModel(), data=data, max_epoch=1, steps_per_epoch=steps, callbacks=[grab],
                      monitors=[])
    launch_train_with_config(cfg, SimpleTrainer())
    return grab


def weights(grab):
    return grab.weights


@pytest.fixture(scope="module")
def reference():
    """Weights after one epoch fed straight from the plain dataflow, in order."""
    return weights(train(FeedInput(tiny_dataflow())))


def close_to(ws, ref):
    return all(np.allclose(a, b, atol=1e-6) for a, b in zip(ws, ref))


def zmq_pipeline():
    # one worker keeps the order, so training must give the reference weights exactly
    return MultiProcessRunnerZMQ(tiny_dataflow(), num_proc=1)


def test_feed_input_from_zmq_runner(reference):
    tr = train(FeedInput(zmq_pipeline()))
    assert tr.final_step == STEPS and close_to(weights(tr), reference)


def test_queue_input_from_zmq_runner(reference):
    tr = train(QueueInput(zmq_pipeline()))
    assert tr.final_step == STEPS and close_to(weights(tr), reference)


def test_staging_input_over_queue_input(reference):
    tr = train(StagingInput(QueueInput(zmq_pipeline())))
    assert tr.final_step == STEPS
    ws = weights(tr)
    assert not close_to(ws, [np.zeros_like(w) for w in ws])  # it trained


def test_tf_dataset_input_from_dataflow(reference):
    def make():
        return TFDatasetInput.dataflow_to_dataset(zmq_pipeline(), [tf.float32, tf.int32])

    tr = train(TFDatasetInput(make))
    assert tr.final_step == STEPS and close_to(weights(tr), reference)


def test_parallel_map_pipeline_and_plain_duck_dataflow(reference):
    rng = np.random.RandomState(0)
    xs = rng.rand(32, 4).astype("float32")
    ys = (xs.sum(axis=1) * 3 / 4).astype("int32").clip(0, 2)
    rows = DataFromList([[x, int(y)] for x, y in zip(xs, ys)], shuffle=False)
    # one thread keeps the order; BatchData stacks the Python ints as int32
    mapped = MultiThreadMapData(rows, 1, lambda dp: [dp[0] * 1.0, dp[1]], buffer_size=4, strict=True)
    tr = train(FeedInput(BatchData(mapped, 4)))
    assert close_to(weights(tr), reference)

    class Duck:
        """Not a DataFlow: any object with __iter__, __len__ and reset_state works."""

        def __init__(self):
            self.inner = tiny_dataflow()

        def __iter__(self):
            return iter(self.inner)

        def __len__(self):
            return len(self.inner)

        def reset_state(self):
            self.inner.reset_state()

    tr = train(QueueInput(MapData(Duck(), lambda dp: dp)))
    assert close_to(weights(tr), reference)


def test_dataflow_to_dataset_checks():
    with pytest.raises(TypeError, match="needs a DataFlow"):
        TFDatasetInput.dataflow_to_dataset([1, 2], [tf.float32])
    with pytest.raises(TypeError, match="types must be a list"):
        TFDatasetInput.dataflow_to_dataset(tiny_dataflow(), tf.float32)
