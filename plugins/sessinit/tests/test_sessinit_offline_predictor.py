"""An ``OfflinePredictor`` of a trained model, restored with ``SmartInit`` from the checkpoint
``ModelSaver`` wrote, feeds ``x`` by name and computes what the checkpoint's weights give."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

import trainbus
from trainbus.callbacks import ModelSaver
from trainbus.input_source import QueueInput
from trainbus.testing import TinyModel, tiny_dataflow
from trainbus.train import SimpleTrainer, TrainConfig, launch_train_with_config


def test_offline_predictor_of_the_trained_model_feeds_x_by_name(logdir):
    trainer = SimpleTrainer()
    launch_train_with_config(TrainConfig(model=TinyModel(), data=QueueInput(tiny_dataflow()), max_epoch=1,
                                         steps_per_epoch=4, callbacks=[ModelSaver()], extra_callbacks=[],
                                         monitors=[]), trainer)
    ckpt = tf.train.latest_checkpoint(str(logdir))
    reader = tf.train.load_checkpoint(ckpt)
    w, b = reader.get_tensor("W"), reader.get_tensor("b")
    assert not np.allclose(w, 0)
    pred = trainbus.OfflinePredictor(trainbus.PredictConfig(
        model=TinyModel(), session_init=trainbus.tfutils.sessinit.SmartInit(ckpt), input_names=["x"],
        output_names=["logits"]))
    assert [t.name for t in pred.input_tensors] == ["x:0"]
    xs = np.random.RandomState(3).rand(5, 4).astype("float32")
    np.testing.assert_allclose(pred(xs)[0], xs @ w + b, rtol=1e-5, atol=1e-6)
