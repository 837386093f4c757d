"""``seed_everything(seed)``: one seed for every random number generator a training draws from.

It seeds Python's ``random``, NumPy's global generator, the DataFlow RNGs (every later
``trainbus.utils.get_rng`` and ``trainbus.dataflow.get_rng``, so ``RNGDataFlow.reset_state``
gives each DataFlow ``RandomState(seed)``), the graph-level seed of the default graph
(``tf.compat.v1.set_random_seed``: the initializers and random ops built after it), and turns
on TensorFlow's op determinism (``tf.config.experimental.enable_op_determinism``: every op
runs a deterministic kernel or raises). With single-process input, two runs with the same seed
then train the same weights and write the same statistics on CPU, bit for bit.

What stays non-deterministic: the order in which several worker processes or threads deliver
datapoints (``MultiProcessRunner``, ``MultiProcessMapData``, ``MultiThreadMapData``: whichever
finishes first comes first), wall-clock based values (timings, the ETA), and GPU kernels that
TensorFlow has no deterministic version of (op determinism makes those raise instead).

``TrainConfig(seed=N)`` and ``[train] seed = N`` in a run file call it when training starts,
with the trainer's graph as the default graph.
"""

from __future__ import annotations

import random
from typing import Any

__all__ = ["seed_everything", "check_seed"]


def check_seed(seed: Any, where: str = "seed") -> int | None:
    """``seed`` if it is None or an integer in ``[0, 2**31 - 1]``; raises ``ValueError`` saying so."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 2 ** 31 - 1:
        raise ValueError(f"{where} must be an integer from 0 to 2**31 - 1 (or None for no seed), got {seed!r}")
    return seed


def seed_everything(seed: int, deterministic_ops: bool = True, graph: Any = None) -> int:
    """Seed Python, NumPy, the DataFlow RNGs and TensorFlow's graph-level seed (of ``graph``, default
    the default graph) with ``seed``, and (``deterministic_ops``) turn on TensorFlow op
    determinism. Returns the seed."""
    import numpy as np

    seed = check_seed(seed)
    if seed is None:
        raise ValueError("seed_everything needs an integer seed, got None")
    random.seed(seed)
    np.random.seed(seed)
    from trainbus import dataflow as _dataflow
    from trainbus.utils import utils as _utils

    _utils.fix_rng_seed(seed)
    _dataflow._RNG_SEED = seed
    import tensorflow as tf

    tf1 = tf.compat.v1
    if graph is None:
        tf1.set_random_seed(seed)
    else:
        with graph.as_default():
            tf1.set_random_seed(seed)
    if deterministic_ops:
        tf.config.experimental.enable_op_determinism()
    from trainbus.utils import logger

    logger.info(f"Seeded Python, NumPy, the DataFlow RNGs and TensorFlow's graph with {seed}"
                + ("; TensorFlow op determinism is on." if deterministic_ops else "."))
    return seed
