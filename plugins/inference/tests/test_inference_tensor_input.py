"""A ``TensorInput`` reading a tf.train queue pipeline (PTB style) trains, and an
``InferenceRunner`` validates from a second one: each source starts and stops only the queue
runners its own tensors read from."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

import trainbus
from trainbus.callbacks import Callback, InferenceRunner, ScalarStats
from trainbus.input_source import TensorInput
from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config

tf1 = tf.compat.v1

BATCH, SEQ, VOCAB = 4, 5, 16


def ptb_like_producer(raw, name):
    """Cut ``raw`` (a token stream) into ``BATCH`` rows and step through them ``SEQ`` tokens
    at a time; the step index comes from a ``range_input_producer`` queue."""
    with tf1.name_scope(name):
        data = tf.convert_to_tensor(raw, dtype=tf.int32)
        batch_len = len(raw) // BATCH
        data = tf.reshape(data[: BATCH * batch_len], [BATCH, batch_len])
        epoch_size = (batch_len - 1) // SEQ
        i = tf1.train.range_input_producer(epoch_size, shuffle=False).dequeue()
        x = tf.strided_slice(data, [0, i * SEQ], [BATCH, (i + 1) * SEQ])
        y = tf.strided_slice(data, [0, i * SEQ + 1], [BATCH, (i + 1) * SEQ + 1])
        x.set_shape([BATCH, SEQ])
        y.set_shape([BATCH, SEQ])
        return [x, y]


class NextTokenModel(trainbus.ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None, SEQ], tf.int32, "input"), tf.TensorSpec([None, SEQ], tf.int32, "nextinput")]

    def build_graph(self, x, y):
        emb = tf1.get_variable("emb", [VOCAB, 8], initializer=tf1.random_uniform_initializer(-0.1, 0.1, seed=1))
        w = tf1.get_variable("W", [8, VOCAB], initializer=tf1.zeros_initializer())
        logits = tf.matmul(tf.reshape(tf.nn.embedding_lookup(emb, x), [-1, 8]), w)
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.reshape(y, [-1]), logits=logits), name="cost")

    def optimizer(self):
        return tf1.train.GradientDescentOptimizer(0.5)


class RecordFirstTokens(Callback):
    def _setup_graph(self):
        self._x = self.trainer.towers.training()[0].get_tensor("input")

    def _before_train(self):
        self.tokens = []

    def _before_run(self, ctx):
        return [self._x]

    def _after_run(self, ctx, values):
        self.tokens.append(int(values.results[0][0, 0]))


def test_tensor_input_trains_from_a_tf_train_queue_and_stops_its_runners(logdir):
    raw_train = np.arange(4 * 21) % VOCAB           # 21 tokens per row: 4 steps of 5 per epoch
    raw_val = (np.arange(4 * 11) * 3) % VOCAB
    train_in = TensorInput(lambda: ptb_like_producer(raw_train, "train_data"), size=4)
    val_in = TensorInput(lambda: ptb_like_producer(raw_val, "val_data"), size=2)
    rec = RecordFirstTokens()
    trainer = SimpleTrainer()
    launch_train_with_config(TrainConfig(model=NextTokenModel(), data=train_in, max_epoch=2, callbacks=[
        rec, InferenceRunner(val_in, [ScalarStats("cost")])], extra_callbacks=[]), trainer)

    assert trainer.global_step == 8
    assert rec.tokens == [0, 5, 10, 15] * 2          # the queue's steps in order, twice
    assert len(trainer.monitors.get_history("validation_cost")) == 2
    # each source starts only the runners its own tensors read from
    (qr_train,), (qr_val,) = train_in.queue_runners(), val_in.queue_runners()
    assert "train_data/" in qr_train.queue.queue_ref.op.name and "val_data/" in qr_val.queue.queue_ref.op.name
    assert len(trainer.graph.get_collection(tf1.GraphKeys.QUEUE_RUNNERS)) == 2
    threads = train_in.queue_runner_threads + val_in.queue_runner_threads
    assert threads and not [t for t in threads if t.is_alive()]
