"""Inference and predict towers leave SUMMARIES, MOVING_SUMMARY_OPS and UPDATE_OPS alone:
a summary or update op built in ``build_graph`` exists once, for the training tower, and
training with an InferenceRunner and the default callbacks (MergeAllSummaries, RunUpdateOps)
does not ask for the inference tower's inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import trainbus
from trainbus.callbacks import ClassificationError, InferenceRunner, ScalarStats
from trainbus.input_source import FeedInput, QueueInput
from trainbus.testing import batch_dataflow
from trainbus.tfutils.summary import MOVING_SUMMARY_OPS_KEY, add_moving_summary
from trainbus.tfutils.tower import PredictTowerContext, TowerContext, TrainTowerContext, tower_freeze_keys
from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config

tf1 = tf.compat.v1

FROZEN = (tf1.GraphKeys.SUMMARIES, MOVING_SUMMARY_OPS_KEY, tf1.GraphKeys.UPDATE_OPS)


DIGITS = Path(__file__).resolve().parents[3] / "examples" / "data" / "digits.npz"


def digits(split: str, batch: int = 32):
    with np.load(DIGITS) as d:  # the 8x8 digits the example ships
        x = (d["images"] / 16.0).astype("float32")[..., None]
        y = d["labels"].astype("int32")
    sl = slice(0, 1400) if split == "train" else slice(1400, 1720)
    return batch_dataflow([x[sl], y[sl]], batch)


class SummarizingModel(trainbus.ModelDesc):
    """A small convnet on 8x8 digits whose build_graph makes an image summary, a scalar
    summary, a moving summary and an update op, as tensorpack's visualization examples do."""

    def __init__(self) -> None:
        self.seen_training: list[bool] = []

    def inputs(self):
        return [tf.TensorSpec([None, 8, 8, 1], tf.float32, "input"), tf.TensorSpec([None], tf.int32, "label")]

    def build_graph(self, image, label):
        self.seen_training.append(self.training)
        tf1.summary.image("input-image", image, max_outputs=2)
        w = tf1.get_variable("conv/W", [3, 3, 1, 8], initializer=tf1.glorot_uniform_initializer(seed=1))
        h = tf.nn.relu(tf.nn.conv2d(image, w, 1, "SAME"))
        feat = tf.reshape(h, [-1, 8 * 8 * 8])
        fw = tf1.get_variable("fc/W", [8 * 8 * 8, 10], initializer=tf1.glorot_uniform_initializer(seed=2))
        fb = tf1.get_variable("fc/b", [10], initializer=tf1.zeros_initializer())
        logits = tf.identity(tf.matmul(feat, fw) + fb, name="logits")
        # a "running mean" updated through UPDATE_OPS, like batch normalization
        mean = tf1.get_variable("feat_mean", [], initializer=tf1.zeros_initializer(), trainable=False)
        tf1.add_to_collection(tf1.GraphKeys.UPDATE_OPS, tf1.assign(mean, tf.reduce_mean(feat), name="update_mean"))
        cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=label, logits=logits), name="cost")
        wrong = tf.cast(tf.not_equal(tf.argmax(logits, 1, output_type=tf.int32), label), tf.float32, name="wrong")
        tf1.summary.scalar("cost-scalar", cost)
        add_moving_summary(tf.reduce_mean(wrong, name="train_error"))
        return cost

    def optimizer(self):
        return tf1.train.AdamOptimizer(1e-2)


def test_summaries_in_build_graph_with_inference_runner_train_two_epochs(logdir):
    model = SummarizingModel()
    trainer = SimpleTrainer()
    runner = InferenceRunner(digits("val"), [ScalarStats("cost"), ClassificationError("wrong")])
    config = TrainConfig(model=model, data=QueueInput(digits("train")), max_epoch=2, steps_per_epoch=20,
                         callbacks=[runner])
    launch_train_with_config(config, trainer)   # crashed at the end of epoch 1 before the fix

    assert trainer.epoch_num == 2 and trainer.global_step == 40
    assert model.seen_training == [True, False]    # training tower, then InferenceTower
    g = trainer.graph
    summaries = [s.op.name for s in g.get_collection(tf1.GraphKeys.SUMMARIES)]
    assert "input-image" in summaries and "cost-scalar" in summaries
    assert not [s for s in summaries if s.startswith("InferenceTower")], summaries
    assert [u.name.split(":")[0] for u in g.get_collection(tf1.GraphKeys.UPDATE_OPS)] == ["update_mean"]
    moving = [m.name for m in g.get_collection(MOVING_SUMMARY_OPS_KEY)]
    assert moving and not [m for m in moving if m.startswith("InferenceTower")], moving
    # the inference tower was built (its ops exist) and validated
    assert g.get_operation_by_name("InferenceTower/update_mean").type in ("Assign", "AssignVariableOp")
    stats = trainer.monitors.get_history("validation_cost")
    assert len(stats) == 2 and all(np.isfinite(v) for _, v in stats)
    assert trainer.monitors.get_latest("validation_error") < 0.5


def test_tower_contexts_freeze_exactly_these_collections():
    assert tower_freeze_keys() == list(FROZEN)
    with tf.Graph().as_default() as g:
        x = tf1.placeholder(tf.float32, [None], name="x")
        with TowerContext("", is_training=True) as main:
            tf1.summary.scalar("s_main", tf.reduce_sum(x))
            tf1.add_to_collection(tf1.GraphKeys.UPDATE_OPS, tf.identity(x, name="u_main"))
            tf1.add_to_collection("mine", 1)
        with TrainTowerContext("tower1", index=1, total=2) as second:
            tf1.summary.scalar("s_second", tf.reduce_sum(x))
            tf1.add_to_collection(MOVING_SUMMARY_OPS_KEY, tf.identity(x, name="m_second"))
            tf1.add_to_collection("mine", 2)
        with PredictTowerContext("pred") as pred:
            tf1.summary.scalar("s_pred", tf.reduce_sum(x))
            tf1.add_to_collection(tf1.GraphKeys.UPDATE_OPS, tf.identity(x, name="u_pred"))
            tf1.add_to_collection(MOVING_SUMMARY_OPS_KEY, tf.identity(x, name="m_pred"))
            assert len(tf1.get_collection(tf1.GraphKeys.SUMMARIES)) == 2   # visible while building
            tf1.add_to_collection("mine", 3)
        assert [s.op.name for s in g.get_collection(tf1.GraphKeys.SUMMARIES)] == ["s_main"]
        assert [u.op.name for u in g.get_collection(tf1.GraphKeys.UPDATE_OPS)] == ["u_main"]
        assert g.get_collection(MOVING_SUMMARY_OPS_KEY) == []
        assert g.get_collection("mine") == [1, 2, 3]       # other collections are not frozen
        assert [s.op.name for s in main.get_collection_in_tower(tf1.GraphKeys.SUMMARIES)] == ["s_main"]
        assert second.get_collection_in_tower(tf1.GraphKeys.SUMMARIES) == []
        assert pred.get_collection_in_tower("mine") == [3]
        assert (main.is_training, second.is_training, pred.is_training) == (True, True, False)


def test_frozen_collections_are_restored_when_the_tower_raises():
    with tf.Graph().as_default() as g:
        with pytest.raises(ZeroDivisionError):
            with PredictTowerContext("p"):
                tf1.summary.scalar("s", tf.constant(1.0))
                1 / 0
        assert g.get_collection(tf1.GraphKeys.SUMMARIES) == []
        with TowerContext("again", is_training=False):   # the context is usable again: nothing left current
            pass


def test_predictors_add_nothing_to_the_training_collections(logdir):
    model = SummarizingModel()

    class BuildPredictors(trainbus.Callback):
        def _setup_graph(self):
            g = self.trainer.graph
            self.before = {k: list(g.get_collection(k)) for k in FROZEN}
            self.pred = self.trainer.get_predictor(["input"], ["logits"])
            self.after_online = {k: list(g.get_collection(k)) for k in FROZEN}
            # a predictor built in the training graph from the model itself
            pc = trainbus.PredictConfig(model=model, input_names=["input"], output_names=["logits"], create_graph=False)
            pc.build_inference_graph()
            self.after_config = {k: list(g.get_collection(k)) for k in FROZEN}

        def _after_train(self):
            self.out = self.pred(np.zeros((2, 8, 8, 1), "float32"))[0]

    cb = BuildPredictors()
    config = TrainConfig(model=model, data=FeedInput(digits("train")), max_epoch=1, steps_per_epoch=3, callbacks=[cb],
                         extra_callbacks=[], monitors=[])
    launch_train_with_config(config, SimpleTrainer())
    assert cb.before[tf1.GraphKeys.SUMMARIES] and cb.before[tf1.GraphKeys.UPDATE_OPS]
    assert cb.after_online == cb.before and cb.after_config == cb.before
    assert cb.out.shape == (2, 10)
    assert model.seen_training == [True, False, False]
