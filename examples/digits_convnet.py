#!/usr/bin/env python
"""The main job: train a small convnet on the 8x8 handwritten digits shipped in examples/data.

    python examples/digits_convnet.py [--logdir train_log/digits] [--max-epoch 25]

Uses the default callbacks and monitors (progress bar, summaries, TensorBoard events,
stats.json, printed scalars) plus validation every epoch (InferenceRunner), checkpoints
(ModelSaver), the best model by validation error (MinSaver), a learning-rate schedule and early
stopping. Ends with the validation error (target: under 5%) and where the outputs are: the log
directory holds log.log, stats.json, the TensorBoard events, the checkpoints (model-<step>) and the
best model (min-val-error.tfmodel); look at it with `trainbus show <logdir>` (``--plot`` with matplotlib) or
`tensorboard --logdir <logdir>`. Resumes where it stopped when run again with the same --logdir
(AutoResumeTrainConfig). Needs only a ``trainbus[standard]`` install (EarlyStopping comes with it).

The data, examples/data/digits.npz, is the test part of the UCI "Optical Recognition of
Handwritten Digits" set (1797 images of 8x8 counts 0..16 and their labels; see
examples/data/README.md for its source and license).
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from trainbus.callbacks import (  # noqa: E402
    ClassificationError, EarlyStopping, InferenceRunner, MinSaver, ModelSaver, ScalarStats, ScheduledHyperParamSetter)
from trainbus.dataflow import BatchData, DataFromList  # noqa: E402
from trainbus.models import Conv2D, FullyConnected, MaxPooling  # noqa: E402
from trainbus.tfutils import argscope  # noqa: E402
from trainbus.tfutils.summary import add_moving_summary  # noqa: E402
from trainbus.train import AutoResumeTrainConfig, ModelDesc, SimpleTrainer, launch_train_with_config  # noqa: E402
from trainbus.utils import logger  # noqa: E402

tf1 = tf.compat.v1
BATCH = 32


class DigitsConvNet(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None, 8, 8, 1], tf.float32, "image"), tf.TensorSpec([None], tf.int32, "label")]

    def build_graph(self, image, label):
        with argscope(Conv2D, kernel_size=3, activation=tf.nn.relu, padding="same"):
            x = Conv2D("conv0", image, 32)
            x = MaxPooling("pool0", x, 2)  # 4x4
            x = Conv2D("conv1", x, 64)
            x = MaxPooling("pool1", x, 2)  # 2x2
        x = FullyConnected("fc0", x, 128, activation=tf.nn.relu)
        logits = FullyConnected("fc1", x, 10)
        tf.nn.softmax(logits, name="prob")
        cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits),
                              name="cross_entropy_loss")
        wrong = tf.cast(tf.logical_not(tf1.nn.in_top_k(logits, label, 1)), tf.float32, name="incorrect_vector")
        add_moving_summary(cost, tf.reduce_mean(wrong, name="train_error"))
        return cost

    def optimizer(self):
        lr = tf1.get_variable("learning_rate", initializer=3e-3, trainable=False)
        tf1.summary.scalar("learning_rate-summary", lr)
        return tf1.train.AdamOptimizer(lr)


DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "digits.npz")


def get_data():
    with np.load(DATA) as digits:
        images = (digits["images"] / 16.0).astype("float32")[..., np.newaxis]
        labels = digits["labels"].astype("int32")
    order = np.random.RandomState(42).permutation(len(labels))
    images, labels = images[order], labels[order]
    n_val = 300
    train = [[images[i], labels[i]] for i in range(n_val, len(labels))]
    val = [[images[i], labels[i]] for i in range(n_val)]
    return BatchData(DataFromList(train, shuffle=True), BATCH), BatchData(DataFromList(val, shuffle=False), BATCH, remainder=True)


def main(argv=None) -> float:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--logdir", default=os.path.join("train_log", "digits_convnet"))
    p.add_argument("--max-epoch", type=int, default=25)
    args = p.parse_args(argv)

    logger.set_logger_dir(args.logdir, action="k")
    train, val = get_data()
    config = AutoResumeTrainConfig(
        model=DigitsConvNet(),
        dataflow=train,
        callbacks=[
            ModelSaver(max_to_keep=3),
            InferenceRunner(val, [ScalarStats("cross_entropy_loss"), ClassificationError("incorrect_vector", "val-error")]),
            MinSaver("val-error"),
            ScheduledHyperParamSetter("learning_rate", [(0, 3e-3), (10, 1e-3), (18, 3e-4)]),
            EarlyStopping("val-error", patience=6, mode="min"),
        ],
        max_epoch=args.max_epoch,
    )
    trainer = SimpleTrainer()
    # SIGINT/SIGTERM/SIGHUP: the final checkpoint is written, then launch_train_with_config raises
    # TrainingInterrupted (a SystemExit): the script ends with one line on stderr and status
    # 128+signal; run it again with the same --logdir to continue.
    launch_train_with_config(config, trainer)
    history = trainer.monitors.get_history("val-error")
    best = min(v for _, v in history)
    print(f"validation error: last {history[-1][1]:.4f}, best {best:.4f} "
          f"(logs, checkpoints, stats.json and TensorBoard events in {args.logdir}; "
          f"look at them with: trainbus show {args.logdir})")
    return best


if __name__ == "__main__":
    main()
