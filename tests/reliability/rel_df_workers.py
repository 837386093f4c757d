"""What the run files of ``test_rel_dataflow_workers.py`` name: the data (``rel_df_workers:data``,
a parallel dataflow over tiny regression batches whose workers the test kills, stops or makes
fail) and a probe (``rel_df_workers:Ready``) that writes the workers' pids after the first step
and, at the end, what the training process left behind."""

from __future__ import annotations

import atexit
import json
import os
import time

import numpy as np

from trainbus.callbacks.base import Callback
from trainbus.utils.fs import atomic_write_text

#: the runners made by data() in this process, newest last
RUNNERS: list = []
#: the worker pids and the pipe directory of each runner (by id) right after its reset_state()
#: started them
STARTED: dict = {}


class Batches:
    """Endless batches ``[x (4, 3) float32, y (4,) float32]``; with ``fail_after`` the worker
    raises ``ValueError`` after that many (``LookupError`` for ``fail_kind="lookup"``); with
    ``sleep`` it waits that long before each batch."""

    def __init__(self, fail_after: int = -1, sleep: float = 0.0) -> None:
        self.fail_after = fail_after
        self.sleep = sleep

    def __len__(self) -> int:
        return 8

    def reset_state(self) -> None:
        self._rng = np.random.RandomState(os.getpid() % 1000)

    def __iter__(self):
        k = 0
        while True:
            if k == self.fail_after:
                raise ValueError(f"batch {k} of the test data is broken" + chr(10) + "second line of the message")
            if self.sleep:
                time.sleep(self.sleep)
            x = self._rng.rand(4, 3).astype("float32")
            yield [x, (x.sum(1) + 0.5).astype("float32")]
            k += 1


def data(runner: str = "zmq", nproc: int = 1, stall_timeout: float | None = None, fail_after: int = -1,
         sleep: float = 0.0, wrap: str = "dataflow"):
    """The data of a run file: ``Batches`` run by ``runner`` (``zmq``: MultiProcessRunnerZMQ,
    ``mp``: MultiProcessRunner, ``map``: MultiProcessMapData over the batches); ``wrap``
    ``staging`` gives ``StagingInput(QueueInput(...))``, ``feed`` a ``FeedInput``."""
    from trainbus.dataflow import MultiProcessMapData, MultiProcessRunner, MultiProcessRunnerZMQ

    ds = Batches(fail_after, sleep)
    if runner == "zmq":
        df = MultiProcessRunnerZMQ(ds, nproc, hwm=4, stall_timeout=stall_timeout)
    elif runner == "mp":
        df = MultiProcessRunner(ds, 4, nproc, stall_timeout=stall_timeout)
    elif runner == "map":
        df = MultiProcessMapData(MultiProcessRunnerZMQ(ds, 1, hwm=4), nproc, lambda dp: dp, buffer_size=4,
                                 stall_timeout=stall_timeout)
    else:
        raise ValueError(f"unknown runner {runner!r}")
    RUNNERS.append(df)
    start = df.reset_state

    def reset_state():
        # the pids and the pipe directory as the workers start: a worker told to fail may fail, and
        # be reaped, before the first step on a loaded machine, and the runner is closed by then
        # (no workers listed, no pipe directory)
        start()
        STARTED[id(df)] = (list(df.worker_pids), getattr(df, "pipe_dir", None))

    df.reset_state = reset_state
    if wrap == "staging":
        from trainbus.input_source import QueueInput, StagingInput

        return StagingInput(QueueInput(df))
    if wrap == "feed":
        from trainbus.input_source import FeedInput

        return FeedInput(df)
    return df


def _leftovers(path: str) -> None:
    """Write what this process still has: child processes (and their states) and the runners'
    pipe directories that still exist."""
    import psutil

    kids = [(p.pid, p.status()) for p in psutil.Process().children(recursive=True)]
    dirs = [d for d in (getattr(r, "pipe_dir", None) for r in RUNNERS) if d and os.path.exists(d)]
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"children": kids, "pipe_dirs": dirs}, f)


class Ready(Callback):
    """``trigger()`` every step: write the global step into ``path + ".last"``; after the first,
    write ``path`` (JSON: the step and the worker pids of the newest runner, as they started); at interpreter exit,
    after the dataflow's own cleanup, write ``path + ".end"`` (see ``_leftovers``)."""

    def __init__(self, path: str, sleep: float = 0.02) -> None:
        self.path = path
        self.sleep = sleep
        self._done = False

    def _setup_graph(self) -> None:
        # registered before the input starts its dataflow: runs after the dataflow's own cleanup
        atexit.register(_leftovers, self.path + ".end")

    def _trigger(self) -> None:
        # both replaced whole: a test reading them never sees them empty or half written
        atomic_write_text(self.path + ".last", f"{self.global_step}\n")
        if not self._done:
            runner = RUNNERS[-1]
            pids, pipe_dir = STARTED.get(id(runner), (runner.worker_pids, getattr(runner, "pipe_dir", None)))
            atomic_write_text(self.path, json.dumps({"step": self.global_step, "pids": pids, "pipe_dir": pipe_dir}))
            self._done = True
        time.sleep(self.sleep)
