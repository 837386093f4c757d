"""With a run seed (``seed_everything``, what ``TrainConfig(seed=)`` calls), every worker process of a
multiprocess dataflow draws from a seed of its own, derived from the run seed, the dataflow's start
number and the worker's index: two runs with the same seed give each worker the same numbers,
the workers differ from each other, another seed gives other numbers. Real worker processes
drawing from ``self.rng`` (``get_rng``), NumPy's global generator, Python's ``random`` and a live
image augmentor."""

from __future__ import annotations

import multiprocessing
import random

import numpy as np
import pytest
import tensorflow as tf

import trainbus.dataflow
import trainbus.utils.seed as seed_mod
import trainbus.utils.utils
from trainbus.dataflow import DataFromGenerator, MultiProcessMapData, MultiProcessRunnerZMQ, RNGDataFlow, imgaug
from trainbus.utils.seed import dataflow_worker_seeds, seed_everything, worker_seed

pytestmark = pytest.mark.timeout(180)

K = 4  # datapoints looked at per worker
BIG = 1 << 30


@pytest.fixture(autouse=True)
def unseeded_after(monkeypatch):
    """Each test starts without a run seed and leaves none behind."""
    monkeypatch.setattr(trainbus.dataflow, "_RNG_SEED", None)
    monkeypatch.setattr(trainbus.utils.utils, "_RNG_SEED", None)
    monkeypatch.setattr(seed_mod, "_dataflow_serial", seed_mod._dataflow_serial)
    py_state, np_state = random.getstate(), np.random.get_state()
    yield
    random.setstate(py_state)
    np.random.set_state(np_state)


class Draws(RNGDataFlow):
    """Endless ``[worker process name, self.rng draw, np.random draw, random draw]``."""

    def __iter__(self):
        name = multiprocessing.current_process().name
        while True:
            yield [name, int(self.rng.randint(BIG)), int(np.random.randint(BIG)), random.randrange(BIG)]


def per_worker(ds, nworkers: int) -> dict[str, list[tuple]]:
    """The first ``K`` datapoints of each worker of the started ``ds`` (a worker's own come in order)."""
    got: dict[str, list[tuple]] = {}
    try:
        for name, *values in ds:
            got.setdefault(name, []).append(tuple(values))
            if len(got) == nworkers and all(len(v) >= K for v in got.values()):
                break
    finally:
        ds.close()
    return {name: v[:K] for name, v in got.items()}


def zmq_run(seed: int) -> dict[str, list[tuple]]:
    seed_everything(seed, deterministic_ops=False, graph=tf.Graph())
    ds = MultiProcessRunnerZMQ(Draws(), 2, hwm=2 * K)
    ds.reset_state()
    return per_worker(ds, 2)


def test_multiprocess_runner_zmq_workers_are_seeded_per_worker():
    first, again, other = zmq_run(7), zmq_run(7), zmq_run(8)
    names = ["MultiProcessRunnerZMQ-0", "MultiProcessRunnerZMQ-1"]
    assert sorted(first) == names
    # the same seed: every worker draws the same numbers from every generator
    assert again == first
    for k, name in enumerate(names):
        # the worker's seed is the documented derivation (the first dataflow started after seeding)
        expected = np.random.RandomState(worker_seed(7, 0, k)).randint(BIG, size=K).tolist()
        assert [v[0] for v in first[name]] == expected  # self.rng (get_rng)
        assert [v[1] for v in first[name]] == expected  # np.random
        # another seed: other numbers, from every generator
        assert all(a != b for a, b in zip(zip(*first[name]), zip(*other[name])))
    # the workers differ from each other, in every generator
    assert all(a != b for a, b in zip(zip(*first[names[0]]), zip(*first[names[1]])))


IMG = np.zeros((10, 12, 3), np.uint8)


def test_map_workers_reseed_numpy_and_live_augmentors():
    crop = imgaug.RandomCrop(4)  # live in the parent: reseeded at fork, then per worker

    def func(dp):
        t = crop.get_transform(IMG)
        return [multiprocessing.current_process().name, t.y0, t.x0, int(np.random.randint(BIG))]

    seed_everything(11, deterministic_ops=False, graph=tf.Graph())
    ds = MultiProcessMapData(DataFromGenerator(lambda: iter(range(10 ** 6))), 2, func, buffer_size=4)
    ds.reset_state()
    got = per_worker(ds, 2)
    assert sorted(got) == ["MultiProcessMapDataZMQ-0", "MultiProcessMapDataZMQ-1"]
    for k in range(2):
        seed = worker_seed(11, 0, k)
        ref = imgaug.RandomCrop(4)
        ref.rng = np.random.RandomState(seed)
        crops = [(t.y0, t.x0) for t in (ref.get_transform(IMG) for _ in range(K))]
        assert [v[:2] for v in got[f"MultiProcessMapDataZMQ-{k}"]] == crops
        assert [v[2] for v in got[f"MultiProcessMapDataZMQ-{k}"]] == \
            np.random.RandomState(seed).randint(BIG, size=K).tolist()
    assert got["MultiProcessMapDataZMQ-0"] != got["MultiProcessMapDataZMQ-1"]


def test_worker_seeds_are_none_without_a_run_seed_and_numbered_per_dataflow():
    assert dataflow_worker_seeds(3) == [None, None, None]  # get_rng then mixes pid and time, as tensorpack
    seed_everything(5, deterministic_ops=False, graph=tf.Graph())
    first, second = dataflow_worker_seeds(2), dataflow_worker_seeds(2)
    assert first == [worker_seed(5, 0, 0), worker_seed(5, 0, 1)]
    assert second == [worker_seed(5, 1, 0), worker_seed(5, 1, 1)]
    assert len({*first, *second, 5}) == 5 and all(0 <= s < 2 ** 31 for s in first + second)
