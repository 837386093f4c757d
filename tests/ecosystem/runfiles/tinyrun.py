"""A tiny model and its data, named by the run files of tests/ecosystem (``tinyrun:LinearNet``,
``tinyrun:make_data``): linear regression y = x . w_true + 0.5."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from trainbus.dataflow import BatchData, DataFromList
from trainbus.tfutils.summary import add_moving_summary
from trainbus.train import ModelDesc

tf1 = tf.compat.v1
W_TRUE = np.array([1.0, -2.0, 0.5], dtype="float32")


class LinearNet(ModelDesc):
    """``x (None, 3) -> y_hat``; tensor ``cost`` (mean squared error, with a moving-average
    summary); variables ``w``, ``bias``, ``learning_rate``."""

    def __init__(self, lr: float = 0.1, dim: int = 3) -> None:
        self.lr = lr
        self.dim = dim

    def inputs(self):
        return [tf.TensorSpec([None, self.dim], tf.float32, "x"), tf.TensorSpec([None], tf.float32, "y")]

    def build_graph(self, x, y):
        w = tf1.get_variable("w", [self.dim], initializer=tf1.zeros_initializer())
        bias = tf1.get_variable("bias", [], initializer=tf1.zeros_initializer())
        pred = tf.reduce_sum(x * w, axis=1) + bias
        cost = tf.reduce_mean(tf.square(pred - y), name="cost")
        add_moving_summary(cost)  # MovingAverageSummary + MergeAllSummaries (the defaults) report it
        return cost

    def optimizer(self):
        lr = tf1.get_variable("learning_rate", initializer=float(self.lr), trainable=False)
        return tf1.train.GradientDescentOptimizer(lr)


def make_data(n: int = 64, batch: int = 8, seed: int = 0):
    """A DataFlow of ``n // batch`` batches ``[x, y]``."""
    rng = np.random.RandomState(seed)
    xs = rng.rand(n, 3).astype("float32")
    ys = (xs @ W_TRUE + 0.5).astype("float32")
    return BatchData(DataFromList([[x, y] for x, y in zip(xs, ys)], shuffle=False), batch)
