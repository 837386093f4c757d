"""A real HorovodTrainer run, launched by the tests with
``horovodrun --gloo -np 2 -H localhost:2 python hvd_worker.py OUT SCENARIO``.

Scenarios: ``normal`` (train, dump weights per rank), ``fail`` (rank 1 raises at step 3),
``mismatch`` (rank 1 builds one more variable than rank 0), ``signal1`` (rank 1 sends itself
SIGTERM after step 3; every rank stops, the chief writes its final checkpoint).
Each rank writes ``OUT/start_rank{r}.npz`` (after init + broadcast) and
``OUT/end_rank{r}.npz`` (after training); the chief-only callback writes
``OUT/chief_rank{r}.txt``; rank 0 alone has a log directory ``OUT/log``.
"""

from __future__ import annotations

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import trainbus.callbacks  # noqa: E402
import trainbus.train  # noqa: E402
from trainbus.callbacks import Callback  # noqa: E402
from trainbus.testing import tiny_dataflow  # noqa: E402
from trainbus.tfutils.sessinit import SessionInit  # noqa: E402
from trainbus.train.model_desc import ModelDesc  # noqa: E402
from trainbus.utils import logger  # noqa: E402
from trainbus.utils.fs import atomic_write_text  # noqa: E402

tf1 = tf.compat.v1
OUT, SCENARIO = sys.argv[1], sys.argv[2]
RANK = int(os.environ.get("HOROVOD_RANK", "-1"))


class Model(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None, 4], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "y")]

    def build_graph(self, x, y):
        # a different random start on each rank: only the broadcast can make them equal
        w = tf1.get_variable("W", [4, 3], initializer=tf1.random_normal_initializer(seed=100 + RANK))
        b = tf1.get_variable("b", [3], initializer=tf1.zeros_initializer())
        if SCENARIO == "mismatch" and RANK == 1:
            tf1.get_variable("extra_bias", [3], initializer=tf1.zeros_initializer())
        logits = tf.identity(tf.matmul(x, w) + b, name="logits")
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="cost")

    def optimizer(self):
        return tf1.train.GradientDescentOptimizer(0.1)


class LoadB(SessionInit):
    """Stands for a checkpoint restore: sets b to 0.25 (runs on the chief only)."""

    def _setup_graph(self):
        v = [x for x in tf1.global_variables() if x.op.name == "b"][0]
        self._op = v.assign(np.full([3], 0.25, "float32"))

    def _run_init(self, sess):
        sess.run(self._op)


class DumpWeights(Callback):
    _chief_only = False
    optional: list = []

    def _setup_graph(self):
        self._vars = {v.op.name: v.read_value() for v in tf1.global_variables() if v.op.name in ("W", "b")}

    def _dump(self, tag):
        vals = self.trainer.sess.run(self._vars)
        np.savez(os.path.join(OUT, f"{tag}_rank{RANK}.npz"), **vals)

    def _before_train(self):
        self._dump("start")
        atomic_write_text(os.path.join(OUT, f"info_rank{RANK}.json"),
                          json.dumps({"is_chief": self.trainer.is_chief, "rank": self.trainer.rank,
                                      "size": self.trainer.size, "optional": self.optional}))

    def _trigger_epoch(self):
        # every rank reports; only the chief's monitors (JSONWriter) are active
        self.trainer.monitors.put_scalar("epoch_marker", float(self.epoch_num))

    def _after_train(self):
        self._dump("end")


class ChiefMarker(Callback):
    """Chief-only (the default): stands for savers and loggers."""

    def _trigger_epoch(self):
        atomic_write_text(os.path.join(OUT, f"chief_rank{RANK}.txt"), f"epoch {self.epoch_num}\n")


class Boom(Callback):
    _chief_only = False

    def _trigger_step(self):
        if RANK == 1 and self.global_step == 3:
            raise RuntimeError("rank 1 fails on purpose")


class SignalSelf(Callback):
    """Rank 1 sends itself SIGTERM after global step 3, as an operator would."""

    _chief_only = False

    def _trigger_step(self):
        if RANK == 1 and self.global_step == 3:
            import signal

            os.kill(os.getpid(), signal.SIGTERM)


def optional(name):
    try:
        return getattr(trainbus.callbacks, name)
    except (AttributeError, ImportError):
        return None


def main():
    trainer = trainbus.train.HorovodTrainer()
    if trainer.is_chief:
        logger.set_logger_dir(os.path.join(OUT, "log"), action="k")
    dump = DumpWeights()
    callbacks = [dump, ChiefMarker()]
    monitors = []
    # savers and loggers of the installed plugins (chief-only by default)
    saver, jsonw = optional("ModelSaver"), optional("JSONWriter")
    if saver is not None:
        callbacks.append(saver())
        dump.optional.append("ModelSaver")
    if jsonw is not None:
        monitors.append(jsonw())
        dump.optional.append("JSONWriter")
    if SCENARIO == "fail":
        callbacks.append(Boom())
    if SCENARIO == "signal1":
        callbacks.append(SignalSelf())
    cfg = trainbus.train.TrainConfig(
        model=Model(), data=trainbus.input_source.FeedInput(tiny_dataflow(n=32, batch=4, seed=RANK)),
        callbacks=callbacks, extra_callbacks=[], monitors=monitors, max_epoch=2, steps_per_epoch=4,
        session_init=LoadB())
    trainbus.train.launch_train_with_config(cfg, trainer)


if __name__ == "__main__":
    main()
