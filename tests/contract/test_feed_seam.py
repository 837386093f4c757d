"""The per-step feed is a public seam: the trainer asks its input source
(``InputSource.step_feed()``) and hands the answer to its hooked session; no callback swaps the
session's feed."""

from __future__ import annotations

import numpy as np
import pytest

from trainbus.callbacks import Callback
from trainbus.input_source import FeedInput, InputSource, QueueInput, StagingInput, build_or_reuse_placeholder
from trainbus.testing import tiny_dataflow


class CountingInput(InputSource):
    """An input source written against the public seam only: placeholders fed with a fixed
    batch, counting how often the step asks for it."""

    def __init__(self) -> None:
        self.asked = 0
        self.calls = 0
        self._batch = next(iter(tiny_dataflow()))

    def _setup(self, input_signature):
        self._phs = [build_or_reuse_placeholder(s) for s in input_signature]

    def _get_input_tensors(self):
        return self._phs

    def size(self):
        return 5

    def _next(self):
        self.calls += 1
        return self._batch

    def step_feed(self):
        self.asked += 1
        return self._phs, self._next


def test_a_third_party_input_source_feeds_every_step_through_step_feed():
    from trainbus.input_source.base import InputSource as Base

    src = CountingInput()
    seen = []

    class Watch(Callback):
        def _before_train(self):
            # the trainer asked once, before training; nothing was fed yet
            seen.append((src.asked, src.calls))

    trainer = _train_with(src, [Watch()])
    assert seen == [(1, 0)]
    assert src.asked == 1 and src.calls == trainer.global_step == 10
    assert Base.step_feed(src) is None  # feed-free by default


def _train_with(data, callbacks):
    from trainbus.testing import TinyModel
    from trainbus.train import SimpleTrainer
    from trainbus.train.config import TrainConfig
    from trainbus.train.interface import launch_train_with_config

    trainer = SimpleTrainer()
    launch_train_with_config(TrainConfig(model=TinyModel(), data=data, callbacks=list(callbacks), monitors=[],
                                         max_epoch=2, steps_per_epoch=5), trainer)
    return trainer


def test_feed_input_is_fed_by_the_trainer_in_dataflow_order():
    order = []
    base = tiny_dataflow()

    class Recording(type(base)):
        def reset_state(self):
            order.append("reset")

        def __iter__(self):
            for k, dp in enumerate(base):
                order.append(k)
                yield dp

    trainer = _train_with(FeedInput(Recording()), [])
    # one reset at the first step, then the datapoints in order, one per step, over the passes
    assert order[0] == "reset" and order.count("reset") == 1
    assert order[1:] == [k % 8 for k in range(10)]
    assert trainer.global_step == 10
    # the session takes its feed from its constructor only: nothing can swap it later
    assert not hasattr(trainer.hooked_sess, "set_feed_source")


def test_wrappers_forward_the_feed_of_the_source_they_wrap():
    import tensorflow as tf

    specs = [tf.TensorSpec([None, 4], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "y")]
    with tf.Graph().as_default():
        inner = FeedInput(tiny_dataflow())
        staged = StagingInput(inner)
        staged.setup(specs)
        phs, next_values = staged.step_feed()
        assert [p.op.name for p in phs] == ["x", "y"]
        x, y = next_values()
        np.testing.assert_array_equal(x, next(iter(tiny_dataflow()))[0])
    with tf.Graph().as_default():
        q = QueueInput(tiny_dataflow())
        q.setup(specs)
        assert q.step_feed() is None  # the model reads the queue: no feed


def test_under_a_trainer_the_feed_input_callback_costs_nothing_per_step():
    """The trainer took the feed: FeedInput's callback is registered for no per-step hook."""
    from trainbus.testing import train_tiny

    tr = train_tiny([], max_epoch=1, steps_per_epoch=3)
    for hook in ("before_run", "after_run", "trigger_step"):
        names = [i.plugin_name for i in tr.plugin_manager.hook.__dict__[hook].get_hookimpls()]
        assert not [n for n in names if "FeedInputCallback" in n], (hook, names)
    assert tr.global_step == 3


def test_a_trainer_written_by_hand_is_fed_through_the_input_callbacks():
    """A trainer that sets its input up itself and registers the input's callbacks (as
    tensorpack's GAN trainers do) never asks for step_feed(): FeedInput feeds it through
    before_run, one datapoint per step, in the dataflow's order."""
    import tensorflow as tf

    import trainbus
    from trainbus.tfutils.common import get_global_step_var
    from trainbus.train import Trainer

    tf1 = tf.compat.v1
    values = [np.full((2,), float(i), np.float32) for i in range(1, 7)]

    class HandTrainer(Trainer):
        def __init__(self, input):
            super().__init__()
            cbs = input.setup([tf.TensorSpec([2], tf.float32, "v")])
            self.register_callback(cbs)
            (v,) = input.get_input_tensors()
            get_global_step_var()
            self.last = tf1.get_variable("last", [], initializer=tf1.zeros_initializer(), trainable=False)
            self.train_op = tf1.assign(self.last, tf.reduce_mean(v))

    seen = []

    class Read(Callback):
        def _trigger_step(self):
            seen.append(float(self.trainer.sess.run(self.trainer.last)))

    trainer = HandTrainer(FeedInput(trainbus.dataflow.DataFromList([[x] for x in values], shuffle=False)))
    trainer.train_with_defaults(callbacks=[Read()], steps_per_epoch=3, max_epoch=2)
    assert seen == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
