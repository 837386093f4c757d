"""What the training worker scripts of the multi-process tests share (they run outside pytest:
each puts this folder on ``sys.path`` itself)."""

from __future__ import annotations

import sys
from typing import Any


def linear_model(seed: int) -> Any:
    """A softmax regression over ``x`` (None, 4) float32 into 3 classes of ``y`` (None,) int32;
    its weights ``W`` start random from ``seed``, ``b`` at zero; cost ``cost``; plain SGD 0.1."""
    import tensorflow as tf

    from trainbus.train.model_desc import ModelDesc

    tf1 = tf.compat.v1

    class LinearModel(ModelDesc):
        def inputs(self) -> list:
            return [tf.TensorSpec([None, 4], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "y")]

        def build_graph(self, x: Any, y: Any) -> Any:
            w = tf1.get_variable("W", [4, 3], initializer=tf1.random_normal_initializer(seed=seed))
            b = tf1.get_variable("b", [3], initializer=tf1.zeros_initializer())
            logits = tf.matmul(x, w) + b
            return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits),
                                  name="cost")

        def optimizer(self) -> Any:
            return tf1.train.GradientDescentOptimizer(0.1)

    return LinearModel()


def train_or_exit(cfg: Any, trainer: Any) -> None:
    """``launch_train_with_config``; a ``TrainingInterrupted`` ends the worker with one stderr
    line and its exit status (128 + signal), as an uncaught one would without a traceback."""
    import trainbus.train

    try:
        trainbus.train.launch_train_with_config(cfg, trainer)
    except trainbus.train.TrainingInterrupted as e:
        print(f"trainbus: {e}", file=sys.stderr, flush=True)
        sys.exit(e.exit_code)
