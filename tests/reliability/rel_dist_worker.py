"""One process of a real ps + 2 workers cluster on 127.0.0.1 for the reliability tests:

    python rel_dist_worker.py OUT TRAINER JOB TASK PS_PORT W0_PORT W1_PORT

TRAINER is ``ps`` (DistributedTrainerParameterServer) or ``replicated``. The workers train
"forever" (5 steps per epoch, up to 1000 epochs; ModelSaver on the chief, whose log directory
is ``OUT/log``) until the test signals one process. Each worker writes ``OUT/ready_w{task}``
(its pid) after its first step and ``OUT/end_w{task}.json`` in after_train; every process
writes ``OUT/pid_{job}{task}``. A ``TrainingInterrupted`` becomes one stderr line and exit
status ``128 + signum``. SIGUSR1 writes every thread's Python stack to stderr (the test sends it to
a process that did not end in time).
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import trainbus.callbacks  # noqa: E402
import trainbus.train  # noqa: E402
from trainbus.callbacks import Callback  # noqa: E402
from trainbus.testing import tiny_dataflow  # noqa: E402
from trainbus.utils import logger  # noqa: E402
from trainbus.utils.fs import atomic_write_text  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "_support"))
from workers import linear_model, train_or_exit  # noqa: E402  (tests/_support)

tf1 = tf.compat.v1
OUT, TRAINER, JOB, TASK = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
PORTS = [int(p) for p in sys.argv[5:8]]


class Record(Callback):
    _chief_only = False

    def _trigger_step(self):
        if self.local_step == 0 and self.epoch_num == 1:
            atomic_write_text(os.path.join(OUT, f"ready_w{TASK}"), str(os.getpid()))
        time.sleep(0.01)

    def _after_train(self):
        atomic_write_text(os.path.join(OUT, f"end_w{TASK}.json"),
                          json.dumps({"epoch": self.epoch_num, "global_step": self.global_step}))


def main():
    # a process the test finds stuck is sent SIGUSR1 before it is killed: its threads' stacks go to its log
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    atomic_write_text(os.path.join(OUT, f"pid_{JOB}{TASK}"), str(os.getpid()))
    cluster = tf1.train.ClusterSpec({"ps": [f"127.0.0.1:{PORTS[0]}"],
                                     "worker": [f"127.0.0.1:{PORTS[1]}", f"127.0.0.1:{PORTS[2]}"]})
    conf = tf1.ConfigProto(device_count={"CPU": 1}, allow_soft_placement=True)
    server = tf1.train.Server(cluster, job_name=JOB, task_index=TASK, config=conf)
    cls = trainbus.train.DistributedTrainerReplicated if TRAINER == "replicated" else \
        trainbus.train.DistributedTrainerParameterServer
    trainer = cls(1, server)
    if trainer.is_chief:
        logger.set_logger_dir(os.path.join(OUT, "log"), action="k")
    cfg = trainbus.train.TrainConfig(
        model=linear_model(7), data=trainbus.input_source.FeedInput(tiny_dataflow(n=20, batch=4, seed=TASK)),
        callbacks=[Record(), trainbus.callbacks.ModelSaver()], extra_callbacks=[], monitors=[],
        max_epoch=1000, steps_per_epoch=5, session_config=conf)
    train_or_exit(cfg, trainer)


if __name__ == "__main__":
    main()
