"""trainbus.utils.concurrency: threads stop, pause and share sessions; child processes are cleaned up."""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from trainbus.utils import concurrency
from trainbus.utils.concurrency import (DIE, LoopThread, OrderedContainer, OrderedResultGatherProc,
                                        ShareSessionThread, StoppableThread, enable_death_signal,
                                        ensure_proc_terminate, mask_sigint, start_proc_mask_signal, subproc_call)


def test_all_names():
    assert set(concurrency.__all__) == {
        "StoppableThread", "LoopThread", "ShareSessionThread", "ensure_proc_terminate", "start_proc_mask_signal",
        "mask_sigint", "enable_death_signal", "subproc_call", "OrderedResultGatherProc", "OrderedContainer", "DIE"}


def test_stoppable_thread_shared_event_and_queue_ops():
    evt = threading.Event()
    a, b = StoppableThread(evt), StoppableThread(evt)
    assert not a.stopped() and not b.stopped()
    a.stop()
    assert a.stopped() and b.stopped()

    t = StoppableThread()
    t.QUEUE_POLL_SECONDS = 0.01
    q: queue.Queue = queue.Queue(maxsize=1)
    t.queue_put_stoppable(q, 1)
    assert q.get_nowait() == 1
    q.put(0)
    done = threading.Event()
    got = []

    def blocked_put():
        t.queue_put_stoppable(q, 2)  # full queue: blocks until stopped
        got.append(t.queue_get_stoppable(queue.Queue()))  # stopped: returns None at once
        done.set()

    th = threading.Thread(target=blocked_put)
    th.start()
    assert not done.wait(0.1)
    t.stop()
    assert done.wait(5)
    th.join(5)
    assert got == [None] and q.get_nowait() == 0 and q.empty()


def test_loop_thread_runs_pauses_resumes_and_stops():
    count = [0]
    ran = threading.Event()

    def step():
        count[0] += 1
        ran.set()
        time.sleep(0.001)

    th = LoopThread(step)
    assert th.daemon
    th.start()
    assert ran.wait(5)
    th.pause()
    time.sleep(0.02)  # let a call in progress finish
    paused_at = count[0]
    time.sleep(0.05)
    assert count[0] == paused_at
    ran.clear()
    th.resume()
    assert ran.wait(5)
    assert count[0] > paused_at
    th.stop()
    th.join(5)
    assert not th.is_alive()

    nopause = LoopThread(lambda: None, pausable=False)
    with pytest.raises(RuntimeError, match="pausable=False"):
        nopause.pause()
    with pytest.raises(RuntimeError, match="not paused"):
        LoopThread(lambda: None).resume()


def test_share_session_thread_uses_the_starting_threads_session():
    from trainbus.utils import lazytf as _tf

    tf1 = _tf.tf1()
    seen = []

    class Inner(threading.Thread):
        def run(self):
            seen.append(tf1.get_default_session())

    g = tf1.Graph()
    with g.as_default():
        x = tf1.constant(3.0) * 2
    sess = tf1.Session(graph=g)
    try:
        inner = Inner(name="inner-th", daemon=True)
        th = ShareSessionThread(inner)
        assert th.name == "inner-th" and th.daemon
        with sess.as_default():
            th.start()
        th.join(10)
        assert seen == [sess]

        class Sub(ShareSessionThread):
            def run(self):
                with self.default_sess() as s:
                    seen.append(s.run(x))

        sub = Sub()
        with sess.as_default():
            sub.start()
        sub.join(10)
        assert seen[-1] == 6.0
    finally:
        sess.close()
    with pytest.raises(TypeError, match="threading.Thread"):
        ShareSessionThread("not a thread")


def test_ordered_container():
    c = OrderedContainer(start=5)
    assert not c.has_next()
    c.put(7, "c")
    c.put(6, "b")
    assert not c.has_next()
    with pytest.raises(LookupError, match="rank 5"):
        c.get()
    c.put(5, "a")
    assert [c.get() for _ in range(3)] == [(5, "a"), (6, "b"), (7, "c")]
    assert not c.has_next() and c.wait_for == 8


def test_ordered_result_gather_proc():
    ctx_q = mp.Queue()
    proc = OrderedResultGatherProc(ctx_q, nr_producer=2, start=0)
    proc.start()
    for rank in (2, 0, 3, 1):
        ctx_q.put((rank, rank * 10))
    ctx_q.put((DIE, "p1"))
    ctx_q.put((DIE, "p2"))
    out = [proc.get() for _ in range(6)]
    proc.join(20)
    assert out == [(0, 0), (1, 10), (2, 20), (3, 30), (DIE, "p1"), (DIE, "p2")]
    assert proc.exitcode == 0


def test_mask_sigint_ignores_and_restores():
    before = signal.getsignal(signal.SIGINT)
    with mask_sigint() as masked:
        assert masked is True
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGINT)  # ignored: no KeyboardInterrupt
    assert signal.getsignal(signal.SIGINT) is before
    res = []
    th = threading.Thread(target=lambda: res.append(mask_sigint().__enter__()))
    th.start()
    th.join()
    assert res == [False]


def _sleeper(ready):
    ready.set()
    time.sleep(60)


def test_start_proc_mask_signal_children_ignore_sigint():
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    p = ctx.Process(target=_sleeper, args=(ready,), daemon=True)
    # a handler of the test's own (the runner's may be SIG_IGN already: a background job of a shell)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        start_proc_mask_signal(p)
        try:
            assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the parent's handler is back
            assert ready.wait(30)
            os.kill(p.pid, signal.SIGINT)
            p.join(0.3)
            assert p.is_alive()  # SIGINT was ignored
        finally:
            p.kill()
            p.join(10)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert p.exitcode == -signal.SIGKILL


def test_ensure_proc_terminate_at_exit(tmp_path):
    code = textwrap.dedent(f"""
        import multiprocessing as mp, sys, time
        from trainbus.utils.concurrency import ensure_proc_terminate

        def sleep():
            time.sleep(60)

        if __name__ == "__main__":
            ctx = mp.get_context("fork")
            ps = [ctx.Process(target=sleep) for _ in range(2)]
            for p in ps:
                p.start()
            ensure_proc_terminate(ps)
            print(" ".join(str(p.pid) for p in ps), flush=True)
    """)
    script = tmp_path / "parent.py"
    script.write_text(code)
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert time.monotonic() - t0 < 50  # the 60 s sleepers were terminated at exit, not waited for
    for pid in map(int, out.stdout.split()):
        assert not _alive(pid)
    with pytest.raises(TypeError, match="multiprocessing.Process"):
        ensure_proc_terminate("proc")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            state = [ln for ln in f if ln.startswith("State:")][0]
    except (FileNotFoundError, IndexError):
        return False
    return "Z" not in state.split()[1]  # a zombie is dead, waiting for its (new) parent to reap it


PARENT = textwrap.dedent("""
    import subprocess, sys, time
    child = ("import sys, time\\n"
             "from trainbus.utils.concurrency import enable_death_signal\\n"
             + ("enable_death_signal()\\n" if sys.argv[1] == "1" else "")
             + "print('ready', flush=True)\\n"
             "time.sleep(60)\\n")
    p = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    print(p.pid, flush=True)
    time.sleep(60)
""")


def _child_of_killed_parent(enable: bool, wait: float) -> tuple[int, bool]:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, "1" if enable else "0"], stdout=subprocess.PIPE,
                              text=True)
    try:
        child = int(parent.stdout.readline())
        assert _alive(child)
        parent.kill()  # SIGKILL: the parent runs no cleanup at all
        parent.wait(10)
        deadline = time.monotonic() + wait
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        return child, _alive(child)
    finally:
        parent.kill()
        parent.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux-only")
def test_enable_death_signal_kills_child_when_parent_is_sigkilled():
    child, alive = _child_of_killed_parent(enable=True, wait=10)
    assert not alive, f"child {child} survived its SIGKILLed parent"
    # control: without the death signal the orphan keeps running
    child, alive = _child_of_killed_parent(enable=False, wait=0.5)
    try:
        assert alive
    finally:
        os.kill(child, signal.SIGKILL)


def test_enable_death_signal_elsewhere_warns_once(monkeypatch):
    from trainbus.utils import argtools, logger

    warned = []
    monkeypatch.setattr(logger, "warning", warned.append)

    argtools.log_once.cache_clear()
    monkeypatch.setattr(concurrency.sys, "platform", "darwin")
    called = []
    monkeypatch.setattr(concurrency, "_prctl_set_pdeathsig", lambda sig: called.append(sig))
    enable_death_signal()
    enable_death_signal()
    enable_death_signal(_warn=False)
    assert len(warned) == 1 and "enable_death_signal: not available on darwin" in warned[0]
    assert called == []


def test_subproc_call():
    out, rc = subproc_call("echo hi; echo err 1>&2")
    assert rc == 0 and out.split() == [b"hi", b"err"]
    out, rc = subproc_call("echo partial; exit 3")
    assert rc == 3 and out.strip() == b"partial"
    out, rc = subproc_call("sleep 5", timeout=0.2)
    assert rc == -1
