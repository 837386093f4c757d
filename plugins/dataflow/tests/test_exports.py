"""The errors of the multiprocess dataflows' worker faults are public names of ``trainbus.dataflow``
(entry points of the plugin), the same classes the runners raise: ``except WorkerDiedError`` written
with the short import catches a worker that really died."""

from __future__ import annotations

import os

import pytest

import trainbus.dataflow
import trainbus_dataflow
import trainbus_dataflow.parallel as parallel
from trainbus.dataflow import DataFromGenerator, MultiProcessRunnerZMQ

NAMES = ("DataWorkerError", "WorkerDiedError", "WorkerFailedError", "WorkerStalledError")

pytestmark = pytest.mark.timeout(120)


def test_worker_errors_are_names_of_trainbus_dataflow():
    from trainbus.dataflow import DataWorkerError, WorkerDiedError, WorkerFailedError, WorkerStalledError

    imported = dict(zip(NAMES, (DataWorkerError, WorkerDiedError, WorkerFailedError, WorkerStalledError)))
    for name in NAMES:
        assert imported[name] is getattr(parallel, name)
        assert getattr(trainbus.dataflow, name) is getattr(parallel, name)
        assert getattr(trainbus_dataflow, name) is getattr(parallel, name)  # the plugin package's own table
        assert name in dir(trainbus.dataflow)
    for sub in (WorkerDiedError, WorkerFailedError, WorkerStalledError):
        assert issubclass(sub, DataWorkerError) and issubclass(sub, RuntimeError)
        assert issubclass(sub, trainbus.dataflow.DataFlowTerminated)


def _dies():
    os._exit(7)
    yield [0]  # never reached: makes this a generator


def test_the_exported_class_catches_a_worker_that_died():
    from trainbus.dataflow import WorkerDiedError

    ds = MultiProcessRunnerZMQ(DataFromGenerator(_dies), 1, stall_timeout=120)
    ds.reset_state()
    pid = ds.worker_pids[0]
    try:
        with pytest.raises(WorkerDiedError) as err:
            next(iter(ds))
        assert err.value.pid == pid and err.value.exitcode == 7
        assert f"(pid {pid})" in str(err.value) and "exit status 7" in str(err.value)
    finally:
        ds.close()
