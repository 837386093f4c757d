"""Training process for the JSONWriter crash tests: it is killed with SIGKILL at chosen moments.

usage: python json_kill_child.py LOGDIR

The process imports TensorFlow once, then for every line ``run`` read on stdin forks a child
that trains ``TinyModel`` into LOGDIR with ``JSONWriter`` and prints, flushed:

* ``CHILD <pid>`` (printed by the parent right after the fork);
* ``START <starting_epoch> <global_step>`` when the child begins;
* ``EPOCH <n>`` after epoch n was handed to JSONWriter (a monitor placed after it prints it);
* ``EXIT <status>`` (parent) once the child is gone, killed or not.

Each child resumes from the history already in LOGDIR like a run restored from a checkpoint
that lags one epoch behind the stats (when there are two epochs or more): its global_step is the
last step of the epoch before the last recorded one, and its starting_epoch is that last epoch
(which JSONWriter must then drop and redo). Line ``quit`` ends the process. The test (or a stress test) sends SIGKILL to the
child pid whenever it likes, then reads LOGDIR/stats.json.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import trainbus.testing  # noqa: E402
from trainbus.callbacks import Callback, MonitorBase  # noqa: E402

# the repository's tests/_support (this script runs as a subprocess, outside pytest's sys.path)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests", "_support"))
from resume import SetGlobalStep  # noqa: E402

STEPS_PER_EPOCH = 3
SCALARS_PER_STEP = 40


class PutMany(Callback):
    """Many scalars per step (a large file makes every write take a while), and one per epoch."""

    def _trigger_step(self) -> None:
        put = self.trainer.monitors.put_scalar
        gs = self.trainer.global_step
        for i in range(SCALARS_PER_STEP):
            put(f"stat_with_a_long_name_{i:03d}", gs + i / 1000.0)

    def _trigger(self) -> None:
        self.trainer.monitors.put_scalar("epoch_stat", float(self.trainer.epoch_num))


class Beacon(MonitorBase):
    def _trigger(self) -> None:
        print(f"EPOCH {self.trainer.epoch_num}", flush=True)


def child(logdir: str) -> None:
    from trainbus.callbacks import JSONWriter
    from trainbus.utils import logger

    logger.set_logger_dir(logdir, action="k")
    logger.setLevel("ERROR")
    stats = JSONWriter.load_existing_json() or []
    epochs = sorted({int(r["epoch_num"]) for r in stats})
    if epochs:
        resume_epoch = epochs[-1]
        earlier = [r for r in stats if int(r["epoch_num"]) < resume_epoch]
        if earlier:  # the checkpoint lags: redo the last recorded epoch
            starting, gs = resume_epoch, int(earlier[-1]["global_step"])
        else:
            starting, gs = resume_epoch + 1, int(stats[-1]["global_step"])
    else:
        starting, gs = 1, 0
    print(f"START {starting} {gs}", flush=True)
    trainbus.testing.train_tiny(callbacks=[PutMany()], monitors=[JSONWriter(), Beacon()], max_epoch=100000,
                                steps_per_epoch=STEPS_PER_EPOCH, starting_epoch=starting,
                                session_init=SetGlobalStep(gs))


def main() -> None:
    logdir = sys.argv[1]
    trainbus.testing.TinyModel  # noqa: B018 - import the lazy parts once, before forking
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == "quit":
            break
        if cmd != "run":
            continue
        pid = os.fork()
        if pid == 0:
            try:
                child(logdir)
            finally:
                os._exit(0)
        print(f"CHILD {pid}", flush=True)
        _, status = os.waitpid(pid, 0)
        print(f"EXIT {status}", flush=True)


if __name__ == "__main__":
    main()
