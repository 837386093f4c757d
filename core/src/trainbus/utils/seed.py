"""``seed_everything(seed)``: one seed for every random number generator a training draws from.

It seeds Python's ``random``, NumPy's global generator, the DataFlow RNGs (every later
``trainbus.utils.get_rng`` and ``trainbus.dataflow.get_rng``, so ``RNGDataFlow.reset_state``
gives each DataFlow ``RandomState(seed)``), the graph-level seed of the default graph
(``tf.compat.v1.set_random_seed``: the initializers and random ops built after it), and turns
on TensorFlow's op determinism (``tf.config.experimental.enable_op_determinism``: every op
runs a deterministic kernel or raises). With single-process input, two runs with the same seed
then train the same weights and write the same statistics on CPU, bit for bit.

Each worker process of a multiprocess dataflow gets a seed of its own, derived from the run's
seed, the dataflow (the how-many-th started since the run was seeded) and the worker's number
(:func:`worker_seed`): the workers draw different numbers from each other, and each the same
numbers in every run. Without a run seed, workers seed as tensorpack's do (process id and time).

What stays non-deterministic: the order in which several worker processes or threads deliver
datapoints (``MultiProcessRunner``, ``MultiProcessMapData``, ``MultiThreadMapData``: whichever
finishes first comes first), wall-clock based values (timings, the ETA), and GPU kernels that
TensorFlow has no deterministic version of (op determinism makes those raise instead).

``TrainConfig(seed=N)`` and ``[train] seed = N`` in a run file call it when training starts,
with the trainer's graph as the default graph.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from typing import Any

__all__ = ["seed_everything", "check_seed", "run_seed", "worker_seed", "dataflow_worker_seeds",
           "seed_dataflow_worker"]

#: numbers the multiprocess dataflows started in this process since the run was seeded
_dataflow_serial = itertools.count()


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
    seed = check_seed(seed)
    if seed is None:
        raise ValueError("seed_everything needs an integer seed, got None")
    _seed_python_numpy_dataflows(seed)  # the run's first multiprocess dataflow is then number 0
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


def run_seed() -> int | None:
    """The seed of the DataFlow RNGs in this process: :func:`seed_everything`'s, else
    ``trainbus.utils.fix_rng_seed``'s, else None."""
    from trainbus import dataflow as _dataflow
    from trainbus.utils import utils as _utils

    return _dataflow._RNG_SEED if _dataflow._RNG_SEED is not None else _utils._RNG_SEED


def worker_seed(seed: int, serial: int, worker: int) -> int:
    """The seed of worker ``worker`` of the ``serial``-th multiprocess dataflow started in a run
    seeded with ``seed``: the same in every run, different for every (dataflow, worker) pair and
    from ``seed`` itself; an integer in ``[0, 2**31 - 1]``."""
    digest = hashlib.blake2b(f"trainbus-worker:{seed}:{serial}:{worker}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFF


def dataflow_worker_seeds(num_workers: int) -> list[int | None]:
    """In the process that starts the ``num_workers`` worker processes of a multiprocess dataflow:
    their seeds (:func:`worker_seed`, the dataflow numbered in start order), or None for each when
    this process has no run seed."""
    seed = run_seed()
    if seed is None:
        return [None] * num_workers
    serial = next(_dataflow_serial)
    return [worker_seed(seed, serial, k) for k in range(num_workers)]


def seed_dataflow_worker(seed: int | None) -> None:
    """In a dataflow worker process, before its dataflow's ``reset_state()``: with a seed (from
    :func:`dataflow_worker_seeds`), seed Python's ``random``, NumPy's global generator and the
    DataFlow RNGs (every later ``get_rng``) of this process with it. None changes nothing:
    ``get_rng`` then mixes the process id and the time, as in tensorpack."""
    if seed is not None:
        _seed_python_numpy_dataflows(seed)  # a worker's own multiprocess dataflows are numbered anew


def _seed_python_numpy_dataflows(seed: int) -> None:
    """Seed ``random``, NumPy's global generator and the DataFlow RNGs, and number the multiprocess
    dataflows started from now on from 0."""
    global _dataflow_serial
    import numpy as np

    from trainbus import dataflow as _dataflow
    from trainbus.utils import utils as _utils

    random.seed(seed)
    np.random.seed(seed)
    _utils.fix_rng_seed(seed)
    _dataflow._RNG_SEED = seed
    _dataflow_serial = itertools.count()
