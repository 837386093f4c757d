"""TFDatasetInput reads a DataFlow, as tensorpack's does (through ``Dataset.from_generator``,
like its ``dataflow_to_dataset`` staticmethod): real trainings on the datapoints in order."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from trainbus.callbacks import Callback
from trainbus.dataflow import DataFlow
from trainbus.input_source import TFDatasetInput
from trainbus.testing import TinyModel, forever_dataflow, tiny_dataflow
from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config

tf1 = tf.compat.v1


class SeenBatches(Callback):
    """The x and y the training tower read at each step."""

    def _setup_graph(self):
        self._inputs = self.trainer.towers.training()[0].inputs
        self._w = [v for v in tf1.global_variables() if v.op.name == "W"][0]
        self.seen = []

    def _after_train(self):
        self.w = self.trainer.sess.run(self._w)

    def _before_run(self, ctx):
        return self._inputs

    def _after_run(self, ctx, values):
        self.seen.append([np.array(v) for v in values.results])


class Counted(DataFlow):
    """The tiny batches, as Python lists of float64 and int64 (converted by the input), counting
    passes and reset_state() calls."""

    def __init__(self):
        self.df = tiny_dataflow()
        self.resets = 0
        self.passes = 0

    def reset_state(self):
        self.resets += 1

    def __len__(self):
        return len(self.df)

    def __iter__(self):
        self.passes += 1
        for x, y in self.df:
            yield [x.astype("float64").tolist(), y.astype("int64").tolist()]


def _train(src, max_epoch, steps_per_epoch=None, callbacks=()):
    trainer = SimpleTrainer()
    launch_train_with_config(TrainConfig(model=TinyModel(), data=src, max_epoch=max_epoch,
                                         steps_per_epoch=steps_per_epoch, callbacks=list(callbacks),
                                         extra_callbacks=[], monitors=[]), trainer)
    return trainer


def test_tf_dataset_input_trains_on_a_dataflow_in_order(logdir):
    df = Counted()
    src = TFDatasetInput(forever_dataflow(df))
    rec = SeenBatches()
    trainer = _train(src, max_epoch=2, steps_per_epoch=len(df), callbacks=[rec])
    want = list(tiny_dataflow())
    assert trainer.global_step == 2 * len(want)
    assert len(rec.seen) == 2 * len(want)
    for (x, y), (wx, wy) in zip(rec.seen, want + want):
        assert x.dtype == np.float32 and y.dtype == np.int32   # the input signature's dtypes
        np.testing.assert_allclose(x, wx)
        np.testing.assert_array_equal(y, wy)
    assert df.passes >= 2
    assert not np.allclose(rec.w, 0)
    # the tower reads the dataset, the signature's placeholders stay in the graph
    assert [t.op.type for t in trainer.towers.training()[0].inputs] == ["IteratorGetNext"] * 2
    assert trainer.graph.get_tensor_by_name("x:0").op.type == "Placeholder"


def test_a_finite_dataflow_gives_one_pass_and_its_length_is_the_epoch(logdir):
    """As in tensorpack, the dataset ends with the dataflow: training stops when it runs out.
    steps_per_epoch defaults to the dataflow's length."""
    df = Counted()
    src = TFDatasetInput(df)
    assert src.size() == len(df) == 8
    trainer = _train(src, max_epoch=3)
    assert trainer.global_step == 8 and trainer.loop.steps_per_epoch == 8
    assert src.failure() is None


def test_dataflow_to_dataset_is_a_staticmethod_giving_tuples_of_the_types():
    df = Counted()
    ds = TFDatasetInput.dataflow_to_dataset(df, [tf.float32, tf.int32])
    assert df.resets == 1   # it resets the dataflow
    assert [s.dtype for s in ds.element_spec] == [tf.float32, tf.int32]
    with tf.Graph().as_default():
        ds = TFDatasetInput.dataflow_to_dataset(Counted(), [tf.float32, tf.int32])
        nxt = tf1.data.make_one_shot_iterator(ds).get_next()
        with tf1.Session() as sess:
            got = [sess.run(nxt) for _ in range(8)]
            with pytest.raises(tf.errors.OutOfRangeError):   # finite: one pass
                sess.run(nxt)
    for (x, y), (wx, wy) in zip(got, tiny_dataflow()):
        np.testing.assert_allclose(x, wx)
        np.testing.assert_array_equal(y, wy)


def test_tf_dataset_input_takes_a_dataset_a_function_or_a_dataflow_only():
    with pytest.raises(TypeError, match="needs a tf.data.Dataset, a function returning one, or a DataFlow"):
        TFDatasetInput([[1.0, 2]])
    with tf.Graph().as_default():
        with pytest.raises(TypeError, match="the dataset function returned 3, not a tf.data.Dataset"):
            TFDatasetInput(lambda: 3).setup(TinyModel().inputs())
