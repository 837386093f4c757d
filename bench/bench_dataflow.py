#!/usr/bin/env python
"""Throughput of DataFlow pipelines: trainbus.dataflow against tensorpack.dataflow, same pipelines,
same run, and the trainer's steps/s fed by ``QueueInput(MultiProcessRunnerZMQ(...))`` vs ``FeedInput``.

Every pipeline is built from the same code against either library (``D`` below is
``trainbus.dataflow`` or ``tensorpack.dataflow``) and timed for a fixed wall-clock window after a
warm-up; the figure is output datapoints per second. The tensorpack side runs in this interpreter
when ``tensorpack`` is importable here, otherwise in one child interpreter, the one given by
``--tensorpack-python``, started once and asked for one window at a time. The two sides' windows
alternate, so that machine noise hits both alike.

Default mode: each side runs ``--repeats`` windows per pipeline; the best window of each side counts
and the ratio is best against best.

Many-round mode, ``--rounds N``: N pairs of windows per pipeline, one trainbus window and one
tensorpack window right after each other (which side goes first alternates from pair to pair). The
ratio is taken within each pair, where both sides saw about the same machine, and the table gives
the median of the N ratios, their interquartile range and min-max, the best window of each side, and
the 1-minute load average seen during the rounds; the line under each pipeline lists every pair's
ratio. On a noisy machine, where one best-of-3 ratio can move by a third from run to run, the median
of 15 or more pairs settles within a few percent. This mode skips the trainer part.

    python bench/bench_dataflow.py --tensorpack-python /path/to/venv-with-tensorpack/bin/python
    python bench/bench_dataflow.py --quick          # shorter windows, no trainer part
    python bench/bench_dataflow.py --match imgaug --repeats 7   # some pipelines, best of 7 runs a side
    python bench/bench_dataflow.py --tensorpack-python ... --match 'imgaug|ZMQ hop|LMDB' --rounds 15

Targets: >= 1.0x tensorpack on every pipeline, >= 1.3x where the work is serialization or the ZMQ hop.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # same BLAS threading on both sides
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

# -- the pipelines, written once against a dataflow namespace D ----------------------------------


def cpu_bound(dp):
    """About 1 ms of pure-Python work per datapoint (holds the GIL)."""
    acc = 0
    for i in range(6000):
        acc += i * i % 7
    return [dp[0], acc]


def io_work(dp):
    """Work that releases the GIL, like reading a file: 0.5 ms of waiting, then a small array op."""
    time.sleep(0.0005)
    return [dp[0] + 1.0, dp[1]]


def scale(dp):
    return [dp[0] * 2.0, dp[1]]


def p_list_map_batch(D, tmp):
    rows = [[np.random.rand(28, 28).astype("float32"), i % 10] for i in range(10000)]
    ds = D.DataFromList(rows, shuffle=True)
    ds = D.MapData(ds, scale)
    return D.BatchData(ds, 64), 64


def p_zmq_cpu(D, tmp):
    rows = [[np.random.rand(16).astype("float32"), i] for i in range(2000)]
    ds = D.MapData(D.DataFromList(rows, shuffle=True), cpu_bound)
    return D.MultiProcessRunnerZMQ(ds, 2), 1


def p_zmq_hop(D, tmp):
    """Serialization and the ZMQ hop only: 224x224x3 uint8 images, no work."""
    img = np.random.randint(0, 255, (224, 224, 3), dtype="uint8")
    ds = D.DataFromList([[img, i] for i in range(256)], shuffle=False)
    return D.MultiProcessRunnerZMQ(ds, 1), 1


def p_thread_map(D, tmp):
    rows = [[np.random.rand(32, 32).astype("float32"), i] for i in range(2000)]
    ds = D.DataFromList(rows, shuffle=True)
    return D.MultiThreadMapData(ds, 4, io_work, buffer_size=64), 1


def p_process_map(D, tmp):
    rows = [[np.random.rand(16).astype("float32"), i] for i in range(2000)]
    ds = D.DataFromList(rows, shuffle=True)
    return D.MultiProcessMapData(ds, 2, cpu_bound, buffer_size=64), 1


def _imgaug(D, size, crop):
    imgaug = D.imgaug
    imgs = [np.random.randint(0, 255, (size, size, 3), dtype="uint8") for _ in range(64)]
    ds = D.DataFromList([[im, i] for i, im in enumerate(imgs)], shuffle=True)
    augs = [imgaug.Flip(horiz=True), imgaug.RandomCrop((crop, crop)), imgaug.Resize((size, size))]
    return D.AugmentImageComponent(ds, augs), 1


def p_imgaug_32(D, tmp):
    return _imgaug(D, 32, 28)


def p_imgaug_224(D, tmp):
    return _imgaug(D, 224, 200)


def p_lmdb_load(D, tmp):
    path = os.path.join(tmp, "bench.lmdb")
    if not os.path.exists(path):
        rows = [[np.random.rand(64).astype("float32"), i] for i in range(10000)]
        D.LMDBSerializer.save(D.DataFromList(rows, shuffle=False), path)
    return D.LMDBSerializer.load(path, shuffle=False), 1


PIPELINES = {
    "DataFromList -> MapData -> BatchData(64)": p_list_map_batch,
    "MultiProcessRunnerZMQ(CPU-bound map, 2)": p_zmq_cpu,
    "MultiProcessRunnerZMQ(224x224x3 uint8, 1): ZMQ hop": p_zmq_hop,
    "MultiThreadMapData(I/O-like map, 4)": p_thread_map,
    "MultiProcessMapData(CPU-bound map, 2)": p_process_map,
    "imgaug flip+crop+resize 32x32": p_imgaug_32,
    "imgaug flip+crop+resize 224x224": p_imgaug_224,
    "LMDBSerializer.load, 10k records": p_lmdb_load,
}
#: pipelines whose work is serialization or the ZMQ hop (target 1.3x)
HOP_BOUND = {"MultiProcessRunnerZMQ(224x224x3 uint8, 1): ZMQ hop", "LMDBSerializer.load, 10k records"}


def measure(D, name, seconds, tmp):
    """Output datapoints (times the batch size for batches) per second of pipeline ``name``."""
    np.random.seed(0)
    try:
        ds, per_dp = PIPELINES[name](D, tmp)
    except AttributeError as e:  # a name this library version lacks
        return {"error": f"{type(e).__name__}: {e}"}
    outer = D.RepeatedData(ds, -1)  # a runner's pass ends after len(ds) datapoints: keep going
    outer.reset_state()
    it = iter(outer)
    for _ in range(20):
        next(it)
    n = 0
    start = time.perf_counter()
    end = start + seconds
    while True:
        next(it)
        n += 1
        if n % 16 == 0 and time.perf_counter() > end:
            break
    elapsed = time.perf_counter() - start
    close = getattr(ds, "close", None)
    if close is not None:
        close()
    # A library that stops its workers when the dataflow is collected (tensorpack's __del__) stops them now, not
    # during a later window: the tensorpack child and this process measure one window after another.
    del it, outer, ds
    gc.collect()
    return {"dps": n * per_dp / elapsed}


def load_library(side):
    if side == "tensorpack":
        import tensorpack.dataflow as D  # noqa: N812
        from tensorpack.utils import logger

        logger.setLevel("WARN")
        return D
    import trainbus.dataflow as D  # noqa: N812
    from trainbus.utils import logger

    logger.setLevel("WARN")
    return D


@functools.lru_cache(maxsize=None)
def tensorpack_importable():
    try:
        import tensorpack.dataflow  # noqa: F401
    except Exception:  # noqa: BLE001 - not installed or broken
        return False
    return True


class TensorpackChild:
    """The tensorpack side in another interpreter, started once and kept for the whole run: it reads one
    request (a JSON line: pipeline and window) at a time from its stdin and answers with a ``RESULT`` line.
    Its answers are read with ``select`` (no reader thread: the pipelines fork worker processes here)."""

    def __init__(self, python, tmp):
        self._stderr = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: TensorFlow's logging can't block it
        cmd = [python, os.path.abspath(__file__), "--side", "tensorpack", "--serve", "--tmp", tmp]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr)
        self._buf = b""

    def _readline(self, deadline):
        """The child's next output line; None at its end of output, "" when ``deadline`` passes first."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return ""
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode(errors="replace") + "\n"

    def measure(self, name, seconds, repeats=1, timeout=900):
        if self.proc.poll() is not None:
            return {"error": f"the tensorpack child exited: {self._stderr_tail()}"}
        self.proc.stdin.write((json.dumps({"name": name, "seconds": seconds, "repeats": repeats}) + "\n").encode())
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while True:
            line = self._readline(deadline)
            if line is None:
                return {"error": f"the tensorpack run failed: {self._stderr_tail()}"}
            if not line:
                return {"error": f"the tensorpack run of {name!r} took over {timeout} s"}
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])

    def _stderr_tail(self):
        self._stderr.seek(0)
        return self._stderr.read().strip().splitlines()[-1:]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._stderr.close()


def serve(side, tmp):
    """The child's loop: one window per request line on stdin, until stdin closes."""
    for line in sys.stdin:
        req = json.loads(line)
        r = side_measure(side, req["name"], req["seconds"], req["repeats"], tmp)
        if r is None:
            r = {"error": f"tensorpack is not importable in {sys.executable}"}
        print("RESULT " + json.dumps(r), flush=True)


def side_measure(side, name, seconds, repeats, tmp, tp_child=None):
    """The best of ``repeats`` windows of ``name`` on ``side`` (in ``tp_child`` for a tensorpack side that is
    not importable here); None when there is no tensorpack to run."""
    if side == "tensorpack" and not tensorpack_importable():
        return None if tp_child is None else tp_child.measure(name, seconds, repeats)
    D = load_library(side)
    best = None
    for _ in range(repeats):
        r = measure(D, name, seconds, tmp)
        if "error" in r:
            return r
        best = r if best is None or r["dps"] > best["dps"] else best
    return best


# -- the trainer's steps/s ----------------------------------------------------------------------

def trainer_steps_per_second(steps):
    """Steps/s of an MLP (784-256-10, batch 64) fed by FeedInput vs QueueInput(MultiProcessRunnerZMQ)."""
    import tensorflow as tf

    from trainbus.callbacks import Callback
    from trainbus.dataflow import BatchData, FakeData, MapData, MultiProcessRunnerZMQ
    from trainbus.input_source import FeedInput, QueueInput
    from trainbus.train import ModelDesc, SimpleTrainer, TrainConfig, launch_train_with_config

    tf1 = tf.compat.v1

    class MLP(ModelDesc):
        def inputs(self):
            return [tf.TensorSpec([None, 784], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "y")]

        def build_graph(self, x, y):
            w1 = tf1.get_variable("w1", [784, 256])
            w2 = tf1.get_variable("w2", [256, 10])
            logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1)), w2)
            return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))

        def optimizer(self):
            return tf1.train.GradientDescentOptimizer(0.01)

    class Clock(Callback):
        def _before_epoch(self):
            self.t0 = time.perf_counter()

        def _after_epoch(self):
            self.dt = time.perf_counter() - self.t0

    def labels(dp):
        return [dp[0], int(dp[1].ravel()[0] * 10) % 10]

    def make_df():
        return BatchData(MapData(FakeData([[784], [1]], size=64 * steps, random=True), labels), 64)

    res = {}
    for name, make_input in (("FeedInput", lambda: FeedInput(make_df())),
                             ("QueueInput(MultiProcessRunnerZMQ(..., 1))",
                              lambda: QueueInput(MultiProcessRunnerZMQ(make_df(), 1)))):
        tf1.reset_default_graph()
        clock = Clock()
        cfg = TrainConfig(model=MLP(), data=make_input(), max_epoch=2, steps_per_epoch=steps, callbacks=[clock],
                          monitors=[])
        launch_train_with_config(cfg, SimpleTrainer())
        res[name] = steps / clock.dt  # the second epoch: warm
    return res


def _best(a, b):
    """The better of two window results (a result with an error loses to one with a figure)."""
    if a is None or "dps" not in a:
        return b
    return b if b is not None and "dps" in b and b["dps"] > a["dps"] else a


def _dps(r, width):
    return f"{r['dps']:{width}.0f}" if r and "dps" in r else f"{'n/a':>{width}s}"


def _print_errors(results):
    for label, r in results:
        if r and "error" in r:
            print(f"    ({label}: {r['error']})")


def run_best_of(names, args, tmp, tp_child, have_tp):
    """The default mode: ``--repeats`` alternating windows a side; the best window of each side counts."""
    print(f"{'pipeline':52s} {'trainbus dp/s':>14s} {'tensorpack dp/s':>16s} {'ratio':>7s} {'target':>7s}")
    for name in names:
        tb = tp = None
        for _ in range(args.repeats):  # alternate the sides, so that machine noise hits both alike
            tb = _best(tb, side_measure("trainbus", name, args.seconds, 1, os.path.join(tmp, "trainbus")))
            if have_tp:
                tp = _best(tp, side_measure("tensorpack", name, args.seconds, 1, os.path.join(tmp, "tensorpack"),
                                            tp_child))
        ratio = tb["dps"] / tp["dps"] if tb and tp and "dps" in tb and "dps" in tp else None
        r_s = f"{ratio:6.2f}x" if ratio else f"{'-':>7s}"
        print(f"{name:52s} {_dps(tb, 14)} {_dps(tp, 16)} {r_s} {target_of(name):6.1f}x", flush=True)
        _print_errors((("trainbus", tb), ("tensorpack", tp)))


def run_rounds(names, args, tmp, tp_child):
    """``--rounds N``: N pairs of one trainbus window and one tensorpack window (the pair's order alternates
    from round to round), the ratio taken within each pair; reports the median ratio and its spread."""
    print(f"{'pipeline':52s} {'trainbus best':>13s} {'tensorpack best':>15s} {'median':>7s} {'IQR':>11s} "
          f"{'min-max':>11s} {'target':>6s} {'load 1m':>9s}")
    for name in names:
        ratios, tb, tp, loads, err = [], None, None, [os.getloadavg()[0]], None
        for i in range(args.rounds):
            pair = {}
            for side in (("trainbus", "tensorpack") if i % 2 == 0 else ("tensorpack", "trainbus")):
                pair[side] = side_measure(side, name, args.seconds, 1, os.path.join(tmp, side), tp_child)
            loads.append(os.getloadavg()[0])
            tb, tp = _best(tb, pair["trainbus"]), _best(tp, pair["tensorpack"])
            if any("error" in r for r in pair.values()):
                err = pair
                break
            ratios.append(pair["trainbus"]["dps"] / pair["tensorpack"]["dps"])
        if ratios:
            q1, med, q3 = np.percentile(ratios, [25, 50, 75])
            stats = f"{med:6.2f}x {q1:5.2f}-{q3:4.2f}x {min(ratios):5.2f}-{max(ratios):4.2f}x"
        else:
            stats = f"{'-':>7s} {'-':>11s} {'-':>11s}"
        print(f"{name:52s} {_dps(tb, 13)} {_dps(tp, 15)} {stats} {target_of(name):5.1f}x "
              f"{min(loads):4.1f}-{max(loads):<4.1f}", flush=True)
        if ratios:
            print(f"    {len(ratios)} pairs, ratios: {' '.join(f'{r:.2f}' for r in ratios)}")
        if err:
            _print_errors(err.items())


def target_of(name):
    return 1.3 if name in HOP_BOUND else 1.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tensorpack-python", default=None, help="an interpreter where `import tensorpack` works")
    ap.add_argument("--seconds", type=float, default=2.0, help="timed window per run")
    ap.add_argument("--repeats", type=int, default=3, help="runs per side; the best counts")
    ap.add_argument("--rounds", type=int, default=0,
                    help="N interleaved trainbus/tensorpack window pairs per pipeline; reports the median of the "
                         "per-pair ratios and their spread (replaces --repeats; no trainer part)")
    ap.add_argument("--quick", action="store_true", help="1 s windows, one run, no trainer part")
    ap.add_argument("--match", default=None,
                    help="only the pipelines whose name contains this text (or one of several texts: 'a|b')")
    ap.add_argument("--only", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--side", default="trainbus", choices=["trainbus", "tensorpack"], help=argparse.SUPPRESS)
    ap.add_argument("--tmp", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.repeats = 1.0, 1

    if args.only or args.serve:  # a child run of one side
        tmp = os.path.join(args.tmp or tempfile.mkdtemp(), args.side)
        os.makedirs(tmp, exist_ok=True)
        if args.serve:
            serve(args.side, tmp)
        else:
            print("RESULT " + json.dumps(side_measure(args.side, args.only, args.seconds, args.repeats, tmp)),
                  flush=True)
        return

    wanted = [w.strip().lower() for w in args.match.split("|")] if args.match else [""]
    names = [n for n in PIPELINES if any(w in n.lower() for w in wanted)]
    tmp = tempfile.mkdtemp(prefix="bench_dataflow_")
    tp_child = None
    try:
        for side in ("trainbus", "tensorpack"):
            os.makedirs(os.path.join(tmp, side), exist_ok=True)
        have_tp = tensorpack_importable() or bool(args.tensorpack_python)
        if have_tp and not tensorpack_importable():
            tp_child = TensorpackChild(args.tensorpack_python, tmp)
        if args.rounds > 0 and not have_tp:
            ap.error("--rounds compares with tensorpack: pass --tensorpack-python (or run where it is importable)")
        if args.rounds > 0:
            run_rounds(names, args, tmp, tp_child)
        else:
            run_best_of(names, args, tmp, tp_child, have_tp)
        if not have_tp:
            print("(tensorpack is not importable here: pass --tensorpack-python to compare)")
        if not args.quick and args.rounds <= 0:
            print()
            sps = trainer_steps_per_second(300)
            feed = sps["FeedInput"]
            for k, v in sps.items():
                print(f"trainer, MLP 784-256-10 batch 64, {k:42s} {v:8.0f} steps/s  {v / feed:5.2f}x FeedInput")
    finally:
        if tp_child is not None:
            tp_child.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
