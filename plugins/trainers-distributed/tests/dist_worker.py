"""One process of a real ps + 2 workers cluster on 127.0.0.1, used by the tests:

    python dist_worker.py OUT TRAINER JOB TASK PS_PORT W0_PORT W1_PORT [GPUS]

TRAINER is ``ps`` (DistributedTrainerParameterServer) or ``replicated``
(DistributedTrainerReplicated); JOB is ``ps`` or ``worker``. Every process runs the same
script, as with a real cluster. Workers write ``OUT/start_w{task}.npz`` (after
initialization), ``OUT/end_w{task}.npz`` and ``OUT/info_w{task}.json``; the chief-only
callback writes ``OUT/chief_w{task}.txt``; only the chief has a log directory ``OUT/log``.
With ``DIST_SIGNAL_TASK=n`` in the environment, worker n sends itself SIGTERM after its third
step (every process must then stop, the chief writing its final checkpoint).
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# SIGABRT (sent by the test to a process still running at its deadline) prints every thread's
# Python stack before the process dies: where it waited shows in its log
faulthandler.enable()

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
OUT, TRAINER, JOB, TASK = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
PORTS = [int(p) for p in sys.argv[5:8]]
GPUS = int(sys.argv[8]) if len(sys.argv) > 8 else 1


class Model(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None, 4], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "y")]

    def build_graph(self, x, y):
        w = tf1.get_variable("W", [4, 3], initializer=tf1.random_normal_initializer(seed=7 + TASK))
        b = tf1.get_variable("b", [3], initializer=tf1.zeros_initializer())
        logits = tf.identity(tf.matmul(x, w) + b, name="logits")
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="cost")

    def optimizer(self):
        return tf1.train.GradientDescentOptimizer(0.1)


class LoadB(SessionInit):
    """Stands for a checkpoint restore: b := 0.25 (the chief runs it)."""

    def _setup_graph(self):
        v = [x for x in tf1.global_variables() if x.op.name == "b"][0]
        self._op = v.assign(np.full([3], 0.25, "float32"))

    def _run_init(self, sess):
        sess.run(self._op)


class Dump(Callback):
    """On every worker: the values this worker trains with (its tower 0), at start and end."""

    _chief_only = False
    optional: list = []

    def _setup_graph(self):
        vs = self.trainer.towers.training()[0].vs_name
        by_name = {v.op.name: v for v in tf1.global_variables() + tf1.local_variables()}
        self._vars = {n: by_name[f"{vs}/{n}" if vs else n].read_value() for n in ("W", "b")}
        self._gs = tf.identity(tf1.train.get_global_step())

    def _before_train(self):
        np.savez(os.path.join(OUT, f"start_w{TASK}.npz"), **self.trainer.sess.run(self._vars))
        atomic_write_text(os.path.join(OUT, f"info_w{TASK}.json"), json.dumps({
            "is_chief": self.trainer.is_chief, "optional": self.optional,
            "global_vars": sorted(v.op.name for v in tf1.global_variables()),
            "local_vars": sorted(v.op.name for v in tf1.local_variables()),
            "devices": {n: v.device for n, v in ((v.op.name, v) for v in tf1.global_variables())},
        }))

    def _trigger_epoch(self):
        self.trainer.monitors.put_scalar("epoch_marker", float(self.epoch_num))

    def _after_train(self):
        vals = self.trainer.sess.run(dict(self._vars, global_step=self._gs))
        np.savez(os.path.join(OUT, f"end_w{TASK}.npz"), **vals)


class WaitForStart(Callback):
    """On every worker: holds this worker's first step until the other worker recorded its start
    values. Neither worker then steps before both recorded theirs, so both recorded exactly what
    the chief initialized and restored (on a loaded machine worker 1 could otherwise train, and
    change the ps variables, before the chief's own record)."""

    _chief_only = False

    def __init__(self, other: int):
        self.other = other

    def _before_train(self):
        import time

        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(OUT, f"start_w{self.other}.npz")) and time.monotonic() < deadline:
            time.sleep(0.05)


class ChiefMarker(Callback):
    def _trigger_epoch(self):
        atomic_write_text(os.path.join(OUT, f"chief_w{TASK}.txt"), f"epoch {self.epoch_num}\n")


class SignalSelf(Callback):
    """Sends this worker SIGTERM after its own third step, as an operator would."""

    _chief_only = False

    def __init__(self):
        self.steps = 0

    def _trigger_step(self):
        self.steps += 1
        if self.steps == 3:
            import signal

            os.kill(os.getpid(), signal.SIGTERM)


def optional(name):
    try:
        return getattr(trainbus.callbacks, name)
    except (AttributeError, ImportError):
        return None


def main():
    cluster = tf1.train.ClusterSpec({"ps": [f"127.0.0.1:{PORTS[0]}"],
                                     "worker": [f"127.0.0.1:{PORTS[1]}", f"127.0.0.1:{PORTS[2]}"]})
    conf = tf1.ConfigProto(device_count={"CPU": max(1, GPUS)}, allow_soft_placement=True)
    server = tf1.train.Server(cluster, job_name=JOB, task_index=TASK, config=conf)
    cls = trainbus.train.DistributedTrainerReplicated if TRAINER == "replicated" else \
        trainbus.train.DistributedTrainerParameterServer
    trainer = cls(GPUS, server)
    if trainer.is_chief:
        logger.set_logger_dir(os.path.join(OUT, "log"), action="k")
    dump = Dump()
    callbacks, monitors = [dump, WaitForStart(1 - TASK), ChiefMarker()], []
    saver, jsonw = optional("ModelSaver"), optional("JSONWriter")
    if saver is not None:
        callbacks.append(saver())
        dump.optional.append("ModelSaver")
    if jsonw is not None:
        monitors.append(jsonw())
        dump.optional.append("JSONWriter")
    max_epoch = 2
    if os.environ.get("DIST_SIGNAL_TASK"):
        # workers are asynchronous: the others must still be training when the signal arrives, so
        # they stop through the agreed stop, not by reaching max_epoch first (on a loaded machine)
        max_epoch = 1000
        if os.environ["DIST_SIGNAL_TASK"] == str(TASK) and JOB == "worker":
            callbacks.append(SignalSelf())
    ds = tiny_dataflow(n=32, batch=4, seed=TASK)
    cfg = trainbus.train.TrainConfig(model=Model(), data=trainbus.input_source.QueueInput(ds), callbacks=callbacks,
                                     extra_callbacks=[], monitors=monitors, max_epoch=max_epoch, steps_per_epoch=5,
                                     session_init=LoadB(), session_config=conf)
    trainbus.train.launch_train_with_config(cfg, trainer)
    logger.info(f"{JOB} {TASK} exits")


if __name__ == "__main__":
    main()
