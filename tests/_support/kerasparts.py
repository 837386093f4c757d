"""A small tf_keras model on 8x8 "stripes" images and a callback that records what a Keras
training did, shared by the tests of ``trainbus.contrib.keras`` (tests/core) and of the
multi-device trainers training a Keras model (plugins/trainers-multigpu)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import tf_keras as keras

from trainbus.callbacks import Callback
from trainbus.testing import batch_dataflow

tf1 = tf.compat.v1
KL = keras.layers


def stripes(n, seed):
    """8x8 images whose bright band (rows 0-2, 3-5 or 6-7) is the class; one-hot labels."""
    rng = np.random.RandomState(seed)
    dps = []
    for _ in range(n):
        c = rng.randint(3)
        im = rng.rand(8, 8, 1).astype("float32") * 0.2
        im[[slice(0, 3), slice(3, 6), slice(6, 8)][c]] += 0.8
        dps.append([im, np.eye(3, dtype="float32")[c]])
    return dps


def model_func(image):
    M = keras.models.Sequential()
    M.add(KL.InputLayer(input_tensor=image))
    M.add(KL.Conv2D(4, 3, activation="relu", padding="same"))
    M.add(KL.MaxPooling2D())
    M.add(KL.Flatten())
    M.add(KL.Dense(16, activation="relu", kernel_regularizer=keras.regularizers.l2(1e-4)))
    # momentum 0.9: the moving statistics the validation tower uses settle within the few steps trained
    M.add(KL.BatchNormalization(momentum=0.9))
    M.add(KL.Dropout(0.3))
    M.add(KL.Dense(3, activation="softmax"))
    return M


SIG_IN = [tf.TensorSpec([None, 8, 8, 1], tf.float32, "images")]
SIG_OUT = [tf.TensorSpec([None, 3], tf.float32, "labels")]


KEYS = ("validation_categorical_crossentropy", "validation_categorical_accuracy", "validation_total_loss",
        "total_loss", "categorical_crossentropy", "categorical_accuracy", "regularize_cost")


class Record(Callback):
    """Keeps the monitors' latest scalars after each epoch, the graph's facts, the batch-norm
    moving mean before and after training, and the callbacks the trainer runs."""

    def __init__(self, keys=KEYS):
        self.scalars = []
        self.keys = keys

    def _setup_graph(self):
        g = self.graph
        self.update_ops = g.get_collection(tf1.GraphKeys.UPDATE_OPS)
        self.trainable = [v.name for v in g.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES)]
        self.moving_mean = [v for v in tf1.global_variables() if "moving_mean" in v.name][0]
        self.callbacks = list(self.trainer._callbacks)

    def _before_train(self):
        self.mean0 = self.trainer.sess.run(self.moving_mean)

    def _trigger_epoch(self):
        self.scalars.append({k: self.trainer.monitors.get_latest(k) for k in self.keys})

    def _after_train(self):
        self.mean1 = self.trainer.sess.run(self.moving_mean)


def stripe_batches(n, seed, batch):
    """``stripes(n, seed)`` in batches of ``batch``, in order, the same every pass."""
    dps = stripes(n, seed)
    return batch_dataflow([np.stack([d[0] for d in dps]), np.stack([d[1] for d in dps])], batch)
