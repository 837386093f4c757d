"""A datapoint that does not fit the model's inputs stops training with one line that names the
input source, the dataflow, the component (index and input name), and what was expected and
got: wrong dtype, wrong shape or rank, missing or extra components, under FeedInput, QueueInput,
StagingInput and TFDatasetInput (reading a DataFlow). The happy path does no extra work per
datapoint: the checks run once a feed or an enqueue failed."""

from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf

from trainbus.callbacks import Callback
from trainbus.dataflow import DataFlow
from trainbus.input_source import FeedInput, QueueInput, StagingInput, TFDatasetInput
from trainbus.testing import TinyModel, tiny_dataflow
from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config

tf1 = tf.compat.v1

GOOD = [np.zeros((4, 4), "float32"), np.zeros(4, "int32")]

BAD = {
    "dtype": [np.full((4, 4), "a"), np.zeros(4, "int32")],
    "shape": [np.zeros((4, 3), "float32"), np.zeros(4, "int32")],
    "rank": [np.zeros(4, "float32"), np.zeros(4, "int32")],
    "missing": [np.zeros((4, 4), "float32")],
    "extra": [np.zeros((4, 4), "float32"), np.zeros(4, "int32"), np.zeros(3)],
    "not-a-list": np.zeros((4, 4), "float32"),
}

EXPECTED = {
    "dtype": "{src}: component 0 ('x') of a datapoint from the dataflow BadThird cannot be converted to float32: the "
             "input signature expects float32 of shape (None, 4), got an array of <U1 with shape (4, 4) (ValueError: "
             "could not convert string to float",
    "shape": "{src}: component 0 ('x') of a datapoint from the dataflow BadThird has shape (4, 3), but the input "
             "signature expects (None, 4); make the dataflow produce that shape",
    "rank": "{src}: component 0 ('x') of a datapoint from the dataflow BadThird has shape (4,), but the input "
            "signature expects (None, 4) (rank 2, got rank 1)",
    "missing": "{src}: the dataflow BadThird produced a datapoint of 1 component, but the model has 2 inputs "
               "['x', 'y']: expected one component per input, in the order of the model's inputs(); got "
               "[0: an array of float32 with shape (4, 4)]",
    "extra": "{src}: the dataflow BadThird produced a datapoint of 3 components, but the model has 2 inputs "
             "['x', 'y']: expected one component per input, in the order of the model's inputs(); got "
             "[0: an array of float32 with shape (4, 4); 1: an array of int32 with shape (4,); "
             "2: an array of float64 with shape (3,)]",
    "not-a-list": "{src}: the dataflow BadThird produced a datapoint that is an array of float32 with shape (4, 4), "
                  "not a list of components; expected a list with one component per input ['x', 'y']",
}


class BadThird(DataFlow):
    """Two good datapoints, then ``bad``, then good ones again."""

    def __init__(self, bad):
        self.bad = bad

    def __len__(self):
        return 4

    def __iter__(self):
        yield GOOD
        yield GOOD
        yield self.bad
        yield GOOD


SOURCES = {
    "FeedInput": (lambda df: FeedInput(df), "FeedInput"),
    "QueueInput": (lambda df: QueueInput(df), "QueueInput"),
    "StagingInput": (lambda df: StagingInput(QueueInput(df)), "QueueInput (inside StagingInput)"),
    "StagingInput-feed": (lambda df: StagingInput(FeedInput(df)), "FeedInput (inside StagingInput)"),
    "TFDatasetInput": (lambda df: TFDatasetInput(df), "TFDatasetInput"),
}

CASES = [(s, b) for s in SOURCES for b in ("dtype", "shape", "missing", "extra")]
CASES += [("FeedInput", "rank"), ("QueueInput", "rank"), ("FeedInput", "not-a-list"), ("QueueInput", "not-a-list")]


def _train(src, steps=4, callbacks=(), model=None):
    trainer = SimpleTrainer()
    launch_train_with_config(TrainConfig(model=model or TinyModel(), data=src, max_epoch=2, steps_per_epoch=steps,
                                         callbacks=list(callbacks), extra_callbacks=[], monitors=[]), trainer)
    return trainer


@pytest.mark.parametrize("source, bad", CASES, ids=[f"{s}-{b}" for s, b in CASES])
def test_a_bad_datapoint_names_source_dataflow_component_expected_and_got(logdir, source, bad):
    make, label = SOURCES[source]
    trainer = SimpleTrainer()
    with pytest.raises(ValueError) as info:
        launch_train_with_config(TrainConfig(model=TinyModel(), data=make(BadThird(BAD[bad])), max_epoch=2,
                                             steps_per_epoch=4, extra_callbacks=[], monitors=[]), trainer)
    msg = str(info.value)
    assert msg.startswith(EXPECTED[bad].format(src=label)), msg
    assert "\n" not in msg
    # the two good datapoints were trained on before the bad one stopped training
    assert trainer.global_step == (1 if source.startswith("StagingInput") else 2)


def test_feed_input_adds_no_work_per_datapoint(logdir):
    """FeedInput hands the dataflow's own arrays to the step, unconverted and unchecked: the
    check runs only once a feed failed."""
    df = tiny_dataflow()
    src = FeedInput(df)
    with tf.Graph().as_default():
        src.setup(TinyModel().inputs())
        placeholders, next_values = src.step_feed()
        first = next(iter(df))
        got = next_values()
    assert [p.op.name for p in placeholders] == ["x", "y"]
    assert type(got) is tuple and len(got) == 2
    np.testing.assert_array_equal(got[0], first[0])


def test_a_bad_feed_of_another_callback_is_not_blamed_on_the_input(logdir):
    """The step's feed failed on a value a callback fed, the datapoint being fine: TensorFlow's
    own error comes through, naming that tensor, and FeedInput is not blamed."""

    class ModelWithExtra(TinyModel):
        def build_graph(self, x, y):
            tf1.placeholder_with_default(tf.zeros([2]), [2], name="extra")
            return super().build_graph(x, y)

    class FeedsBadExtra(Callback):
        def _before_run(self, ctx):
            return tf1.train.SessionRunArgs(fetches=[], feed_dict={"extra:0": np.zeros(3, "float32")})

    with pytest.raises(ValueError) as info:
        _train(FeedInput(tiny_dataflow()), callbacks=[FeedsBadExtra()], model=ModelWithExtra())
    assert "Cannot feed value of shape (3,) for Tensor 'extra:0'" in str(info.value)
    assert "FeedInput" not in str(info.value)


def test_a_good_run_after_the_checks_trains_as_before(logdir):
    """The same inputs, good datapoints only: every source trains, no error (a dataset ends with
    its dataflow, so TFDatasetInput reads it repeated)."""
    from trainbus.testing import forever_dataflow

    for name, (make, _) in SOURCES.items():
        df = BadThird(GOOD)
        trainer = _train(make(forever_dataflow(df) if name == "TFDatasetInput" else df))
        assert trainer.global_step == 8


class BadFirst(BadThird):
    def __iter__(self):
        yield self.bad
        yield GOOD


@pytest.mark.parametrize("df, error", [
    (BadFirst(BAD["dtype"]), "ValueError: TFDatasetInput.dataflow_to_dataset: component 0 of a datapoint from the "
                             "dataflow BadFirst cannot be converted to float32: the input signature expects float32"),
    (BadThird(BAD["missing"]), "ValueError: TFDatasetInput.dataflow_to_dataset: the dataflow BadThird produced a "
                               "datapoint of 1 component, but 2 components were expected (float32, int32); got [0: "
                               "an array of float32 with shape (4, 4)]"),
], ids=["first-dtype", "third-missing"])
def test_dataflow_to_dataset_names_the_dataflow_and_component(df, error):
    """TFDatasetInput.dataflow_to_dataset (the user builds the pipeline on it): the first
    datapoint is checked fully, every one for its number of components; the error TF raises from
    the generator carries the message."""
    with tf.Graph().as_default():
        ds = TFDatasetInput.dataflow_to_dataset(df, [tf.float32, tf.int32])
        nxt = tf1.data.make_one_shot_iterator(ds).get_next()
        with tf1.Session() as sess:
            with pytest.raises(tf.errors.InvalidArgumentError) as info:
                for _ in range(4):
                    sess.run(nxt)
    assert error in str(info.value)


@pytest.mark.parametrize("dataset, match", [
    (lambda: tf.data.Dataset.from_tensor_slices((np.zeros((8, 4), "float64"), np.zeros(8, "int32"))).batch(4),
     "component 0 ('x') of the dataset's elements is float64, but the input expects float32"),
    (lambda: tf.data.Dataset.from_tensor_slices((np.zeros((8, 3), "float32"), np.zeros(8, "int32"))).batch(4),
     "component 0 ('x') of the dataset's elements has shape (None, 3), but the input signature expects (None, 4)"),
    (lambda: tf.data.Dataset.from_tensor_slices(np.zeros((8, 4), "float32")).batch(4),
     "the dataset's elements have 1 components but the model has 2 inputs ['x', 'y']"),
], ids=["dtype", "shape", "count"])
def test_tf_dataset_input_checks_the_element_spec_at_setup(dataset, match):
    with tf.Graph().as_default():
        with pytest.raises(ValueError, match=re.escape("TFDatasetInput: " + match)):
            TFDatasetInput(dataset).setup(TinyModel().inputs())


def test_staging_input_over_feed_input_prefetches_the_datapoints_in_order(logdir):
    """StagingInput(FeedInput): the prefetch before training is fed from the same iteration as
    the steps, so the model reads every datapoint once, in order; a bad first datapoint is named
    in the prefetch too."""

    class SeenX(Callback):
        def _setup_graph(self):
            self._x = self.trainer.towers.training()[0].inputs[0]
            self.seen = []

        def _before_run(self, ctx):
            return [self._x]

        def _after_run(self, ctx, values):
            self.seen.append(values.results[0])

    rec = SeenX()
    _train(StagingInput(FeedInput(tiny_dataflow())), steps=8, callbacks=[rec])
    want = [x for x, _ in tiny_dataflow()]
    assert len(rec.seen) == 16
    for got, x in zip(rec.seen, want + want):
        np.testing.assert_array_equal(got, x)

    with pytest.raises(ValueError, match=re.escape(EXPECTED["dtype"].format(src="FeedInput (inside StagingInput)")
                                                   .replace("BadThird", "BadFirst"))):
        _train(StagingInput(FeedInput(BadFirst(BAD["dtype"]))))
