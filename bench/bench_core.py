#!/usr/bin/env python
"""Per-step overhead of trainbus against a bare ``Session.run`` loop on the SAME graph and session.

Each workload trains with trainbus; after every trainbus epoch, a callback runs a bare loop of
the same number of steps (``sess.run(train_op, feed_dict)``) in the same process, so machine
noise hits both alike. The ratio is median(trainbus step time) / median(bare step time).

    python bench/bench_core.py            # re-executes itself pinned to one core with taskset
    python bench/bench_core.py --quick    # fewer epochs

Targets (issue "Core"): trivial <= 1.15x, idle callback +0 us, per-step callback <= +0.5 us,
MLP FeedInput <= 1.03x, MLP QueueInput <= 1.05x, MLP with default callbacks/monitors <= 1.15x;
``import trainbus`` < 0.3 s. Issue "Second architecture step": trivial <= 0.25x, <= +0.10 us per
callback overriding ``_before_run``/``_after_run`` and <= +0.05 us per callback overriding
``_trigger_step`` (100 callbacks). Each per-callback row is followed by its floor: the same calls
made by a hand-written Python loop. The per-callback figures are the dispatch itself, timed
directly in the workload's process against that loop (interleaved, best of 7), and timed inside
the training loop (a clock pair per step around the dispatch, median step): the step ratios of
separate processes vary by more than the 10 us that 100 callbacks cost.

    python bench/bench_core.py --quick --rounds 5   # the step figures of issue 23, 5 times each

``--rounds N`` (N > 1) measures the trivial workload and the 100-callback workloads N times each,
interleaved (each in a fresh process), and reports the median of each figure with its range
over the rounds (``min..max``): on a shared machine one run's trivial ratio moves by more than
the margin to its target. The other workloads run once.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

from _mlp import mlp_cost  # bench/ is sys.path[0]: the script and its children are run by path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def pin_to_one_core() -> None:
    if os.environ.get("TRAINBUS_BENCH_PINNED") or not shutil.which("taskset"):
        return
    os.environ["TRAINBUS_BENCH_PINNED"] = "1"
    os.execvp("taskset", ["taskset", "-c", "0", sys.executable, *sys.argv])


def import_time() -> tuple[float, bool]:
    code = ("import time, sys; t=time.perf_counter(); import trainbus; "
            "import trainbus.callbacks, trainbus.train; d=time.perf_counter()-t; "
            "trainbus.train.__dir__(); ok = not any(m.startswith('tensorflow') for m in sys.modules); "
            "print(d, ok)")
    times, clean = [], True
    for _ in range(5):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
        times.append(float(out[0]))
        clean &= out[1] == "True"
    return statistics.median(times), clean


def resolve_isolation() -> bool:
    code = ("import sys, trainbus; trainbus.train.SyncMultiGPUTrainerReplicated; "
            "print(sorted(m for m in sys.modules if m.startswith('trainbus_') and m.split('.')[0] != 'trainbus_trainers_multigpu'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    return out == "[]"


def run_workload(name: str, model_kind: str, input_kind: str, n_callbacks: int, callback_kind: str,
                 defaults: bool, epochs: int, steps: int) -> tuple[float, float]:
    """Returns (median trainbus us/step, median bare us/step)."""
    import numpy as np
    import tensorflow as tf

    from trainbus.callbacks import Callback
    from trainbus.dataflow import DataFromList
    from trainbus.input_source import FeedInput, QueueInput
    from trainbus.train import ModelDesc, SimpleTrainer, TrainConfig, launch_train_with_config
    from trainbus.utils import logger

    tf1 = tf.compat.v1
    if model_kind == "trivial":
        dim_in, batch = 1, 1

        class Model(ModelDesc):
            def inputs(self):
                return [tf.TensorSpec([batch, 1], tf.float32, "x"), tf.TensorSpec([batch, 1], tf.float32, "y")]

            def build_graph(self, x, y):
                w = tf1.get_variable("w", [1, 1])
                return tf.reduce_mean(tf.square(tf.matmul(x, w) - y), name="cost")

            def optimizer(self):
                return tf1.train.GradientDescentOptimizer(0.01)

        rng = np.random.RandomState(0)
        dps = [[rng.rand(batch, 1).astype("float32"), rng.rand(batch, 1).astype("float32")] for _ in range(64)]
    else:
        dim_in, batch = 784, 64

        class Model(ModelDesc):
            def inputs(self):
                return [tf.TensorSpec([batch, 784], tf.float32, "x"), tf.TensorSpec([batch], tf.int32, "y")]

            def build_graph(self, x, y):
                cost = mlp_cost(tf, x, y)
                if defaults:
                    try:
                        from trainbus.tfutils.summary import add_moving_summary

                        add_moving_summary(cost)
                    except ImportError:
                        pass
                return cost

            def optimizer(self):
                return tf1.train.GradientDescentOptimizer(0.01)

        rng = np.random.RandomState(0)
        dps = [[rng.rand(batch, 784).astype("float32"), rng.randint(0, 10, size=batch).astype("int32")] for _ in range(16)]

    tb_times: list[float] = []
    bare_times: list[float] = []
    dispatch: list[float] = []  # us per step: the dispatcher, a hand-written loop (timed directly)
    insitu: list[float] = []  # seconds of per-step dispatch, step by step, inside the training loop

    class Timer(Callback):
        """Times trainbus epochs; after each, times a bare loop of the same length."""

        def _setup_graph(self):
            self.inputs = self.trainer.towers.training()[0].inputs

        def _before_epoch(self):
            self.t0 = time.perf_counter()

        def _after_epoch(self):
            tb_times.append((time.perf_counter() - self.t0) / steps * 1e6)

        def _before_train(self):
            # the per-step dispatch, timed inside the training loop (a clock pair per step, not
            # per callback): what the members' calls cost between real Session.run calls
            clock = time.perf_counter
            if callback_kind == "hand":
                # the floor: no run hook registered; a hand-written loop calls the do-nothing
                # before_run/after_run of n_callbacks objects around every step's Session.run
                hs = self.trainer.hooked_sess
                run = hs.run
                objs = [HandHook() for _ in range(n_callbacks)]
                befores = tuple(o.before_run for o in objs)
                afters = tuple(o.after_run for o in objs)
                ctx = object()

                def hand_run(fetches, feed_dict=None, options=None, run_metadata=None):
                    t0 = clock()
                    for f in befores:
                        if f(ctx) is not None:
                            raise AssertionError("a hand hook asked for something")
                    t1 = clock()
                    out = run(fetches, feed_dict, options, run_metadata)
                    t2 = clock()
                    for f in afters:
                        f(ctx, None)
                    insitu.append(t1 - t0 + clock() - t2)
                    return out
                hs.run = hand_run
                return

            def timed(fn):
                def call(*a, **k):
                    t0 = clock()
                    try:
                        return fn(*a, **k)
                    finally:
                        insitu.append(clock() - t0)
                return call
            hs, bus = self.trainer.hooked_sess, self.trainer._bus
            if hs._br is not None and hs._ar is not None:
                hs._br, hs._ar = timed(hs._br), timed(hs._ar)
            elif bus.trigger_step is not None:
                self.untimed_trigger_step = bus.trigger_step
                bus.trigger_step = timed(bus.trigger_step)  # read by the loop after before_train

        def _after_train(self):
            # the dispatcher alone, timed directly against a hand-written loop over the same
            # members' methods, interleaved in this process (the best of 7 rounds each)
            tr = self.trainer
            bus = tr._bus
            members = [m for m in extra if isinstance(m, (PerStep, RunHooks))]
            if not members:
                return
            n = 20000
            if bus.before_run is not None and bus.after_run is not None:
                from trainbus.callbacks.run_values import RunValuesByRequester

                br, ar, ctx, pack = bus.before_run, bus.after_run, object(), RunValuesByRequester.pack
                befores = tuple(m._before_run for m in members)
                afters = tuple(m._after_run for m in members)
                empty = pack((), (), None, None)

                def ours():
                    for _ in range(n):
                        ar(tr, ctx, pack(br(tr, ctx), (), None, None))

                def hand():
                    for _ in range(n):
                        for f in befores:
                            if f(ctx) is not None:
                                raise AssertionError("asked for something")
                        for f in afters:
                            f(ctx, empty)
            else:
                ts = self.untimed_trigger_step  # the dispatcher's function, without the in-loop clock
                fns = tuple(m._trigger_step for m in members)

                def ours():
                    for _ in range(n):
                        ts(trainer=tr)

                def hand():
                    for _ in range(n):
                        for f in fns:
                            f()
            best = {ours: float("inf"), hand: float("inf")}
            for _ in range(7):
                for fn in best:
                    t0 = time.perf_counter()
                    fn()
                    best[fn] = min(best[fn], (time.perf_counter() - t0) / n * 1e6)
            dispatch.extend([best[ours], best[hand]])

        def _trigger(self):
            sess, op, ins = self.trainer.sess, self.trainer.train_op, self.inputs
            feeds = [dict(zip(ins, dp)) for dp in dps]
            n = len(feeds)
            t0 = time.perf_counter()
            for i in range(steps):
                sess.run(op, feed_dict=feeds[i % n])
            bare_times.append((time.perf_counter() - t0) / steps * 1e6)

    class Idle(Callback):
        def _trigger(self):
            pass

    class PerStep(Callback):
        def _trigger_step(self):
            pass

    class RunHooks(Callback):  # the two per-step methods of a SessionRunHook, doing nothing
        def _before_run(self, ctx):
            return None

        def _after_run(self, ctx, values):
            pass

    class HandHook:  # what the "hand" workload calls by hand: the same two methods, not a callback
        def before_run(self, ctx):
            return None

        def after_run(self, ctx, values):
            pass

    kinds = {"idle": Idle, "step": PerStep, "runhooks": RunHooks}
    extra = [kinds[callback_kind]() for _ in range(n_callbacks)] if callback_kind in kinds else []
    ds = DataFromList(dps, shuffle=False)
    data = FeedInput(ds) if input_kind == "feed" else QueueInput(ds)
    tmp = tempfile.mkdtemp(prefix="trainbus-bench-")
    logger.set_logger_dir(tmp, action="k")
    logger.setLevel("WARNING")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cfg = TrainConfig(model=Model(), data=data, callbacks=[Timer(), *extra],
                          extra_callbacks=None if defaults else [], monitors=None if defaults else [],
                          max_epoch=epochs, steps_per_epoch=steps)
        launch_train_with_config(cfg, SimpleTrainer())
    shutil.rmtree(tmp, ignore_errors=True)
    # the first epoch warms up caches on both sides
    print(f"DISPATCH {' '.join(map(str, dispatch or [0.0, 0.0]))}")
    skip = len(insitu) // (epochs or 1)  # the first epoch warms up caches
    print(f"INSITU {statistics.median(insitu[skip:]) * 1e6 if insitu[skip:] else 0.0}")
    return statistics.median(tb_times[1:]), statistics.median(bare_times[1:])


def child(args: argparse.Namespace) -> None:
    tb, bare = run_workload(args.child, args.model, args.input, args.ncb, args.cbkind, args.defaults, args.epochs, args.steps)
    print(f"RESULT {tb} {bare}")


def measure(name: str, model: str, input_kind: str = "feed", ncb: int = 0, cbkind: str = "idle",
            defaults: bool = False, epochs: int = 9, steps: int = 2000) -> tuple[float, float]:
    # each workload in a fresh process: no graph or thread left over from the previous one
    cmd = [sys.executable, __file__, "--child", name, "--model", model, "--input", input_kind, "--ncb", str(ncb),
           "--cbkind", cbkind, "--epochs", str(epochs), "--steps", str(steps)] + (["--defaults"] if defaults else [])
    out = subprocess.run(cmd, capture_output=True, text=True)
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT")]
    if not line:
        raise RuntimeError(f"workload {name} failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    tb, bare = map(float, line[0].split()[1:])
    lines = out.stdout.splitlines()
    DISPATCH[name] = tuple(map(float, [x for x in lines if x.startswith("DISPATCH")][0].split()[1:3]))
    INSITU[name] = float([x for x in lines if x.startswith("INSITU")][0].split()[1])
    return tb, bare


#: workload -> microseconds of one trigger_step dispatch over all its callbacks (timed directly)
DISPATCH: dict[str, tuple[float, float]] = {}
#: workload -> microseconds per step of its per-step dispatch, timed inside the training loop
#: (median step; for "hand100", the hand-written loop's)
INSITU: dict[str, float] = {}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--child")
    p.add_argument("--model", default="trivial")
    p.add_argument("--input", default="feed")
    p.add_argument("--ncb", type=int, default=0)
    p.add_argument("--cbkind", default="idle")
    p.add_argument("--defaults", action="store_true")
    p.add_argument("--epochs", type=int, default=9)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=1, help="measure the trivial and 100-callback workloads N times")
    args = p.parse_args()
    if args.child:
        child(args)
        return
    pin_to_one_core()
    ep = 5 if args.quick else 9
    rows = []
    imp, clean = import_time()
    rows.append(("import trainbus (+callbacks, train)", f"{imp * 1000:.0f} ms", "< 300 ms", "TF not imported" if clean else "TF IMPORTED"))
    rows.append(("resolving a name imports no other plugin", "yes" if resolve_isolation() else "NO", "yes", ""))
    rounds = max(1, args.rounds)
    runs = {name: [] for name in ("trivial", "step100", "run100", "hand100")}
    for _ in range(rounds):  # interleaved: noise of the moment hits every workload alike
        runs["trivial"].append((*measure("trivial", "trivial", epochs=ep, steps=2000), 0.0, 0.0, 0.0))
        for name, kind in (("step100", "step"), ("run100", "runhooks"), ("hand100", "hand")):
            tb, bare = measure(name, "trivial", ncb=100, cbkind=kind, epochs=ep, steps=2000)
            runs[name].append((tb, bare, *DISPATCH[name], INSITU[name]))
    # per workload: the median over the rounds of (tb, bare, direct ours, direct hand, in-loop)
    med = {name: tuple(statistics.median(r[i] for r in rs) for i in range(5)) for name, rs in runs.items()}
    DISPATCH.update({name: m[2:4] for name, m in med.items()})
    INSITU.update({name: m[4] for name, m in med.items()})

    def spread(name: str, value) -> str:  # " (min..max over N rounds)" of one figure
        if rounds == 1:
            return ""
        vals = [value(r) for r in runs[name]]
        return f" ({min(vals):.3f}..{max(vals):.3f} over {rounds} rounds)"

    tb0, bare0 = med["trivial"][:2]
    trivial_ratio = statistics.median(r[0] / r[1] for r in runs["trivial"])
    rows.append(("trivial 1x1 model, batch 1, no user callbacks", f"{trivial_ratio:.3f}x", "<= 0.25x",
                 f"{tb0:.1f} vs {bare0:.1f} us/step" + spread("trivial", lambda r: r[0] / r[1])))
    tb1, bare1 = measure("idle10", "trivial", ncb=10, cbkind="idle", epochs=ep, steps=2000)
    per_idle = ((tb1 / bare1) - trivial_ratio) * bare0 / 10
    rows.append(("per user callback overriding no per-step method", f"{per_idle:+.2f} us/step", "+0 us",
                 f"10 callbacks: {tb1:.1f} vs {bare1:.1f}"))
    tb2, bare2 = measure("step10", "trivial", ncb=10, cbkind="step", epochs=ep, steps=2000)
    per_step = ((tb2 / bare2) - trivial_ratio) * bare0 / 10
    rows.append(("per user callback overriding a per-step method", f"{per_step:+.2f} us/step", "<= +0.5 us",
                 f"10 callbacks: {tb2:.1f} vs {bare2:.1f}"))
    rows.append(("  same, trigger_step dispatch timed directly", f"{DISPATCH['step10'][0] / 10:+.2f} us/step", "<= +0.5 us",
                 f"{DISPATCH['step10'][0]:.2f} us for 10 callbacks; idle ones are not dispatched"))
    tb6, bare6 = med["step100"][:2]
    tb7, bare7 = med["run100"][:2]
    tb8, bare8 = med["hand100"][:2]
    ours_s, hand_s = DISPATCH["step100"]
    rows.append(("per callback, 100 overriding _trigger_step: dispatch timed directly", f"{ours_s / 100:+.3f} us/step",
                 "<= +0.05 us", f"a hand-written loop over the same methods: {hand_s / 100:.3f} us"
                 + spread("step100", lambda r: r[2] / 100)))
    rows.append(("  same, timed in the training loop", f"{INSITU['step100'] / 100:+.3f} us/step", "",
                 f"step ratio {tb6 / bare6:.3f}x ({tb6:.1f} vs {bare6:.1f} us; 0 callbacks: {trivial_ratio:.3f}x)"))
    ours_r, hand_r = DISPATCH["run100"]
    rows.append(("per callback, 100 overriding _before_run/_after_run: dispatch timed directly", f"{ours_r / 100:+.3f} us/step",
                 "<= +0.10 us", f"a hand-written loop over the same methods: {hand_r / 100:.3f} us"
                 + spread("run100", lambda r: r[2] / 100)))
    rows.append(("  same, timed in the training loop", f"{INSITU['run100'] / 100:+.3f} us/step", "",
                 f"a hand-written loop there (hand100): {INSITU['hand100'] / 100:.3f} us; step ratio {tb7 / bare7:.3f}x "
                 f"(hand100 {tb8 / bare8:.3f}x)"))
    tb3, bare3 = measure("mlp-feed", "mlp", epochs=ep, steps=200)
    rows.append(("MLP 784-256-256-10, batch 64, FeedInput", f"{tb3 / bare3:.3f}x", "<= 1.03x", f"{tb3:.0f} vs {bare3:.0f} us/step"))
    tb4, bare4 = measure("mlp-queue", "mlp", input_kind="queue", epochs=ep, steps=200)
    rows.append(("same, QueueInput", f"{tb4 / bare4:.3f}x", "<= 1.05x", f"{tb4:.0f} vs {bare4:.0f} us/step"))
    tb5, bare5 = measure("mlp-defaults", "mlp", defaults=True, epochs=ep, steps=200)
    rows.append(("MLP with the default callbacks and monitors", f"{tb5 / bare5:.3f}x", "<= 1.15x", f"{tb5:.0f} vs {bare5:.0f} us/step"))
    w = max(len(r[0]) for r in rows)
    print(f"\n{'workload':<{w}}  {'measured':>14}  {'target':>10}  detail")
    for r in rows:
        print(f"{r[0]:<{w}}  {r[1]:>14}  {r[2]:>10}  {r[3]}")


if __name__ == "__main__":
    main()
