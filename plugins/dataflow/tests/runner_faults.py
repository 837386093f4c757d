"""The runners of ``test_df_worker_faults.py`` and their failure scenario, in a module of their own
(no TensorFlow, no pytest): the test runs the scenario in its own process and, for the ``/dev/shm``
check, in a child process in a private mount namespace."""

from __future__ import annotations

import itertools
import os
import signal
import time

from trainbus.dataflow import (DataFromGenerator, MultiProcessMapAndBatchData, MultiProcessMapData,
                               MultiProcessRunner, MultiProcessRunnerZMQ)

DEADLINE = 60  # seconds an error may take to show on a loaded machine (normally well under one)


def endless(tag: int = 0):
    """An endless dataflow of ``[tag, k]``."""
    return DataFromGenerator(lambda: ([tag, k] for k in itertools.count()))


def make_runner(kind: str, nproc: int = 2, stall_timeout: float | None = None, func=None):
    """A started dataflow of ``kind``; ``func`` is the map function of the map kinds."""
    func = func or (lambda dp: dp)
    if kind == "zmq":
        df = MultiProcessRunnerZMQ(endless(), nproc, hwm=4, stall_timeout=stall_timeout)
    elif kind == "mp":
        df = MultiProcessRunner(endless(), 4, nproc, stall_timeout=stall_timeout)
    elif kind == "map":
        df = MultiProcessMapData(endless(), nproc, func, buffer_size=8, stall_timeout=stall_timeout)
    elif kind == "mapbatch":
        df = MultiProcessMapAndBatchData(endless(), nproc, func, batch_size=2, buffer_size=8,
                                         stall_timeout=stall_timeout)
    else:
        raise AssertionError(kind)
    df.reset_state()
    return df


def iterate_until_error(df, deadline: float = DEADLINE) -> BaseException:
    """Iterate ``df`` until it raises; returns the exception (fails after ``deadline`` s)."""
    end = time.monotonic() + deadline
    try:
        for _ in df:
            if time.monotonic() > end:
                break
    except BaseException as e:  # noqa: BLE001 - what the test looks at
        return e
    raise AssertionError(f"{type(df).__name__} kept producing for {deadline} s")


def kill_each_runner_once() -> list[tuple[str, BaseException]]:
    """Start a MultiProcessRunner and a ZMQ runner (one worker each), SIGKILL the worker, iterate
    until the runner reports it; returns each kind with the error it ended with."""
    ended = []
    for kind in ("mp", "zmq"):
        df = make_runner(kind, nproc=1)
        it = iter(df)
        next(it)
        os.kill(df.worker_pids[0], signal.SIGKILL)
        ended.append((kind, iterate_until_error(it)))
    return ended
