"""Guarantee 4: an exception anywhere in training cleans up, propagates with its origin,
and leaves no thread or process behind."""

from __future__ import annotations

import numpy as np
import pytest

from trainbus.callbacks.base import Callback, origin_of
from trainbus.dataflow import DataFlow
from trainbus.testing import HookRecorder, tiny_dataflow, train_tiny

pytestmark = pytest.mark.timeout(60)

HOOKS = ["setup_graph", "before_train", "before_epoch", "before_run", "after_run", "trigger_step",
         "after_epoch", "trigger_epoch", "trigger", "after_train"]


class BoomError(RuntimeError):
    pass


class Boom(Callback):
    """Raises in one hook, at the second call of it (or the first for once-only hooks)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.calls = 0

    def _maybe(self, hook: str) -> None:
        if hook == self.where:
            self.calls += 1
            if self.calls >= (2 if hook in ("before_run", "after_run", "trigger_step") else 1):
                raise BoomError(f"boom in {hook}")

    def _setup_graph(self):
        self._maybe("setup_graph")

    def _before_train(self):
        self._maybe("before_train")

    def _before_epoch(self):
        self._maybe("before_epoch")

    def _before_run(self, ctx):
        self._maybe("before_run")

    def _after_run(self, ctx, values):
        self._maybe("after_run")

    def _trigger_step(self):
        self._maybe("trigger_step")

    def _after_epoch(self):
        self._maybe("after_epoch")

    def _trigger_epoch(self):
        self._maybe("trigger_epoch")
        self.trigger()

    def _trigger(self):
        self._maybe("trigger")

    def _after_train(self):
        self._maybe("after_train")


@pytest.mark.parametrize("feed", [True, False], ids=["FeedInput", "QueueInput"])
@pytest.mark.parametrize("where", HOOKS)
def test_exception_in_callback_hook(where, feed, logdir, no_leaks):
    before = HookRecorder("before")
    after = HookRecorder("after")
    boom = Boom(where)
    with pytest.raises(BoomError, match=f"boom in {where}") as ei:
        train_tiny(callbacks=[before, boom, after], max_epoch=2, steps_per_epoch=3, feed=feed)
    notes = "\n".join(getattr(ei.value, "__notes__", []))
    assert "[trainbus] raised in callback Boom" in notes and f"during {where}()" in notes, notes
    origin = origin_of(ei.value)
    assert origin is not None and origin[0] is boom
    if where == "setup_graph":
        assert "before_train" not in before.hooks()  # failed before training: nothing started
    else:
        # cleanup ran for everyone, before and after the failing callback
        assert before.hooks()[-1] == "after_train" and after.hooks()[-1] == "after_train"
        if where != "after_train":
            # nothing ran after the failing event (no further step)
            assert before.hooks().count("after_train") == 1


def test_after_train_error_does_not_hide_the_primary_error(logdir, no_leaks, caplog):
    rec = HookRecorder()
    with pytest.raises(BoomError, match="boom in trigger_step"):
        train_tiny(callbacks=[Boom("trigger_step"), Boom("after_train"), rec], max_epoch=1, steps_per_epoch=3, feed=False)
    assert rec.hooks()[-1] == "after_train"


class FailingData(DataFlow):
    """The tiny dataflow, raising at datapoint ``at`` (of the first pass)."""

    def __init__(self, at: int) -> None:
        self.ds = tiny_dataflow()
        self.at = at

    def __len__(self):
        return len(self.ds)

    def reset_state(self):
        self.ds.reset_state()

    def __iter__(self):
        for i, dp in enumerate(self.ds):
            if i == self.at:
                raise KeyError(f"corrupt record {i}")
            yield dp


@pytest.mark.parametrize("feed", [True, False], ids=["FeedInput", "QueueInput-thread"])
def test_exception_in_dataflow(feed, logdir, no_leaks):
    """The dataflow raises: in the step's feed (FeedInput) or in the input thread
    (QueueInput). The ORIGINAL exception propagates; after_train ran; the thread ended."""
    rec = HookRecorder()
    with pytest.raises(KeyError, match="corrupt record 5"):
        train_tiny(callbacks=[rec], max_epoch=3, steps_per_epoch=4, dataflow=FailingData(5), feed=feed)
    assert rec.hooks()[-1] == "after_train"
    steps = rec.hooks().count("trigger_step")
    assert steps <= 5


def test_exception_in_the_step(logdir, no_leaks):
    """A TensorFlow error inside the step itself (a NaN reaches check_numerics)."""
    import tensorflow as tf

    from trainbus.dataflow import DataFromList
    from trainbus.testing import TinyModel

    class Checked(TinyModel):
        def build_graph(self, x, y):
            return super().build_graph(tf.debugging.check_numerics(x, "input is not finite"), y)

    good = [np.ones((4, 4), "float32"), np.zeros((4,), "int32")]
    bad = [np.full((4, 4), np.nan, "float32"), np.zeros((4,), "int32")]
    df = DataFromList([good, good, bad, good], shuffle=False)
    rec = HookRecorder()
    with pytest.raises(tf.errors.InvalidArgumentError, match="input is not finite"):
        train_tiny(callbacks=[rec], model=Checked(), dataflow=df, max_epoch=2, steps_per_epoch=4, feed=False)
    assert rec.hooks()[-1] == "after_train"
    assert rec.hooks().count("trigger_step") == 2


def test_exception_in_session_init_closes_the_session(logdir, no_leaks):
    from trainbus.tfutils.sessinit import SessionInit

    class BadInit(SessionInit):
        def _run_init(self, sess):
            self.sess = sess
            raise OSError("checkpoint unreadable")

    init = BadInit()
    rec = HookRecorder()
    with pytest.raises(OSError, match="checkpoint unreadable"):
        train_tiny(callbacks=[rec], session_init=init, feed=False)
    assert init.sess._closed, "the session created before the failing session_init was not closed"
    assert "before_train" not in rec.hooks()
