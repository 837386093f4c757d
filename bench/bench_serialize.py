#!/usr/bin/env python
"""``LMDBSerializer.load`` of 10k records: trainbus against tensorpack, same machine, same process.

Each library saves the same dataflow with its own ``LMDBSerializer.save`` (tensorpack with its default
serializer), then one pass of ``LMDBSerializer.load(path, shuffle=...)`` is timed, alternating the two
libraries. The fastest pass of each is reported (the machine's other load only ever adds time), with the
ratio tensorpack time / trainbus time; the ratio of the medians follows in brackets.

    python bench/bench_serialize.py --tensorpack-src /path/to/tensorpack-checkout   # a checkout's top directory
    python bench/bench_serialize.py                     # trainbus alone (no tensorpack source given)

tensorpack is imported from its source tree without running its package ``__init__`` (which needs
TensorFlow 1 APIs); ``msgpack_numpy`` is replaced by an empty module when absent (tensorpack's default
serializer is pickle, which does not use it). Target: ratio >= 1.3.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import types

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def import_tensorpack(src: str):
    pkg_dir = os.path.join(src, "tensorpack")
    if not os.path.isdir(os.path.join(pkg_dir, "dataflow")):
        raise SystemExit(f"--tensorpack-src {src}: no tensorpack/dataflow in it; give the top of a tensorpack checkout")
    pkg = types.ModuleType("tensorpack")
    pkg.__path__ = [pkg_dir]
    sys.modules["tensorpack"] = pkg
    try:
        import msgpack_numpy  # noqa: F401
    except ImportError:
        stub = types.ModuleType("msgpack_numpy")
        stub.patch = lambda: None
        sys.modules["msgpack_numpy"] = stub
    import logging

    from tensorpack.dataflow import DataFromList as TPDataFromList
    from tensorpack.dataflow.serialize import LMDBSerializer as TPLMDBSerializer
    from tensorpack.utils import logger as tplogger

    tplogger._logger.setLevel(logging.WARNING)
    return TPDataFromList, TPLMDBSerializer


def make_points(n: int, kind: str):
    import numpy as np

    rng = np.random.RandomState(0)
    if kind == "image":  # a CIFAR-sized image and its label
        return [[rng.randint(0, 256, size=(32, 32, 3)).astype(np.uint8), int(rng.randint(10))] for _ in range(n)]
    # small feature vectors: per-record overhead dominates
    return [[rng.rand(16).astype(np.float32), int(rng.randint(10)), float(rng.rand())] for _ in range(n)]


def time_pass(df) -> float:
    t = time.perf_counter()
    n = 0
    for _ in df:
        n += 1
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tensorpack-src", default=os.environ.get("TENSORPACK_SRC"),
                    help="top directory of a tensorpack checkout (or $TENSORPACK_SRC)")
    ap.add_argument("-n", type=int, default=10000, help="records (default 10000)")
    ap.add_argument("--passes", type=int, default=9)
    args = ap.parse_args()

    from trainbus.dataflow import DataFromList, LMDBSerializer
    from trainbus.utils import logger

    logger.setLevel("WARNING")
    tp = import_tensorpack(args.tensorpack_src) if args.tensorpack_src else None
    tmp = tempfile.mkdtemp(prefix="bench_serialize_")
    try:
        print(f"LMDBSerializer.load, {args.n} records, fastest of {args.passes} passes")
        print(f"{'datapoint':<10} {'shuffle':<8} {'trainbus':>10} {'tensorpack':>11} {'ratio':>7} {'(medians)':>10}")
        for kind in ("image", "small"):
            pts = make_points(args.n, kind)
            tb_path = os.path.join(tmp, f"tb_{kind}.lmdb")
            LMDBSerializer.save(DataFromList(pts, shuffle=False), tb_path)
            if tp:
                tp_path = os.path.join(tmp, f"tp_{kind}.lmdb")
                tp[1].save(tp[0](pts, shuffle=False), tp_path)
            for shuffle in (False, True):
                tb_df = LMDBSerializer.load(tb_path, shuffle=shuffle)
                tb_df.reset_state()
                tp_df = None
                if tp:
                    tp_df = tp[1].load(tp_path, shuffle=shuffle)
                    tp_df.reset_state()
                tb_times, tp_times = [], []
                for _ in range(args.passes):
                    tb_times.append(time_pass(tb_df))
                    if tp_df is not None:
                        tp_times.append(time_pass(tp_df))
                tb_t = min(tb_times)
                line = f"{kind:<10} {str(shuffle):<8} {tb_t * 1e3:>8.1f}ms"
                if tp_times:
                    tp_t = min(tp_times)
                    med = statistics.median(tp_times) / statistics.median(tb_times)
                    line += f" {tp_t * 1e3:>9.1f}ms {tp_t / tb_t:>6.2f}x {f'({med:.2f}x)':>10}"
                print(line, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
