"""Per-step cost of the Horovod stop agreement, run as
``horovodrun --gloo -np 2 -H localhost:2 python rel_hvd_bench.py STEPS``: the same tiny job
timed with ``HorovodTrainer`` (stop vector in the gradients' all-reduce, fetched every step)
and with a variant whose all-reduce carries no stop vector; rank 0 prints both."""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import trainbus.train  # noqa: E402
from trainbus.callbacks import Callback  # noqa: E402
from trainbus.testing import tiny_dataflow  # noqa: E402
from trainbus.train.model_desc import ModelDesc  # noqa: E402

tf1 = tf.compat.v1
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 2000


class Model(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None, 4], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "y")]

    def build_graph(self, x, y):
        w = tf1.get_variable("W", [4, 3])
        logits = tf.matmul(x, w)
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="cost")

    def optimizer(self):
        return tf1.train.GradientDescentOptimizer(0.1)


class Clock(Callback):
    _chief_only = False

    def _before_epoch(self):
        self.t0 = time.perf_counter()

    def _after_epoch(self):
        self.took = time.perf_counter() - self.t0


def make_plain():
    base = trainbus.train.HorovodTrainer

    class NoStopAgreement(base):
        def allreduce(self, grads):
            hvd = self.hvd
            return [(hvd.allreduce(g, op=hvd.Average), v) for g, v in grads]

    return NoStopAgreement()


def timed(agree: bool) -> float:
    with tf.Graph().as_default():
        trainer = trainbus.train.HorovodTrainer() if agree else make_plain()
        clock = Clock()
        cfg = trainbus.train.TrainConfig(
            model=Model(), data=trainbus.input_source.FeedInput(tiny_dataflow(n=64, batch=8, seed=0)),
            callbacks=[clock], extra_callbacks=[], monitors=[], max_epoch=2, steps_per_epoch=STEPS)
        trainbus.train.launch_train_with_config(cfg, trainer)
        return clock.took / STEPS


def main():
    results = {}
    for label, agree in (("off", False), ("on", True)) * 3:
        results.setdefault(label, []).append(timed(agree))
    if int(os.environ.get("HOROVOD_RANK", "0")) == 0:
        for label, v in results.items():
            print(f"BENCH stop agreement {label}: {min(v) * 1e3:.3f} ms/step", flush=True)


if __name__ == "__main__":
    main()
