#!/usr/bin/env python
"""Throughput of the scale-out trainers on this machine (a benchmark, not a test).

Workload: MLP 784-256-256-10, softmax cross-entropy, SGD, constant input (no input cost).

1. Horovod: one process with ``HorovodTrainer`` (batch 64) against 2 ranks under
   ``horovodrun --gloo -np 2`` (batch 64 per rank): samples/s per rank and in total.
2. Multi-device in one process (logical CPU devices ``/cpu:i``): ``SimpleTrainer`` with batch
   128 against ``SyncMultiGPUTrainerReplicated(2)`` / ``SyncMultiGPUTrainerParameterServer(2)`` /
   ``AsyncMultiGPUTrainer(2)`` with batch 64 per tower (the same total batch).

    python bench/bench_scaling.py            # full
    python bench/bench_scaling.py --quick    # fewer steps

On a CPU-only machine data parallelism splits the same cores, so expect no speed-up: the
numbers show the cost of each strategy's extra communication.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def build_model():
    import tensorflow as tf

    from trainbus.train.model_desc import ModelDesc

    tf1 = tf.compat.v1

    class MLP(ModelDesc):
        def inputs(self):
            return [tf.TensorSpec([None, 784], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "y")]

        def build_graph(self, x, y):
            h = x
            for i, (fin, fout) in enumerate([(784, 256), (256, 256), (256, 10)]):
                w = tf1.get_variable(f"fc{i}/W", [fin, fout], initializer=tf1.glorot_uniform_initializer())
                b = tf1.get_variable(f"fc{i}/b", [fout], initializer=tf1.zeros_initializer())
                h = tf.matmul(h, w) + b
                if i < 2:
                    h = tf.nn.relu(h)
            return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h), name="cost")

        def optimizer(self):
            return tf1.train.GradientDescentOptimizer(0.01)

    return MLP()


def timed_run(trainer, batch, steps, epochs, n_cpu):
    """Train; returns the median seconds per step over the epochs after the first."""
    import tensorflow as tf

    import trainbus.train
    from trainbus.callbacks import Callback
    from trainbus.input_source import DummyConstantInput

    times = []

    class EpochTimer(Callback):
        _chief_only = False

        def _before_epoch(self):
            self.t0 = time.perf_counter()

        def _after_epoch(self):
            times.append((time.perf_counter() - self.t0) / steps)

    conf = tf.compat.v1.ConfigProto(device_count={"CPU": n_cpu}, allow_soft_placement=True)
    cfg = trainbus.train.TrainConfig(model=build_model(), data=DummyConstantInput([[batch, 784], [batch]]),
                                     callbacks=[EpochTimer()], extra_callbacks=[], monitors=[],
                                     steps_per_epoch=steps, max_epoch=epochs, session_config=conf)
    trainbus.train.launch_train_with_config(cfg, trainer)
    return statistics.median(times[1:] if len(times) > 1 else times)


def hvd_worker(out, steps, epochs):
    import trainbus.train

    trainer = trainbus.train.HorovodTrainer()
    sec = timed_run(trainer, 64, steps, epochs, 1)
    with open(os.path.join(out, f"rank{trainer.rank}.json"), "w") as f:
        json.dump({"rank": trainer.rank, "size": trainer.size, "sec_per_step": sec}, f)


def run_horovod(np_, steps, epochs):
    out = tempfile.mkdtemp(prefix="bench_hvd_")
    me = os.path.abspath(__file__)
    if np_ == 1:
        cmd = [sys.executable, me, "--hvd-worker", out, "--steps", str(steps), "--epochs", str(epochs)]
    else:
        hr = os.path.join(os.path.dirname(sys.executable), "horovodrun")
        cmd = [hr, "--gloo", "-np", str(np_), "-H", f"localhost:{np_}", sys.executable, me, "--hvd-worker", out,
               "--steps", str(steps), "--epochs", str(epochs)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    res = [json.load(open(os.path.join(out, f"rank{r}.json"))) for r in range(np_)]
    per_rank = [64 / r["sec_per_step"] for r in res]
    return per_rank


def run_multidevice(steps, epochs):
    import trainbus.train

    rows = []
    sec = timed_run(trainbus.train.SimpleTrainer(), 128, steps, epochs, 2)
    rows.append(("SimpleTrainer (batch 128)", sec))
    for name, make in [
        ("SyncMultiGPUTrainerReplicated(2) cpu", lambda: trainbus.train.SyncMultiGPUTrainerReplicated(2, mode="cpu")),
        ("SyncMultiGPUTrainerReplicated(2) hierarchical",
         lambda: trainbus.train.SyncMultiGPUTrainerReplicated(2, mode="hierarchical")),
        ("SyncMultiGPUTrainerParameterServer(2)", lambda: trainbus.train.SyncMultiGPUTrainerParameterServer(2)),
        ("AsyncMultiGPUTrainer(2)", lambda: trainbus.train.AsyncMultiGPUTrainer(2)),
    ]:
        rows.append((name + " (64/tower)", timed_run(make(), 64, steps, epochs, 2)))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--hvd-worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--skip-horovod", action="store_true")
    args = ap.parse_args()
    steps = args.steps or (50 if args.quick else 300)
    epochs = args.epochs or (3 if args.quick else 4)
    if args.hvd_worker:
        hvd_worker(args.hvd_worker, steps, epochs)
        return
    from trainbus.utils import logger

    logger.set_logger_dir(tempfile.mkdtemp(prefix="bench_scaling_"), action="k")
    import logging

    logging.getLogger("trainbus").setLevel(logging.WARNING)

    print(f"MLP 784-256-256-10, {steps} steps/epoch, {epochs} epochs (median of epochs 2..{epochs}), "
          f"{os.cpu_count()} CPUs\n")
    if not args.skip_horovod:
        print(f"{'Horovod':<56} {'ranks':>5} {'samples/s/rank':>15} {'samples/s total':>16}")
        for np_ in (1, 2):
            per_rank = run_horovod(np_, steps, epochs)
            print(f"{'HorovodTrainer batch 64/rank':<56} {np_:>5} "
                  f"{statistics.mean(per_rank):>15.0f} {sum(per_rank):>16.0f}")
        print()
    print(f"{'one process, 2 logical CPU devices':<56} {'ms/step':>8} {'samples/s':>10} {'vs Simple':>10}")
    rows = run_multidevice(steps, epochs)
    base = rows[0][1]
    for name, sec in rows:
        print(f"{name:<56} {sec * 1e3:>8.2f} {128 / sec:>10.0f} {base / sec:>9.2f}x")


if __name__ == "__main__":
    main()
