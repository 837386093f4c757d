"""``trainbus.contrib.keras.KerasModel(...).fit(validation_data=...)``: a tf_keras model trained
through the default trainer (``SimpleTrainer`` on one device) and validated after each epoch by
this distribution's ``InferenceRunner`` (every loss and metric over the validation set); the
learning phase is fed while training, batch norm's statistics move, the monitors get the numbers."""

import json

import numpy as np
import pytest
import tensorflow as tf

from trainbus.contrib.keras import KerasModel, KerasPhaseCallback
from trainbus.input_source import QueueInput
from trainbus.train import SimpleTrainer

from kerasparts import SIG_IN, SIG_OUT, Record, model_func, stripe_batches

tf1 = tf.compat.v1


def test_keras_model_fit_with_validation(tmp_path):
    from trainbus.utils import logger

    logger.set_logger_dir(str(tmp_path / "log"), action="d")
    tf1.set_random_seed(1)
    train = stripe_batches(256, 0, 16)
    val = stripe_batches(64, 1, 32)
    rec = Record()
    M = KerasModel(model_func, input_signature=SIG_IN, target_signature=SIG_OUT, input=QueueInput(train))
    M.compile(optimizer=tf1.train.AdamOptimizer(1e-2), loss="categorical_crossentropy",
              metrics="categorical_accuracy")
    assert isinstance(M.trainer, SimpleTrainer)
    M.fit(validation_data=val, max_epoch=3, callbacks=[rec])

    # the model uses dropout/batch norm: the learning phase is fed while training
    phase = [cb for cb in rec.callbacks if isinstance(cb, KerasPhaseCallback)]
    assert len(phase) == 1 and phase[0]._isTrain is True
    assert len(rec.scalars) == 3
    first, last = rec.scalars[0], rec.scalars[-1]
    # validation statistics of every loss and metric over the validation set, after each epoch
    assert last["validation_categorical_accuracy"] > 0.9       # the stripes are easy
    assert last["validation_categorical_crossentropy"] < first["validation_categorical_crossentropy"] + 0.05
    # inference towers leave out the regularization (as the training-time total includes it)
    assert last["validation_total_loss"] == pytest.approx(last["validation_categorical_crossentropy"])
    assert last["total_loss"] > last["categorical_crossentropy"] > 0
    assert last["regularize_cost"] > 0
    # the monitors wrote the same numbers to stats.json
    stats = json.loads((tmp_path / "log" / "stats.json").read_text())
    assert stats[-1]["epoch_num"] == 3
    assert stats[-1]["validation_categorical_accuracy"] == pytest.approx(last["validation_categorical_accuracy"])
    # batch norm's statistics moved: its update ops ran with the training steps (learning phase fed)
    assert len(rec.update_ops) == 2
    assert not np.allclose(rec.mean0, rec.mean1)
    assert all("moving" not in n for n in rec.trainable)
    assert any("batch_normalization/gamma" in n for n in rec.trainable)
