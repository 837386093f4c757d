"""Dead, failing and stalled worker processes of the multiprocess dataflows end the iteration (and
training, under every input source) with ONE error naming the dataflow, the worker, its pid and
how it ended; nothing is left behind (no zombie, no pipe file, no pipe directory); the pipes are
private to their owner (another user can neither connect nor inject data).

Real worker processes, real signals (SIGKILL, SIGSTOP), a real second user (``nobody``)."""

from __future__ import annotations

import itertools
import os
import signal
import sys
import time

import numpy as np
import psutil
import pytest
import tensorflow as tf

from trainbus.callbacks import Callback
from trainbus.dataflow import (DataFlowTerminated, DataFromGenerator, DataFromList, MultiProcessMapData,
                               MultiProcessMapDataZMQ, MultiProcessRunner, MultiProcessRunnerZMQ,
                               PrefetchData, PrefetchDataZMQ)
from trainbus.dataflow.parallel import (DEFAULT_STALL_TIMEOUT, STALL_TIMEOUT_ENV, WorkerDiedError, WorkerFailedError,
                                        WorkerStalledError)
from trainbus.input_source import FeedInput, QueueInput, StagingInput, TFDatasetInput
from trainbus.testing import TinyModel, tiny_dataflow

# this folder is on sys.path (conftest.py): the runners and their failure scenario, shared with a child process
from runner_faults import DEADLINE, endless, iterate_until_error, kill_each_runner_once, make_runner

tf1 = tf.compat.v1

pytestmark = pytest.mark.timeout(300)

KINDS = ["zmq", "mp", "map", "mapbatch"]
OWNER = {"zmq": "MultiProcessRunnerZMQ", "mp": "MultiProcessRunner", "map": "MultiProcessMapDataZMQ",
         "mapbatch": "MultiProcessMapAndBatchDataZMQ"}


def gone(pid: int) -> bool:
    """The process ended and was reaped (no zombie left) - or is no child of ours any more."""
    try:
        p = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return True
    return p.ppid() != os.getpid() and p.status() != psutil.STATUS_ZOMBIE


def assert_nothing_left(df, pids, pipe_dir) -> None:
    for pid in pids:
        assert gone(pid), f"worker pid {pid} is still there ({psutil.Process(pid).status()})"
    if pipe_dir is not None:
        assert not os.path.exists(pipe_dir), f"the pipe directory {pipe_dir} was left behind"
    assert getattr(df, "pipe_dir", None) is None


def test_aliases_take_the_stall_timeout():
    assert PrefetchData is MultiProcessRunner and PrefetchDataZMQ is MultiProcessRunnerZMQ
    assert MultiProcessMapData is MultiProcessMapDataZMQ
    assert PrefetchDataZMQ(endless(), 1, stall_timeout=7).stall_timeout == 7.0
    assert PrefetchData(endless(), 2, 1, stall_timeout=0).stall_timeout == float("inf")


@pytest.mark.parametrize("kind", KINDS)
def test_one_killed_worker_of_several_ends_the_iteration(kind):
    df = make_runner(kind, nproc=2)
    it = iter(df)
    for _ in range(5):
        next(it)
    pids = list(df.worker_pids)
    pipe_dir = getattr(df, "pipe_dir", None)
    victim = pids[1]
    os.kill(victim, signal.SIGKILL)
    e = iterate_until_error(it)
    assert type(e) is WorkerDiedError, repr(e)
    assert isinstance(e, Exception) and isinstance(e, DataFlowTerminated)  # also what tensorpack code catches
    msg = str(e)
    assert msg.startswith(f"{OWNER[kind]}: worker 1 (pid {victim}) died without reporting an error "
                          f"(killed by signal SIGKILL (9);"), msg
    assert "\n" not in msg and e.pid == victim and e.exitcode == -signal.SIGKILL
    assert_nothing_left(df, pids, pipe_dir)


def test_killed_dispatcher_of_map_and_batch_is_named():
    df = make_runner("mapbatch", nproc=1)
    it = iter(df)
    next(it)
    pids = list(df.worker_pids)
    os.kill(pids[-1], signal.SIGKILL)  # the dispatcher comes last
    e = iterate_until_error(it)
    assert isinstance(e, WorkerDiedError)
    assert str(e).startswith(f"MultiProcessMapAndBatchDataZMQ: the dispatcher (pid {pids[-1]}) died"), str(e)
    assert_nothing_left(df, pids, None)


def test_worker_exit_status_is_reported():
    def leave(dp):
        if dp[1] == 3:
            os._exit(7)  # no exception, no message: only the exit status tells
        return dp

    df = make_runner("map", nproc=1, func=leave)
    pids = list(df.worker_pids)
    e = iterate_until_error(iter(df))
    assert isinstance(e, WorkerDiedError) and f"worker 0 (pid {pids[0]}) died" in str(e)
    assert "(exit status 7;" in str(e)
    assert_nothing_left(df, pids, None)


class BrokenRecord(Exception):
    """An exception type the parent has imported (this module)."""


def _raise_in_worker(dp):
    if dp[1] == 2:
        raise BrokenRecord(f"record {dp[1]} is broken" + chr(10) + "its second line")
    return dp


@pytest.mark.parametrize("kind", ["map", "mapbatch"])
def test_worker_exception_is_rebuilt_readable(kind):
    df = make_runner(kind, nproc=1, func=_raise_in_worker)
    pids = list(df.worker_pids)
    e = iterate_until_error(iter(df))
    assert type(e).__name__ == "BrokenRecord" and isinstance(e, BrokenRecord), repr(e)
    lines = str(e).splitlines()
    assert lines[0].startswith(f"worker 0 (pid {pids[0]}) of {OWNER[kind]} raised "
                               f"{BrokenRecord.__module__}.BrokenRecord: record 2 is broken"), lines[0]
    # the traceback as real lines, ending with the exception's own
    assert "Traceback (most recent call last):" in lines
    assert any(ln.startswith("  File ") and "_raise_in_worker" in ln for ln in lines)
    assert lines[-2:] == [f"{BrokenRecord.__module__}.BrokenRecord: record 2 is broken", "its second line"] or \
        lines[-2:] == ["BrokenRecord: record 2 is broken", "its second line"], lines[-3:]
    assert "\\n" not in str(e)
    assert_nothing_left(df, pids, None)


def test_key_error_of_a_worker_is_not_one_quoted_line():
    def ds():
        yield [1]
        raise KeyError("no such record")

    df = MultiProcessRunnerZMQ(DataFromGenerator(ds), 1)
    df.reset_state()
    e = iterate_until_error(iter(df))
    assert isinstance(e, KeyError)
    text = str(e)
    assert not text.startswith(("'", '"')) and "\\n" not in text and len(text.splitlines()) > 4, text
    assert text.splitlines()[-1] == "KeyError: 'no such record'"
    df.close()


def test_worker_exception_of_a_module_the_parent_has_not_imported(tmp_path, monkeypatch):
    """The parent imports nothing a pipe names: the type stays a name in WorkerFailedError."""
    mod = tmp_path / "tb_worker_only_mod.py"
    marker = tmp_path / "imported-by"
    mod.write_text("import os\n"
                   f"open({str(marker)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
                   "class RecordError(Exception):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # the parent COULD import it
    assert "tb_worker_only_mod" not in sys.modules

    def ds():
        yield [0]
        import tb_worker_only_mod

        raise tb_worker_only_mod.RecordError("bad record 1")

    df = MultiProcessRunnerZMQ(DataFromGenerator(ds), 1)
    df.reset_state()
    pid = df.worker_pids[0]
    e = iterate_until_error(iter(df))
    assert type(e) is WorkerFailedError and e.type_name == "tb_worker_only_mod.RecordError", repr(e)
    assert str(e).startswith(f"worker 0 (pid {pid}) of MultiProcessRunnerZMQ raised "
                             "tb_worker_only_mod.RecordError: bad record 1;")
    assert "tb_worker_only_mod" not in sys.modules
    assert marker.read_text().split() == [str(pid)]  # imported in the worker only
    assert_nothing_left(df, [pid], None)


@pytest.mark.parametrize("kind", KINDS)
def test_stopped_worker_stalls_and_is_named(kind):
    df = make_runner(kind, nproc=1, stall_timeout=1.5)
    it = iter(df)
    next(it)
    pids = list(df.worker_pids)
    victim = pids[0]
    os.kill(victim, signal.SIGSTOP)
    start = time.monotonic()
    e = iterate_until_error(it)
    took = time.monotonic() - start
    assert type(e) is WorkerStalledError, repr(e)
    msg = str(e)
    assert msg.startswith(f"{OWNER[kind]}: no datapoint from its worker processes for "), msg
    assert f"worker 0 (pid {victim}) is stopped (SIGSTOP or SIGTSTP)" in msg
    assert STALL_TIMEOUT_ENV in msg and "stall_timeout=" in msg
    assert took >= 1.5
    assert_nothing_left(df, pids, None)  # a stopped worker is terminated and reaped too


def test_stall_timeout_from_the_environment(monkeypatch):
    monkeypatch.setenv(STALL_TIMEOUT_ENV, "2.5")
    assert MultiProcessRunnerZMQ(endless(), 1).stall_timeout == 2.5
    assert MultiProcessRunnerZMQ(endless(), 1, stall_timeout=9).stall_timeout == 9.0  # the argument wins
    monkeypatch.setenv(STALL_TIMEOUT_ENV, "0")
    assert MultiProcessRunner(endless(), 2, 1).stall_timeout == float("inf")
    monkeypatch.setenv(STALL_TIMEOUT_ENV, "five minutes")
    with pytest.raises(ValueError, match=rf"MultiProcessRunnerZMQ: \${STALL_TIMEOUT_ENV}='five minutes' is not a "
                                         "number of seconds"):
        MultiProcessRunnerZMQ(endless(), 1)
    monkeypatch.delenv(STALL_TIMEOUT_ENV)
    assert MultiProcessMapData(endless(), 1, lambda d: d).stall_timeout == DEFAULT_STALL_TIMEOUT == 300.0
    with pytest.raises(ValueError, match="stall_timeout must be a number of seconds >= 0"):
        MultiProcessRunnerZMQ(endless(), 1, stall_timeout=-1)


def test_slow_but_producing_workers_do_not_stall():
    def slow():
        for k in itertools.count():
            time.sleep(0.3)
            yield [k]

    df = MultiProcessRunnerZMQ(DataFromGenerator(slow), 1, stall_timeout=1.0)
    df.reset_state()
    got = [dp[0] for _, dp in zip(range(8), df)]  # 2.4 s in all, never 1 s without data
    assert got == list(range(8))
    df.close()


def test_close_from_another_thread_ends_a_waiting_consumer():
    import threading

    df = MultiProcessRunnerZMQ(endless(), 1, stall_timeout=0)
    df.reset_state()
    it = iter(df)
    next(it)
    pids = list(df.worker_pids)
    pipe_dir = df.pipe_dir
    os.kill(pids[0], signal.SIGSTOP)
    caught: list = []
    waiting = threading.Event()

    def consume():
        waiting.set()
        try:
            for _ in it:
                pass
        except BaseException as e:  # noqa: BLE001 - what the test looks at
            caught.append(e)

    th = threading.Thread(target=consume)
    th.start()
    waiting.wait(10)
    deadline = time.monotonic() + DEADLINE
    while df._waiter is None and time.monotonic() < deadline:  # the consumer waits for data
        time.sleep(0.05)
    df.close()
    th.join(10)
    assert not th.is_alive() and len(caught) == 1 and isinstance(caught[0], DataFlowTerminated), caught
    assert_nothing_left(df, pids, pipe_dir)


_CLOSE_RACE = """
import itertools, sys, threading
from trainbus.dataflow import (DataFlowTerminated, DataFromGenerator, MultiProcessMapAndBatchData,
                               MultiProcessMapData, MultiProcessRunnerZMQ)
kind = sys.argv[1]
for i in range(int(sys.argv[2])):
    ds = DataFromGenerator(lambda: ([k] for k in itertools.count()))
    if kind == "zmq":
        df = MultiProcessRunnerZMQ(ds, 2, stall_timeout=0)
    elif kind == "map":
        df = MultiProcessMapData(ds, 2, lambda dp: dp, buffer_size=8, stall_timeout=0)
    else:
        df = MultiProcessMapAndBatchData(ds, 2, lambda dp: dp, batch_size=2, buffer_size=8, stall_timeout=0)
    df.reset_state()
    it = iter(df)
    busy = threading.Event()
    caught = []

    def consume():
        try:
            for n, _ in enumerate(it):
                if n == 20:
                    busy.set()
        except BaseException as e:
            caught.append(e)
        busy.set()

    th = threading.Thread(target=consume)
    th.start()
    busy.wait(60)
    df.close()  # while the consumer receives as fast as the workers send
    th.join(60)
    if th.is_alive() or len(caught) != 1 or not isinstance(caught[0], DataFlowTerminated):
        print(f"round {i}: consumer alive={th.is_alive()} caught={caught!r}")
        sys.exit(3)
print("rounds done")
"""


@pytest.mark.parametrize("kind", ["zmq", "map", "mapbatch"])
def test_close_from_another_thread_while_the_consumer_receives_ends_it_cleanly(kind):
    """close() from another thread while the consumer is inside a receive (data flowing, no stall)
    waits for that receive: the consumer gets DataFlowTerminated, the process neither aborts in
    libzmq nor hangs. In a child process, so that an abort fails this test and nothing else."""
    import subprocess

    proc = subprocess.run([sys.executable, "-c", _CLOSE_RACE, kind, "15"], capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0 and "rounds done" in proc.stdout, (proc.returncode, proc.stdout, proc.stderr[-3000:])


# ------------------------------------------------------------------ privacy of the pipes
NOBODY = 65534


def _as_user_try_pipes(addrs: list[str], uid: int) -> int:
    """In a forked child as ``uid``: connect to each IPC address (a raw Unix socket, then ZMQ,
    sending one datapoint). Exit status: bit 0 set if any raw connect succeeded, bit 1 if a ZMQ
    send went out."""
    import socket as pysocket

    import zmq

    from trainbus.utils.serialize import dumps

    pid = os.fork()
    if pid:
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status)
    code = 0
    try:
        if uid != os.getuid():
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(uid)
        for addr in addrs:
            path = addr[len("ipc://"):]
            s = pysocket.socket(pysocket.AF_UNIX, pysocket.SOCK_STREAM)
            try:
                s.connect(path)
                code |= 1
            except OSError:
                pass
            finally:
                s.close()
        ctx = zmq.Context()
        for addr in addrs:
            sock = ctx.socket(zmq.PUSH)
            sock.setsockopt(zmq.IMMEDIATE, 1)  # queue nothing before a connection is made
            sock.connect(addr)
            try:
                for _ in range(40):  # ZMQ connects in the background: give it two seconds
                    try:
                        sock.send(dumps(["INJECTED", -1]), zmq.NOBLOCK)
                        code |= 2
                        break
                    except zmq.Again:
                        time.sleep(0.05)
            finally:
                sock.close(linger=2000)
        ctx.term()
    except BaseException:  # noqa: BLE001 - a child must not return into pytest
        os._exit(100)
    os._exit(code)


def _pipe_addrs(df) -> list[str]:
    return [f"ipc://{os.path.join(df.pipe_dir, n)}" for n in sorted(os.listdir(df.pipe_dir))]


@pytest.mark.skipif(os.name != "posix" or os.getuid() != 0, reason="needs root to act as another user")
@pytest.mark.parametrize("kind", ["zmq", "map", "mapbatch"])
def test_another_user_cannot_connect_or_inject(kind):
    df = make_runner(kind, nproc=1)
    it = iter(df)
    next(it)
    st = os.stat(df.pipe_dir)
    assert st.st_uid == os.getuid() and (st.st_mode & 0o777) == 0o700
    addrs = _pipe_addrs(df)
    assert addrs, "no socket file in the pipe directory"
    assert _as_user_try_pipes(addrs, NOBODY) == 0  # refused: no connection, nothing sent
    got = [next(it) for _ in range(30)]
    assert not any("INJECTED" in repr(dp) for dp in got)
    df.close()


@pytest.mark.skipif(os.name != "posix" or os.getuid() != 0, reason="needs root to act as another user")
def test_the_owner_could_inject_which_shows_the_check_works():
    """The same attempt as the owner gets through: the refusal above is the permissions' doing."""
    df = make_runner("zmq", nproc=1)
    it = iter(df)
    next(it)
    assert _as_user_try_pipes(_pipe_addrs(df), os.getuid()) == 3
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if next(it) == ["INJECTED", -1]:
            break
    else:
        raise AssertionError("the owner's datapoint never arrived")
    df.close()


# ------------------------------------------------------------------ training under every input source
class KillAt(Callback):
    """At global step ``step``, send ``sig`` to every worker of ``runner``."""

    def __init__(self, runner, step: int = 2, sig: int = signal.SIGKILL) -> None:
        self.runner, self.step, self.sig = runner, step, sig
        self.pids: list[int] = []

    def _trigger_step(self) -> None:
        if self.global_step == self.step and not self.pids:
            self.pids = list(self.runner.worker_pids)
            for pid in self.pids:
                os.kill(pid, self.sig)


def train_until_error(data, killer) -> BaseException:
    from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config

    tf1.reset_default_graph()
    cfg = TrainConfig(model=TinyModel(), data=data, max_epoch=100000, steps_per_epoch=8, callbacks=[killer],
                      monitors=[])
    with pytest.raises(BaseException) as ei:
        launch_train_with_config(cfg, SimpleTrainer())
    return ei.value


def _zmq(stall: float | None = None):
    return MultiProcessRunnerZMQ(tiny_dataflow(), 1, hwm=2, stall_timeout=stall)


INPUTS = {
    "feed": lambda r: FeedInput(r),
    "queue": lambda r: QueueInput(r),
    "staging": lambda r: StagingInput(QueueInput(r)),
    "tfdata": lambda r: TFDatasetInput(lambda: TFDatasetInput.dataflow_to_dataset(r, [tf.float32, tf.int32]).repeat()),
}


@pytest.mark.parametrize("source", list(INPUTS))
def test_training_ends_with_the_worker_error_under_every_input_source(source):
    runner = _zmq()
    killer = KillAt(runner)
    e = train_until_error(INPUTS[source](runner), killer)
    pid = killer.pids[0]
    expected = (f"MultiProcessRunnerZMQ: worker 0 (pid {pid}) died without reporting an error "
                "(killed by signal SIGKILL (9);")
    if source == "tfdata":
        # the error crosses tf.data's generator op: TensorFlow's error carries the message
        assert isinstance(e, tf.errors.OpError) and expected in e.message, repr(e)
    else:
        assert isinstance(e, WorkerDiedError) and str(e).startswith(expected), repr(e)
    assert gone(pid)


@pytest.mark.parametrize("source", ["feed", "queue"])
def test_training_ends_with_the_stall_error(source):
    runner = _zmq(stall=1.5)
    killer = KillAt(runner, sig=signal.SIGSTOP)
    e = train_until_error(INPUTS[source](runner), killer)
    pid = killer.pids[0]
    assert isinstance(e, WorkerStalledError), repr(e)
    assert f"worker 0 (pid {pid}) is stopped (SIGSTOP or SIGTSTP)" in str(e)
    assert gone(pid)


def test_queue_input_turns_a_plain_dataflow_terminated_into_an_error():
    """A dataflow raising the BaseException DataFlowTerminated ends training with an Exception
    naming it (it used to end training as if the data had run out, exit status 0)."""

    class Ends:
        def __len__(self):
            return 8

        def reset_state(self):
            pass

        def __iter__(self):
            for dp in itertools.islice(tiny_dataflow_iter(), 5):
                yield dp
            raise DataFlowTerminated("the source went away")

    class Nothing(Callback):
        pass

    e = train_until_error(QueueInput(Ends()), Nothing())
    assert isinstance(e, RuntimeError), repr(e)
    assert str(e) == ("QueueInput: the dataflow Ends stopped producing data: DataFlowTerminated: the source went "
                      "away")


def tiny_dataflow_iter():
    ds = tiny_dataflow()
    ds.reset_state()
    while True:
        yield from ds


def test_no_pipe_left_after_failures():
    """The pipe directories of this process are as before after a failed MultiProcessRunner and ZMQ runner."""
    import tempfile

    def pipes():
        return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith(f"trainbus-pipes-{os.getpid()}-")}

    before = pipes()
    for kind, error in kill_each_runner_once():
        assert isinstance(error, WorkerDiedError), (kind, error)
    assert pipes() <= before, pipes() - before


#: runs in a private mount namespace whose /dev/shm is a new, empty tmpfs: what is there at the end
#: was left by this process (another test's semaphores on the machine's /dev/shm are not seen)
SHM_SCRIPT = r"""
import os, sys
from multiprocessing import shared_memory
sys.path.insert(0, sys.argv[1])  # this test's folder: the scenario of runner_faults.py
from runner_faults import kill_each_runner_once

# the check sees what is made here: a segment shows in this /dev/shm until it is unlinked
probe = shared_memory.SharedMemory(create=True, size=64)
print("PROBE", probe.name.lstrip("/") in os.listdir("/dev/shm"))
probe.close()
probe.unlink()
print("BEFORE", sorted(os.listdir("/dev/shm")))
for kind, error in kill_each_runner_once():
    print("DIED", kind, type(error).__name__)
print("AFTER", sorted(os.listdir("/dev/shm")))
"""


#: the exit status of the shell when the private /dev/shm cannot be mounted here
_NO_PRIVATE_SHM = 97


def test_no_shared_memory_left_after_failures():
    """/dev/shm is as before after a failed MultiProcessRunner and ZMQ runner: checked in a
    private mount namespace with its own /dev/shm (a real tmpfs), so that the shared memory and
    semaphores of the tests other workers run meanwhile are not counted."""
    import shutil
    import subprocess

    r = None
    here = os.path.dirname(os.path.abspath(__file__))
    if shutil.which("unshare") is not None:
        r = subprocess.run(["unshare", "-m", "sh", "-c",
                            f'mount -t tmpfs -o size=16m trainbus-shm /dev/shm || exit {_NO_PRIVATE_SHM}; '
                            'exec "$0" -c "$1" "$2"', sys.executable, SHM_SCRIPT, here],
                           capture_output=True, text=True, timeout=DEADLINE * 3)
    # unshare itself refused (not allowed to make a mount namespace), or the mount was refused
    if r is None or r.returncode == _NO_PRIVATE_SHM or (r.returncode != 0 and r.stderr.startswith("unshare:")):
        pytest.skip("this machine does not allow a private /dev/shm (unshare -m, mount -t tmpfs); "
                    "test_no_pipe_left_after_failures covers the pipes")
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith(("PROBE ", "BEFORE ", "DIED ", "AFTER "))]
    assert lines == ["PROBE True", "BEFORE []", "DIED mp WorkerDiedError", "DIED zmq WorkerDiedError",
                     "AFTER []"], r.stdout


def test_arrays_still_arrive_intact():
    """The watch changes nothing on the data path."""
    arrs = [np.arange(k * 10000, dtype="float32").reshape(-1, 100) for k in range(1, 4)]
    df = MultiProcessRunnerZMQ(DataFromList([[a] for a in arrs], shuffle=False), 1)
    df.reset_state()
    got = [dp[0] for dp in df]
    assert all(np.array_equal(a, b) for a, b in zip(got, arrs))
    df.close()


class StopWhenStalled(Callback):
    """At global step 2, SIGSTOP the runner's worker; a thread then waits until the runner waits
    for data and training has made no step for a second, and asks the trainer to stop (what the
    first SIGTERM does)."""

    def __init__(self, runner) -> None:
        self.runner = runner
        self.pid = None
        self.requested_at_step = None

    def _trigger_step(self) -> None:
        import threading

        if self.global_step == 2 and self.pid is None:
            self.pid = self.runner.worker_pids[0]
            os.kill(self.pid, signal.SIGSTOP)
            threading.Thread(target=self._request, daemon=True).start()

    def _request(self) -> None:
        trainer = self.trainer
        end = time.monotonic() + DEADLINE
        last, since = trainer.global_step, time.monotonic()
        while time.monotonic() < end:
            time.sleep(0.05)
            step = trainer.global_step
            if step != last:
                last, since = step, time.monotonic()
            elif self.runner._waiter is not None and time.monotonic() - since > 1.0:
                break
        self.requested_at_step = trainer.global_step
        trainer.request_stop("signal SIGTERM (test)")


@pytest.mark.parametrize("source", ["feed", "queue", "staging"])
def test_a_stop_request_ends_a_stalled_input_gracefully(source):
    """A stop (what SIGTERM asks) while the input waits on a stopped worker ends training at once
    and normally - every after_train runs - instead of after the stall timeout."""
    from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config

    runner = _zmq(stall=0)  # no stall watchdog: only the stop request can end the wait
    stopper = StopWhenStalled(runner)

    class Ends(Callback):
        ran = False

        def _after_train(self) -> None:
            Ends.ran = True
            self.step = self.global_step

    ends = Ends()
    tf1.reset_default_graph()
    cfg = TrainConfig(model=TinyModel(), data=INPUTS[source](runner), max_epoch=100000, steps_per_epoch=8,
                      callbacks=[stopper, ends], monitors=[])
    start = time.monotonic()
    launch_train_with_config(cfg, SimpleTrainer())  # returns: no error
    assert Ends.ran and stopper.requested_at_step is not None
    assert ends.step == stopper.requested_at_step  # no step after the stop
    assert time.monotonic() - start < DEADLINE
    runner.close()
    assert gone(stopper.pid)
