"""A Keras model (``trainbus.contrib.keras.KerasModel``) on two towers of
``SyncMultiGPUTrainerParameterServer`` shares one set of variables; the replicated trainer,
which would copy them per tower, is refused."""

import numpy as np
import pytest
import tensorflow as tf

from trainbus.contrib.keras import KerasModel

from kerasparts import SIG_IN, SIG_OUT, Record, model_func, stripe_batches

tf1 = tf.compat.v1


def test_two_towers_share_one_model_and_replicated_is_refused():
    from trainbus.train import SyncMultiGPUTrainerParameterServer, SyncMultiGPUTrainerReplicated

    train = stripe_batches(64, 0, 16)
    with tf.Graph().as_default() as g:
        rec = Record(keys=("total_loss", "categorical_accuracy"))
        M = KerasModel(model_func, SIG_IN, SIG_OUT, input=train, trainer=SyncMultiGPUTrainerParameterServer(2))
        M.compile(optimizer=tf1.train.AdamOptimizer(1e-2), loss="categorical_crossentropy",
                  metrics="categorical_accuracy")
        M.fit(max_epoch=1, steps_per_epoch=2, callbacks=[rec])
        # one set of Keras variables: the second tower called the first tower's model
        names = sorted(v.op.name for v in g.get_collection(tf1.GraphKeys.TRAINABLE_VARIABLES))
        assert names == ["batch_normalization/beta", "batch_normalization/gamma", "conv2d/bias", "conv2d/kernel",
                         "dense/bias", "dense/kernel", "dense_1/bias", "dense_1/kernel"]
        assert len(rec.update_ops) == 2                      # the main tower's batch-norm updates only
        assert g.get_tensor_by_name("tower1/categorical_crossentropy:0") is not None
        assert not np.allclose(rec.mean0, rec.mean1)
        assert rec.scalars[0]["total_loss"] > 0
    with tf.Graph().as_default():
        M = KerasModel(model_func, SIG_IN, SIG_OUT, input=train, trainer=SyncMultiGPUTrainerReplicated(2))
        with pytest.raises(TypeError, match="SyncMultiGPUTrainerParameterServer"):
            M.compile(optimizer=tf1.train.AdamOptimizer(1e-2), loss="categorical_crossentropy")
