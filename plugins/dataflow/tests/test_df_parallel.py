"""trainbus.dataflow parallelism: the runners and the parallel maps in real worker processes and
threads — values, order guarantees, errors from workers, and no orphaned worker processes."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import psutil
import pytest

import trainbus.dataflow as df
from subprocs import default_signal_dispositions  # tests/_support
from trainbus.dataflow import (BatchData, DataFlowTerminated, DataFromDict, DataFromList, MapData,
                               MultiProcessMapAndBatchData, MultiProcessMapData, MultiProcessMapDataZMQ,
                               MultiProcessRunner, MultiProcessRunnerZMQ, MultiThreadMapData, MultiThreadRunner)


def seq(n):
    return DataFromList([[i, np.full((2,), i, "float32")] for i in range(n)], shuffle=False)


def gone(pid):
    """The process has exited (gone, or a zombie nobody reaped yet)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_gone(pids, timeout=15.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(gone(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


def double(dp):
    return [dp[0] * 2, dp[1] * 2]


def fail_at_7(dp):
    if dp[0] == 7:
        raise KeyError("no seven here")
    return dp


def test_aliases_are_the_same_classes():
    assert df.PrefetchDataZMQ is MultiProcessRunnerZMQ
    assert df.PrefetchData is df.MultiProcessPrefetchData is MultiProcessRunner
    assert df.MultiThreadPrefetchData is MultiThreadRunner
    assert MultiProcessMapData is MultiProcessMapDataZMQ and df.ThreadedMapData is MultiThreadMapData
    assert MultiProcessMapAndBatchData is df.MultiProcessMapAndBatchDataZMQ


def test_runner_zmq_one_proc_keeps_order_and_values():
    r = MultiProcessRunnerZMQ(seq(30), num_proc=1)
    assert len(r) == 30
    r.reset_state()
    for _ in range(2):  # a pass is len(ds) datapoints; the worker repeats ds
        out = list(r)
        assert [dp[0] for dp in out] == list(range(30))
        assert out[5][1].dtype == np.float32 and out[5][1].tolist() == [5.0, 5.0]
    pids = r.worker_pids
    assert len(pids) == 1 and not gone(pids[0])
    r.close()
    assert wait_gone(pids)


def test_runner_zmq_dict_datapoints_and_batches():
    d = BatchData(DataFromDict({"x": list(range(8)), "y": [float(i) for i in range(8)]}, shuffle=False), 4)
    r = MultiProcessRunnerZMQ(d, 1)
    r.reset_state()
    out = list(r)
    assert [b["x"].tolist() for b in out] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert out[0]["x"].dtype == np.int32 and out[0]["y"].dtype == np.float32
    r.close()


def test_runner_zmq_two_procs_same_distribution_and_reset_restarts():
    r = MultiProcessRunnerZMQ(seq(20), num_proc=2)
    r.reset_state()
    out = [dp[0] for dp in r]
    assert len(out) == 20 and set(out) <= set(range(20))
    # both workers produce the same sequence: every value at most twice in the first 20
    assert all(out.count(v) <= 2 for v in set(out))
    old = r.worker_pids
    assert len(old) == 2
    r.reset_state()  # called again: the old workers are reaped, new ones started
    assert wait_gone(old)
    assert len(r.worker_pids) == 2 and set(r.worker_pids).isdisjoint(old)
    assert len(list(r)) == 20
    r.close()


def test_runner_zmq_worker_exception_reraised_and_others_stopped():
    r = MultiProcessRunnerZMQ(MapData(DataFromList([[i] for i in range(20)], shuffle=False), fail_at_7), 2)
    r.reset_state()
    pids = r.worker_pids
    with pytest.raises(KeyError) as ei:
        for _ in r:
            pass
    msg = str(ei.value)
    assert "of MultiProcessRunnerZMQ raised KeyError" in msg and "in fail_at_7" in msg and "no seven here" in msg
    assert wait_gone(pids)


def test_runner_zmq_silently_killed_worker_raises_terminated():
    r = MultiProcessRunnerZMQ(df.DataFromGenerator(lambda: ([i] for i in itertools.count())), 1, hwm=2)
    r.reset_state()
    it = iter(r)
    assert next(it) == [0]
    os.kill(r.worker_pids[0], signal.SIGKILL)
    # what the worker sent before it died may still be buffered: read on until it is drained
    deadline = time.monotonic() + 120
    with pytest.raises(DataFlowTerminated, match="died without reporting an error"):
        while time.monotonic() < deadline:
            next(it)


def test_runner_len_rules():
    with pytest.raises(NotImplementedError):
        len(MultiProcessRunnerZMQ(df.RepeatedData(seq(2), -1), 1))
    with pytest.raises(NotImplementedError):
        len(MultiProcessRunner(df.RepeatedData(seq(2), -1), 4, 1))
    assert len(MultiProcessRunner(seq(5), 4, 1)) == 5


def test_runner_mp_queue_order_and_error():
    r = MultiProcessRunner(seq(12), num_prefetch=4, num_proc=1)
    r.reset_state()
    assert [dp[0] for dp in r] == list(range(12))
    pids = r.worker_pids
    r.close()
    assert wait_gone(pids)
    bad = MultiProcessRunner(MapData(DataFromList([[i] for i in range(20)], shuffle=False), fail_at_7), 4, 2)
    bad.reset_state()
    pids = bad.worker_pids
    with pytest.raises(KeyError, match="of MultiProcessRunner raised KeyError"):
        for _ in bad:
            pass
    assert wait_gone(pids)


def test_thread_runner():
    t = MultiThreadRunner(lambda: seq(10), num_prefetch=3, num_thread=1)
    t.reset_state()
    assert len(t) == 10 and [dp[0] for dp in t] == list(range(10))
    t.close()
    t2 = MultiThreadRunner(lambda: seq(10), num_prefetch=3, num_thread=3)
    t2.reset_state()
    got = [dp[0] for dp in t2]
    assert len(got) == 10 and set(got) <= set(range(10))
    t2.close()
    bad = MultiThreadRunner(lambda: MapData(DataFromList([[i] for i in range(20)], shuffle=False), fail_at_7), 3, 2)
    bad.reset_state()
    with pytest.raises(KeyError, match="thread . of MultiThreadRunner raised KeyError"):
        for _ in bad:
            pass


@pytest.mark.parametrize("make", [
    lambda ds, f, **kw: MultiThreadMapData(ds, 3, f, **kw),
    lambda ds, f, **kw: MultiProcessMapData(ds, 2, f, **kw),
], ids=["threads", "processes"])
def test_parallel_map_strict_gives_each_pass_exactly(make):
    m = make(seq(40), double, buffer_size=8, strict=True)
    m.reset_state()
    assert len(m) == 40
    for _ in range(3):
        out = [dp for dp in m]
        assert sorted(dp[0] for dp in out) == [2 * i for i in range(40)]
        assert all(dp[1].tolist() == [dp[0], dp[0]] for dp in out)
    small = make(seq(5), double, buffer_size=50, strict=True)  # buffer clipped to len(ds)
    small.reset_state()
    assert sorted(dp[0] for dp in small) == [0, 2, 4, 6, 8]
    with_none = make(seq(6), lambda dp: None if dp[0] == 3 else dp, buffer_size=2, strict=True)
    with_none.reset_state()
    with pytest.raises(ValueError, match="returned None with strict=True"):
        for _ in with_none:
            pass


@pytest.mark.parametrize("cls", [MultiThreadMapData, MultiProcessMapData], ids=["threads", "processes"])
def test_parallel_map_non_strict_filters_and_repeats(cls):
    m = cls(seq(10), 2, lambda dp: None if dp[0] % 2 else [dp[0]], buffer_size=4)
    m.reset_state()
    got = [dp[0] for dp in itertools.islice(m, 25)]  # never ends: passes of ds follow each other
    assert set(got) == {0, 2, 4, 6, 8}
    one = cls(seq(10), 1, double, buffer_size=3)  # one worker: first in, first out
    one.reset_state()
    assert [dp[0] for dp in itertools.islice(one, 15)] == [2 * i for i in range(10)] + [0, 2, 4, 6, 8]
    m.close()
    one.close()


@pytest.mark.parametrize("cls", [MultiThreadMapData, MultiProcessMapData], ids=["threads", "processes"])
def test_one_worker_keeps_order_strict(cls):
    m = cls(seq(10), 1, double, buffer_size=4, strict=True)
    m.reset_state()
    for _ in range(2):
        assert [dp[0] for dp in m] == [2 * i for i in range(10)]
    m.close()


@pytest.mark.parametrize("make", [
    lambda ds: MultiThreadMapData(ds, 2, fail_at_7, buffer_size=4),
    lambda ds: MultiProcessMapData(ds, 2, fail_at_7, buffer_size=4),
    lambda ds: MultiProcessMapAndBatchData(ds, 2, fail_at_7, 2, buffer_size=6),
], ids=["threads", "processes", "map-and-batch"])
def test_parallel_map_worker_error_reraised(make):
    m = make(DataFromList([[i] for i in range(20)], shuffle=False))
    m.reset_state()
    pids = list(getattr(m, "worker_pids", []))
    with pytest.raises(KeyError) as ei:
        for _ in itertools.islice(m, 100):
            pass
    assert "raised KeyError" in str(ei.value) and "in fail_at_7" in str(ei.value)
    assert wait_gone(pids)


def test_map_and_batch_one_worker_equals_batch_of_map():
    m = MultiProcessMapAndBatchData(seq(12), 1, double, 4)
    m.reset_state()
    got = list(itertools.islice(m, 6))  # infinite: passes follow each other
    want = list(BatchData(MapData(seq(12), double), 4)) * 2
    assert [b[0].tolist() for b in got] == [b[0].tolist() for b in want]
    assert got[0][0].dtype == np.int32 and got[0][1].dtype == np.float32 and got[0][1].shape == (4, 2)
    pids = m.worker_pids
    assert len(pids) == 2  # one worker and the dispatcher
    m.close()
    assert wait_gone(pids)
    with pytest.raises(ValueError, match="buffer_size"):
        MultiProcessMapAndBatchData(seq(12), 1, double, 8, buffer_size=8)


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_proc"):
        MultiProcessRunnerZMQ(seq(2), 0)
    with pytest.raises(TypeError, match="map_func must be callable"):
        MultiProcessMapData(seq(2), 2, None)
    with pytest.raises(ValueError, match="num_thread"):
        MultiThreadMapData(seq(2), None, double)
    with pytest.raises(RuntimeError, match="reset_state"):
        next(iter(MultiProcessRunnerZMQ(seq(2), 1)))


_PARENT = textwrap.dedent("""
    import sys, time
    from trainbus.dataflow import MultiProcessRunnerZMQ, DataFromGenerator
    import itertools
    r = MultiProcessRunnerZMQ(DataFromGenerator(lambda: ([i] for i in itertools.count())), 2, hwm=4)
    r.reset_state()
    it = iter(r)
    next(it)
    print("PIDS", " ".join(map(str, r.worker_pids)), flush=True)
    while True:
        next(it)
        time.sleep(0.01)
""")


def _start_parent(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(_PARENT)
    # SIGINT with its default disposition even where the suite runs as a background job (SIGINT ignored)
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=default_signal_dispositions)
    line = p.stdout.readline()
    while line and not line.startswith("PIDS "):  # skip log lines
        line = p.stdout.readline()
    if not line:
        p.kill()
        raise AssertionError(f"the parent process printed no worker pids; stderr:\n{p.stderr.read()}")
    pids = [int(x) for x in line.split()[1:]]
    assert len(pids) == 2 and not any(gone(x) for x in pids)
    return p, pids


def test_workers_die_when_parent_is_sigkilled(tmp_path):
    p, pids = _start_parent(tmp_path)
    p.kill()  # SIGKILL: no atexit, no cleanup in the parent
    p.wait(10)
    assert wait_gone(pids), f"worker processes {pids} outlived their SIGKILLed parent"


def test_ctrl_c_leaves_no_orphans(tmp_path):
    p, pids = _start_parent(tmp_path)
    os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: SIGINT to the whole process group
    p.wait(20)
    assert p.returncode != 0 and "KeyboardInterrupt" in p.stderr.read()
    assert wait_gone(pids), f"worker processes {pids} outlived the Ctrl-C of their parent"


def test_large_arrays_travel_out_of_band_intact_and_writable():
    big = np.arange(200 * 300, dtype="float32").reshape(200, 300)
    rows = [[big + i, i, np.arange(3)] for i in range(3)]
    r = MultiProcessRunnerZMQ(DataFromList(rows, shuffle=False), 1)
    r.reset_state()
    out = list(r)
    assert [dp[1] for dp in out] == [0, 1, 2]
    assert all(np.array_equal(dp[0], big + i) and dp[0].dtype == np.float32 for i, dp in enumerate(out))
    out[0][0][0, 0] = -1.0  # a received array is writable and independent
    assert out[1][0][0, 0] == 1.0 and out[0][2].tolist() == [0, 1, 2]
    r.close()
    d = MultiProcessRunnerZMQ(DataFromDict({"img": [np.ones((128, 128, 3), "uint8") * i for i in range(2)],
                                            "label": [5, 6]}, shuffle=False), 1)
    d.reset_state()
    got = list(d)
    assert [g["label"] for g in got] == [5, 6] and got[1]["img"].shape == (128, 128, 3)
    assert got[1]["img"].dtype == np.uint8 and int(got[1]["img"].sum()) == 128 * 128 * 3
    d.close()
