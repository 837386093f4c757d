"""``TrainLoop.beside_steps``: work in its own thread from when the first step is prepared, waited
for (or run then) by ``wait()``, which hands back what it raised."""

from __future__ import annotations

import threading

import pytest

from trainbus.train.base import TrainLoop


def test_the_work_starts_in_its_thread_when_the_first_step_is_prepared_and_wait_joins_it():
    loop = TrainLoop()
    release = threading.Event()
    ran: list[str] = []

    def work():
        release.wait(timeout=30)
        ran.append(threading.current_thread().name)

    job = loop.beside_steps(work, name="test-beside")
    assert ran == [] and not any(t.name == "test-beside" for t in threading.enumerate())  # not before the step
    loop.first_step_ready()
    assert any(t.name == "test-beside" for t in threading.enumerate())
    release.set()
    assert job.wait() is None
    assert ran == ["test-beside"]
    assert job.wait() is None and ran == ["test-beside"]  # once


def test_without_a_prepared_step_wait_runs_the_work_in_the_callers_thread():
    loop = TrainLoop()
    ran: list[str] = []
    job = loop.beside_steps(lambda: ran.append(threading.current_thread().name), name="never-started")
    assert job.wait() is None
    assert ran == [threading.current_thread().name]
    loop.first_step_ready()  # too late: the work was done, it does not run again
    assert job.wait() is None and len(ran) == 1


def test_what_the_work_raised_is_returned_once_by_wait():
    loop = TrainLoop()
    boom = OSError(28, "No space left on device")

    def work():
        raise boom

    job = loop.beside_steps(work, name="test-fails")
    loop.first_step_ready()
    assert job.wait() is boom
    assert job.wait() is None

    late = TrainLoop().beside_steps(work, name="test-fails-now")
    assert late.wait() is boom  # run by wait() itself: returned too, not raised


def test_an_interrupt_while_wait_runs_the_work_is_not_swallowed():
    def work():
        raise KeyboardInterrupt

    job = TrainLoop().beside_steps(work, name="test-interrupt")
    with pytest.raises(KeyboardInterrupt):
        job.wait()
