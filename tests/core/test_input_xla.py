"""XLA_COMPILE with every input source: the input tensors are taken outside the compiled
computation (a queue's dequeue, a staging area's unstage or a dataset's get_next has no XLA
kernel), so the model trains under XLA on CPU whatever the input."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import tensorflow as tf

from trainbus.callbacks import Callback
from trainbus.input_source import FeedInput, QueueInput, StagingInput, TensorInput, TFDatasetInput, ZMQInput
from trainbus.testing import TinyModel, tiny_dataflow
from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config

tf1 = tf.compat.v1

STEPS, EPOCHS = 4, 3


def _arrays():
    xs, ys = zip(*tiny_dataflow())
    return np.concatenate(xs), np.concatenate(ys)


def _loss(w, b):
    """The softmax cross-entropy of TinyModel over the whole tiny dataset, in numpy."""
    xs, ys = _arrays()
    logits = xs @ w + b
    logits = logits - logits.max(axis=1, keepdims=True)
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(ys)), ys].mean())


class EpochWeights(Callback):
    """The weights after every epoch (tensors inside the compiled computation, such as the
    cost, cannot be fetched; the variables can)."""

    def _setup_graph(self):
        by_name = {v.op.name: v for v in tf1.global_variables()}
        self._vars = [by_name["W"], by_name["b"]]
        self.weights = []

    def _trigger_epoch(self):
        self.weights.append(self.trainer.sess.run(self._vars))


def _zmq_source(tmp_path):
    import zmq

    from trainbus.utils.serialize import dumps

    addr = f"ipc://{tmp_path}/xla-pipe"
    stop = threading.Event()

    def send():
        ctx = zmq.Context()
        sock = ctx.socket(zmq.PUSH)
        sock.set_hwm(4)
        sock.connect(addr)
        try:
            while not stop.is_set():
                for dp in tiny_dataflow():
                    while not stop.is_set():
                        try:
                            sock.send(dumps(dp), flags=zmq.NOBLOCK)
                            break
                        except zmq.Again:
                            stop.wait(0.01)
        finally:
            sock.close(linger=0)
            ctx.term()

    th = threading.Thread(target=send, daemon=True)
    th.start()
    return ZMQInput(addr, hwm=4), lambda: (stop.set(), th.join(timeout=10))


def _tensor_source():
    xs, ys = _arrays()

    def tensors():
        # the batches of the tiny dataflow in order, from a tf.train queue (started by TensorInput)
        i = tf1.train.range_input_producer(len(xs) // 4, shuffle=False).dequeue()
        x = tf.reshape(tf.constant(xs)[i * 4:(i + 1) * 4], [4, 4])
        y = tf.reshape(tf.constant(ys)[i * 4:(i + 1) * 4], [4])
        return [x, y]

    return TensorInput(tensors, size=STEPS)


SOURCES = {
    "FeedInput": lambda tmp: (FeedInput(tiny_dataflow()), None),
    "QueueInput": lambda tmp: (QueueInput(tiny_dataflow()), None),
    "StagingInput": lambda tmp: (StagingInput(QueueInput(tiny_dataflow())), None),
    "TFDatasetInput": lambda tmp: (TFDatasetInput(
        lambda: tf.data.Dataset.from_tensor_slices(_arrays()).batch(4).repeat()), None),
    "TFDatasetInput-DataFlow": lambda tmp: (TFDatasetInput(_repeated(tiny_dataflow())), None),
    "TensorInput": lambda tmp: (_tensor_source(), None),
    "ZMQInput": _zmq_source,
}


def _repeated(df):
    from trainbus.testing import forever_dataflow

    return forever_dataflow(df)


@pytest.mark.parametrize("kind", list(SOURCES))
def test_xla_compiled_step_trains_with_every_input_source(logdir, tmp_path, kind):
    src, cleanup = SOURCES[kind](tmp_path)
    rec = EpochWeights()
    trainer = SimpleTrainer()
    trainer.XLA_COMPILE = True
    try:
        launch_train_with_config(TrainConfig(model=TinyModel(lr=0.5), data=src, max_epoch=EPOCHS,
                                             steps_per_epoch=STEPS, callbacks=[rec], extra_callbacks=[], monitors=[]), trainer)
    finally:
        if cleanup is not None:
            cleanup()
    assert trainer.global_step == STEPS * EPOCHS
    g = trainer.graph
    compiled = [op for op in g.get_operations() if "_xla_compile_id" in op.node_def.attr]
    # the model and its gradients are in the XLA computation...
    assert any(op.type == "MatMul" for op in compiled)
    assert any(op.name.endswith("cost") for op in compiled)
    # ...the input tensors the tower reads are not: they are made outside it
    tower_inputs = trainer.towers.training()[0].inputs
    assert [t.op for t in tower_inputs if "_xla_compile_id" in t.op.node_def.attr] == []
    reading = {"QueueDequeueV2", "Unstage", "IteratorGetNext", "Placeholder", "Reshape"}
    assert {t.op.type for t in tower_inputs} <= reading
    # it trained: the weights moved and the loss over the data fell from log(3) at W = 0, epoch by epoch
    losses = [_loss(w, b) for w, b in rec.weights]
    assert len(losses) == EPOCHS and not np.allclose(rec.weights[-1][0], 0)
    assert np.log(3) - 0.02 > losses[0] > losses[-1]


def test_xla_gradients_match_the_uncompiled_ones(logdir):
    """The compiled step computes what the plain one does: same data (QueueInput, deterministic
    order), same weights after training."""
    weights = {}
    for xla in (False, True):
        rec = EpochWeights()
        trainer = SimpleTrainer()
        trainer.XLA_COMPILE = xla
        launch_train_with_config(TrainConfig(model=TinyModel(lr=0.5), data=QueueInput(tiny_dataflow()), max_epoch=2,
                                             steps_per_epoch=STEPS, callbacks=[rec], extra_callbacks=[], monitors=[]),
                                 trainer)
        weights[xla] = rec.weights[-1]
    np.testing.assert_allclose(weights[True][0], weights[False][0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(weights[True][1], weights[False][1], rtol=1e-4, atol=1e-5)
    assert not np.allclose(weights[True][0], 0)
