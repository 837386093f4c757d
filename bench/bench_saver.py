#!/usr/bin/env python
"""Building a ``Saver`` before the first step: trainbus's ``make_saver`` against TensorFlow's
``tf.compat.v1.train.Saver``, same machine, same process, the same graph.

``ModelSaver`` builds a Saver as training starts, and a restore at startup (``SaverRestore``,
``AutoResumeTrainConfig``) builds another. Each round makes a new graph with an MLP of
``--layers`` dense layers (two variables each, plus their Momentum slots with ``--momentum``,
plus the global step), then times building one Saver in it, alternating the two ways. Prints
each way's median and fastest build, and the ratio TensorFlow's / trainbus's (target >= 2 at
the default size); checks first that the two graphs are the same, node for node.

    python bench/bench_saver.py                  # 100 layers: 201 variables
    python bench/bench_saver.py --layers 160 --momentum --rounds 9
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def build(tf, make_saver, layers: int, momentum: bool, fast: bool):
    """(seconds to build the Saver, the graph)."""
    tf1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        h = tf1.placeholder(tf.float32, [None, 32])
        for i in range(layers):
            with tf1.variable_scope(f"fc{i}"):
                w = tf1.get_variable("W", [32, 32])
                b = tf1.get_variable("b", [32], initializer=tf1.zeros_initializer())
            h = tf.nn.relu(tf.matmul(h, w) + b)
        cost = tf.reduce_mean(h)
        step = tf1.train.get_or_create_global_step()
        if momentum:
            tf1.train.MomentumOptimizer(0.1, 0.9).minimize(cost, global_step=step)
        start = time.perf_counter()
        (make_saver if fast else tf1.train.Saver)(max_to_keep=5, write_version=tf1.train.SaverDef.V2,
                                                  save_relative_paths=True)
        return time.perf_counter() - start, g


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--layers", type=int, default=100)
    p.add_argument("--momentum", action="store_true", help="add Momentum's slot variables (twice the variables)")
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()

    import tensorflow as tf

    from trainbus.tfutils import _saver_graph
    from trainbus.tfutils.varmanip import make_saver

    (_, slow_graph), (_, fast_graph) = (build(tf, make_saver, args.layers, args.momentum, fast) for fast in (False, True))
    if slow_graph.as_graph_def().node != fast_graph.as_graph_def().node:
        raise SystemExit("the two Savers' graphs differ: the benchmark compares nothing")
    if _saver_graph.ImportingSaverBuilder.counts["imported"] != 1:
        raise SystemExit("trainbus's Saver did not import its restore ops for this graph")
    n_vars = len(fast_graph.get_collection("variables"))
    times: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(args.rounds):
        for fast in (False, True):
            times[fast].append(build(tf, make_saver, args.layers, args.momentum, fast)[0])
    slow, fast = statistics.median(times[False]), statistics.median(times[True])
    print(f"Saver over {n_vars} variables, {args.rounds} rounds (median, fastest):")
    print(f"  tf.compat.v1.train.Saver   {slow * 1000:8.1f} ms {min(times[False]) * 1000:8.1f} ms")
    print(f"  trainbus make_saver        {fast * 1000:8.1f} ms {min(times[True]) * 1000:8.1f} ms")
    print(f"  ratio TensorFlow/trainbus  {slow / fast:8.2f}x (fastest: {min(times[False]) / min(times[True]):.2f}x; "
          f"{(slow - fast) * 1000:.0f} ms less per Saver)")


if __name__ == "__main__":
    main()
