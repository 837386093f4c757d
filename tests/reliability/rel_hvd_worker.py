"""One rank of a real Horovod job for the reliability tests, launched as
``horovodrun --gloo -np 2 -H localhost:2 python rel_hvd_worker.py OUT SCENARIO``.

Scenarios:

* ``stop``: trains "forever" (5 steps per epoch, up to 1000 epochs, ModelSaver on the chief);
  the test signals one rank (or horovodrun) once both ranks wrote ``OUT/ready_rank{r}`` (after
  their first step) or ``OUT/epoch2_rank{r}`` (after the first step of epoch 2).
* ``hook-stop``: rank 1 alone calls ``run_context.request_stop()`` in step 7; every rank
  must stop after the same step and exit 0.
* ``resume``: ``AutoResumeTrainConfig`` in ``OUT/log`` (the log directory of rank 0 ONLY),
  two epochs more than the checkpoint has.

Each rank writes ``OUT/begin_rank{r}.json`` (starting_epoch and global_step at before_train)
and ``OUT/end_rank{r}.json`` (epoch and global_step in after_train), and ``OUT/exit_rank{r}.json``
its exit status. A ``TrainingInterrupted``
becomes one stderr line and exit status ``128 + signum``.
"""

from __future__ import annotations

import json
import os
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
OUT, SCENARIO = sys.argv[1], sys.argv[2]
RANK = int(os.environ.get("HOROVOD_RANK", "-1"))
STEPS_PER_EPOCH = 5


def write(name, obj):
    atomic_write_text(os.path.join(OUT, f"{name}_rank{RANK}.json"), json.dumps(obj))


class Record(Callback):
    _chief_only = False

    def _before_train(self):
        write("begin", {"starting_epoch": self.trainer.starting_epoch, "global_step": self.global_step,
                        "pid": os.getpid()})

    def _trigger_step(self):
        if self.local_step == 0 and self.epoch_num == self.trainer.starting_epoch:
            atomic_write_text(os.path.join(OUT, f"ready_rank{RANK}"), str(os.getpid()))
        if SCENARIO == "stop" and self.epoch_num == 2 and self.local_step == 0:
            atomic_write_text(os.path.join(OUT, f"epoch2_rank{RANK}"), str(self.global_step))
        time.sleep(0.01)  # a slow step, so that the job is still training when the test signals

    def _after_train(self):
        write("end", {"epoch": self.epoch_num, "global_step": self.global_step})


class HookStop(Callback):
    _chief_only = False

    def _after_run(self, ctx, values):
        if RANK == 1 and self.global_step == 7:
            ctx.request_stop()


def main():
    trainer = trainbus.train.HorovodTrainer()
    if trainer.is_chief:
        logger.set_logger_dir(os.path.join(OUT, "log"), action="k")
    callbacks = [Record(), trainbus.callbacks.ModelSaver(max_to_keep=3)]
    if SCENARIO == "hook-stop":
        callbacks.append(HookStop())
    kwargs = dict(model=linear_model(100 + RANK),
                  data=trainbus.input_source.FeedInput(tiny_dataflow(n=20, batch=4, seed=RANK)),
                  callbacks=callbacks, extra_callbacks=[], monitors=[trainbus.callbacks.JSONWriter()],
                  steps_per_epoch=STEPS_PER_EPOCH)
    if SCENARIO == "resume":
        # rank 1 has no log directory: by itself it finds nothing to resume from
        cfg = trainbus.train.AutoResumeTrainConfig(**dict(kwargs, max_epoch=int(os.environ["REL_MAX_EPOCH"])))
        write("own", {"starting_epoch": cfg.starting_epoch})
    else:
        cfg = trainbus.train.TrainConfig(**dict(kwargs, max_epoch=1000 if SCENARIO == "stop" else 4))
    try:
        train_or_exit(cfg, trainer)
    except SystemExit as e:  # the rank's own exit status, apart from what the launcher makes of it
        write("exit", {"code": e.code})
        raise
    write("exit", {"code": 0})


if __name__ == "__main__":
    main()
