"""A training script the reliability tests run in a subprocess (then signal or kill it).

Usage: python rel_script.py --logdir DIR [options]; see ``main()`` for the options.
Prints nothing special on stdout; writes marker files the tests wait for.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _write(path, text):
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


class ChildProcessData:
    """A DataFlow whose datapoints are produced by a forked child process."""

    def __init__(self, pidfile, n=8, batch=4, dim=4):
        self.pidfile, self.n, self.batch, self.dim = pidfile, n, batch, dim
        self._proc = None

    def __len__(self):
        return self.n

    def reset_state(self):
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        self._q = ctx.Queue(8)
        self._proc = ctx.Process(target=_produce, args=(self._q, self.batch, self.dim), daemon=True)
        self._proc.start()
        _write(self.pidfile, f"{self._proc.pid}\n")

    def __iter__(self):
        for _ in range(self.n):
            yield self._q.get(timeout=30)


def _produce(q, batch, dim):
    import numpy as np

    rng = np.random.RandomState(0)
    while True:
        x = rng.rand(batch, dim).astype("float32")
        q.put([x, (x.sum(1) > dim / 2).astype("int32")])


class BlockingData:
    """Yields ``good`` datapoints, then blocks forever (a stuck input)."""

    def __init__(self, good=3):
        self.good = good

    def __len__(self):
        return 8

    def reset_state(self):
        pass

    def __iter__(self):
        import numpy as np

        for _ in range(self.good):
            yield [np.zeros((4, 4), "float32"), np.zeros((4,), "int32")]
        while True:
            time.sleep(3600)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--logdir", required=True)
    p.add_argument("--epochs", type=int, default=1000)
    p.add_argument("--spe", type=int, default=4)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--ready", help="file written after the first step (of this run; see --ready-step)")
    p.add_argument("--ready-step", type=int, default=1, help="write --ready after this step of this run")
    p.add_argument("--hold-at-ready", action="store_true",
                   help="after writing --ready, hold that step until a stop is requested (a signal then always "
                        "arrives at that step, whatever the machine's load)")
    p.add_argument("--hold-before-first-step", action="store_true",
                   help="write --ready in the first before_epoch, before any step, and hold there until a stop "
                        "is requested (a signal then arrives before the run's first step)")
    p.add_argument("--marker", help="file to which after_train appends a line")
    p.add_argument("--after-train-sleep", type=float, default=0.0)
    p.add_argument("--input", default="feed", choices=["feed", "queue", "childproc", "blocking"])
    p.add_argument("--pidfile")
    p.add_argument("--saver", action="store_true", help="add trainbus.callbacks.ModelSaver")
    p.add_argument("--monitors", action="store_true", help="JSONWriter + TFEventWriter")
    p.add_argument("--resume", action="store_true", help="AutoResumeTrainConfig in the log dir")
    p.add_argument("--max-to-keep", type=int, default=3)
    p.add_argument("--uncaught", action="store_true", help="do not catch TrainingInterrupted")
    p.add_argument("--finally-marker", help="file the script's own finally block (around training) writes")
    p.add_argument("--summary", help="file to which the final state is written as JSON")
    p.add_argument("--stateful", action="store_true", help="add stateful callbacks (schedules, savers, patience)")
    p.add_argument("--ckpt-dir", help="ModelSaver/AutoResumeTrainConfig checkpoint_dir")
    p.add_argument("--slow-final-save", type=float, default=0.0,
                   help="after a stop was requested, sleep this long inside Saver.save once the new checkpoint's "
                        "files are written (before the state file names it); writes MARKER.save first")
    a = p.parse_args()

    from trainbus.callbacks.base import Callback
    from trainbus.input_source import FeedInput, QueueInput
    from trainbus.testing import TinyModel, tiny_dataflow
    from trainbus.train import AutoResumeTrainConfig, TrainConfig, TrainingInterrupted, launch_train_with_config
    from trainbus.utils import logger

    logger.set_logger_dir(a.logdir, action="k")

    class Probe(Callback):
        def _hold_until_stop(self):
            end = time.monotonic() + 600
            while not self.trainer.stop_requested and time.monotonic() < end:
                time.sleep(0.01)

        def _before_epoch(self):
            if a.hold_before_first_step and self.epoch_num == self.trainer.starting_epoch:
                _write(a.ready, "ready\n")
                self._hold_until_stop()

        def _trigger_step(self):
            if a.ready and self.global_step == a.ready_step + (self.trainer.starting_epoch - 1) * self.trainer.steps_per_epoch:
                _write(a.ready, "ready\n")
                if a.hold_at_ready:
                    self._hold_until_stop()
            if a.step_sleep:
                time.sleep(a.step_sleep)

        def _after_train(self):
            if a.marker:
                _write(a.marker, f"after_train {self.epoch_num} {self.global_step}\n")
            if a.after_train_sleep:
                time.sleep(a.after_train_sleep)
                if a.marker:
                    _write(a.marker, "after_train slept\n")

    callbacks = [Probe()]
    if a.stateful:
        import trainbus.callbacks as C

        class WSum(Callback):
            """A deterministic statistic for the stateful callbacks to follow."""

            def _setup_graph(self):
                import tensorflow as tf

                self._w = [v for v in tf.compat.v1.global_variables() if v.op.name == "W"][0]
                # a second hyperparameter, for StatMonitorParamSetter (the schedule owns the lr)
                tf.compat.v1.get_variable("momentum_like", initializer=1.0, trainable=False)

            def _trigger_epoch(self):
                w = self.trainer.sess.run(self._w)
                self.trainer.monitors.put_scalar("wsum", float(abs(w).sum()))
                self.trainer.monitors.put_scalar("wtrend", float(-((self.epoch_num % 3) - 1) ** 2))

        callbacks += [
            WSum(),
            C.ScheduledHyperParamSetter("learning_rate", [(0, 0.1), (2, 0.05), (4, 0.02)]),
            C.StatMonitorParamSetter("momentum_like", "wtrend", lambda x: x * 0.9, threshold=0.0, last_k=1, reverse=True),
            C.EarlyStopping("wtrend", patience=50, mode="max"),
        ]
    if a.saver:
        import trainbus.callbacks as C

        # after the stateful callbacks: the states it saves include this epoch's updates
        callbacks.append(C.ModelSaver(max_to_keep=a.max_to_keep, checkpoint_dir=a.ckpt_dir))
        if a.stateful:
            callbacks.append(C.MinSaver("wtrend", reverse=True, checkpoint_dir=a.ckpt_dir))
    monitors = []
    if a.monitors:
        import trainbus.callbacks as C

        monitors = [C.JSONWriter(), C.TFEventWriter()]

    if a.input == "feed":
        data = FeedInput(tiny_dataflow())
    elif a.input == "queue":
        data = QueueInput(tiny_dataflow())
    elif a.input == "childproc":
        data = QueueInput(ChildProcessData(a.pidfile))
    else:
        data = QueueInput(BlockingData())
    extra = {"checkpoint_dir": a.ckpt_dir} if a.resume and a.ckpt_dir else {}
    cfg_cls = AutoResumeTrainConfig if a.resume else TrainConfig
    cfg = cfg_cls(**extra, model=TinyModel(), data=data, callbacks=callbacks, extra_callbacks=[], monitors=monitors,
                  max_epoch=a.epochs, steps_per_epoch=a.spe)
    from trainbus.train import SimpleTrainer

    trainer = SimpleTrainer()
    if a.slow_final_save:
        import tensorflow as tf

        saver_cls = tf.compat.v1.train.Saver
        original_save = saver_cls.save

        def slow_save(self, sess, save_path, global_step=None, *args, **kwargs):
            path = original_save(self, sess, save_path, global_step, *args, **kwargs)
            if trainer._stop_reason is not None:
                _write(a.marker + ".save", f"{path}\n")
                time.sleep(a.slow_final_save)
            return path

        saver_cls.save = slow_save
    if a.uncaught:
        try:
            launch_train_with_config(cfg, trainer)
        finally:
            if a.finally_marker:
                _write(a.finally_marker, f"finally {trainer.global_step}\n")
    else:
        try:
            launch_train_with_config(cfg, trainer)
        except TrainingInterrupted as e:
            print(f"trainbus: {e}", file=sys.stderr)
            sys.exit(e.exit_code)
    if a.summary:
        _write(a.summary, json.dumps({"global_step": trainer.global_step, "epoch": trainer.epoch_num}))


if __name__ == "__main__":
    main()
