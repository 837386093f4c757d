"""trainbus.models against tensorpack: variable names, shapes, order and collections recorded from
tensorpack 0.11 layers built on TensorFlow 2.21 (tf_keras), and a checkpoint written by a tensorpack
model restored into the same model built with trainbus."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from trainbus.models import (AvgPooling, BatchNorm, BatchRenorm, BNReLU, ConcatWith, Conv2D, Conv2DTranspose,
                             Deconv2D, Dropout, FixedUnPooling, FullyConnected, GlobalAvgPooling, InstanceNorm,
                             LayerNorm, Maxout, MaxPooling, PReLU, l1_regularizer, l2_regularizer)
from trainbus.tfutils import TowerContext

tf1 = tf.compat.v1
DATA = Path(__file__).resolve().parents[1] / "data" / "models_tensorpack"

# Recorded by building each call with tensorpack (in a TowerContext('', is_training=True), or
# is_training=False for keys ending in "inference") on a placeholder of the shape written x[...]:
# call -> ([(variable name, shape, trainable) in creation order], #UPDATE_OPS, #REGULARIZATION_LOSSES,
# output shape).
RECORDED = {
    "Conv2D('conv', x[2,5,5,3], 4, 3)": ([('conv/W', [3, 3, 3, 4], True), ('conv/b', [4], True)], 0, 0, [2, 5, 5, 4]),
    "Conv2D('conv', x[2,5,5,3], out_channel=4, kernel_shape=3, use_bias=False)": (
        [('conv/W', [3, 3, 3, 4], True)], 0, 0, [2, 5, 5, 4]),
    "Conv2D('conv', x[2,5,5,4], 6, 3, split=2)": (
        [('conv/W', [3, 3, 2, 6], True), ('conv/b', [6], True)], 0, 0, [2, 5, 5, 6]),
    "Conv2D('conv', x[2,5,5,3], 4, 3, dilation_rate=2)": (
        [('conv/W', [3, 3, 3, 4], True), ('conv/b', [4], True)], 0, 0, [2, 5, 5, 4]),
    "Conv2D('conv', x[2,3,5,5], 4, (3,1), data_format='NCHW')": (
        [('conv/W', [3, 1, 3, 4], True), ('conv/b', [4], True)], 0, 0, [2, 4, 5, 5]),
    "Conv2D('conv', x[2,5,5,3], 4, 3, kernel_regularizer=l2_regularizer(0.1))": (
        [('conv/W', [3, 3, 3, 4], True), ('conv/b', [4], True)], 0, 1, [2, 5, 5, 4]),
    "Conv2DTranspose('deconv', x[2,3,3,5], 4, 3, strides=2)": (
        [('deconv/W', [3, 3, 4, 5], True), ('deconv/b', [4], True)], 0, 0, [2, 6, 6, 4]),
    "Deconv2D('deconv', x[2,3,3,5], 4, 3, 2, padding='valid', use_bias=False)": (
        [('deconv/W', [3, 3, 4, 5], True)], 0, 0, [2, 7, 7, 4]),
    "FullyConnected('fc', x[3,2,2], 5)": ([('fc/W', [4, 5], True), ('fc/b', [5], True)], 0, 0, [3, 5]),
    "FullyConnected('fc', x[3,4], out_dim=5, use_bias=False)": ([('fc/W', [4, 5], True)], 0, 0, [3, 5]),
    "FullyConnected('fc', x[3,4], 5, kernel_regularizer=l2_regularizer(0.1), bias_regularizer=l1_regularizer(0.1))": (
        [('fc/W', [4, 5], True), ('fc/b', [5], True)], 0, 2, [3, 5]),
    "BatchNorm('bn', x[4,3,3,2])": (
        [('bn/gamma', [2], True), ('bn/beta', [2], True), ('bn/mean/EMA', [2], False), ('bn/variance/EMA', [2], False)],
        2, 0, [4, 3, 3, 2]),
    "BatchNorm('bn', x[4,3]) inference": (
        [('bn/gamma', [3], True), ('bn/beta', [3], True), ('bn/mean/EMA', [3], False), ('bn/variance/EMA', [3], False)],
        0, 0, [4, 3]),
    "BatchNorm('bn', x[4,2,3,3], data_format='NCHW', center=False)": (
        [('bn/gamma', [2], True), ('bn/mean/EMA', [2], False), ('bn/variance/EMA', [2], False)], 2, 0, [4, 2, 3, 3]),
    "BatchNorm('bn', x[4,3], use_scale=False, use_bias=False)": (
        [('bn/mean/EMA', [3], False), ('bn/variance/EMA', [3], False)], 2, 0, [4, 3]),
    "BatchNorm('bn', x[4,3,3,2], ema_update='internal')": (
        [('bn/gamma', [2], True), ('bn/beta', [2], True), ('bn/mean/EMA', [2], False), ('bn/variance/EMA', [2], False)],
        0, 0, [4, 3, 3, 2]),
    "BatchNorm('bn', x[4,3,3,2], ema_update='skip')": (
        [('bn/gamma', [2], True), ('bn/beta', [2], True), ('bn/mean/EMA', [2], False), ('bn/variance/EMA', [2], False)],
        0, 0, [4, 3, 3, 2]),
    "BatchNorm('bn', x[4,3,3,2], virtual_batch_size=2)": (
        [('bn/beta', [2], True), ('bn/gamma', [2], True), ('bn/mean/EMA', [2], False), ('bn/variance/EMA', [2], False)],
        0, 0, [4, 3, 3, 2]),
    "BatchRenorm('brn', x[4,3,3,2], rmax=3.0, dmax=5.0)": (
        [('brn/gamma', [2], True), ('brn/beta', [2], True), ('brn/moving_mean', [2], False),
         ('brn/moving_variance', [2], False), ('brn/moving_stddev', [2], False), ('brn/renorm_mean', [2], False),
         ('brn/renorm_stddev', [2], False)], 2, 0, [4, 3, 3, 2]),
    # BatchRenorm('brn', x[4,3], rmax=3.0, dmax=5.0, use_bias=False): tensorpack raised "ValueError: squeeze_dims[1] ...
    "BNReLU('bnrelu', x[4,3,3,2])": (
        [('bnrelu/bn/gamma', [2], True), ('bnrelu/bn/beta', [2], True), ('bnrelu/bn/mean/EMA', [2], False),
         ('bnrelu/bn/variance/EMA', [2], False)], 2, 0, [4, 3, 3, 2]),
    'BNReLU(x[4,3])': (
        [('bn/gamma', [3], True), ('bn/beta', [3], True), ('bn/mean/EMA', [3], False), ('bn/variance/EMA', [3], False)],
        2, 0, [4, 3]),
    "LayerNorm('ln', x[2,3,3,4])": ([('ln/beta', [4], True), ('ln/gamma', [4], True)], 0, 0, [2, 3, 3, 4]),
    "LayerNorm('ln', x[2,4], use_scale=False)": ([('ln/beta', [4], True)], 0, 0, [2, 4]),
    "InstanceNorm('in', x[2,4,3,3], data_format='NCHW')": (
        [('in/beta', [4], True), ('in/gamma', [4], True)], 0, 0, [2, 4, 3, 3]),
    "InstanceNorm('in', x[2,3,3,4], center=False)": ([('in/gamma', [4], True)], 0, 0, [2, 3, 3, 4]),
    "PReLU('prelu', x[2,3])": ([('prelu/alpha', [], True)], 0, 0, [2, 3]),
    # Maxout(x[2,3,3,4], 2): tensorpack raised "TypeError: Value passed to parameter 'shape' has DataType float32 not...
    # Maxout('mo', x[2,6], 3): tensorpack raised "TypeError: Value passed to parameter 'shape' has DataType float32 n...
    'ConcatWith(x[2,3], [y[2,2]], 1)': ([], 0, 0, [2, 5]),
    "FixedUnPooling('unpool', x[2,3,3,2], 2)": ([], 0, 0, [2, 6, 6, 2]),
    "FixedUnPooling('unpool', x[2,2,3,3], (2,3), data_format='NCHW')": ([], 0, 0, [2, 2, 6, 9]),
    "MaxPooling('pool', x[2,4,4,2], 2)": ([], 0, 0, [2, 2, 2, 2]),
    "AvgPooling('pool', x[2,4,4,2], 3, 1, padding='same')": ([], 0, 0, [2, 4, 4, 2]),
    "GlobalAvgPooling('gap', x[2,4,4,2])": ([], 0, 0, [2, 2]),
    "Dropout('drop', x[2,3], rate=0.5)": ([], 0, 0, [2, 3]),
    # BatchRenorm('brn', x[4,3], rmax=3.0, dmax=5.0) inference: tensorpack raised "ValueError: squeeze_dims[1] not in...
    "PReLU('prelu', x[2,3]) inference": ([('prelu/alpha', [], True)], 0, 0, [2, 3]),
    "BatchNorm('bn', x[4,3,3,2], virtual_batch_size=2) inference": (
        [('bn/gamma', [2], True), ('bn/beta', [2], True), ('bn/mean/EMA', [2], False), ('bn/variance/EMA', [2], False)],
        0, 0, [4, 3, 3, 2]),
    'Dropout(x[2,3], keep_prob=0.7)': ([], 0, 0, [2, 3]),
}

# tensorpack cannot build these on TF 2.21 (errors quoted above); their names come from reading
# tensorpack's layer code: Maxout has no variables, and BatchRenorm on a 2D input makes the same
# variables as on a 4D one (tensorpack fails squeezing its 2D output).
DERIVED = {
    "Maxout(x[2,3,3,4], 2)": ([], 0, 0, [2, 3, 3, 2]),
    "Maxout('mo', x[2,6], 3)": ([], 0, 0, [2, 2]),
    "BatchRenorm('brn', x[4,3], rmax=3.0, dmax=5.0, use_bias=False)": (
        [("brn/gamma", [3], True), ("brn/moving_mean", [3], False), ("brn/moving_variance", [3], False),
         ("brn/moving_stddev", [3], False), ("brn/renorm_mean", [3], False), ("brn/renorm_stddev", [3], False)],
        2, 0, [4, 3]),
    "BatchRenorm('brn', x[4,3], rmax=3.0, dmax=5.0) inference": (
        [("brn/gamma", [3], True), ("brn/beta", [3], True), ("brn/moving_mean", [3], False),
         ("brn/moving_variance", [3], False), ("brn/moving_stddev", [3], False), ("brn/renorm_mean", [3], False),
         ("brn/renorm_stddev", [3], False)], 0, 0, [4, 3]),
}


def p(shape):
    return tf1.placeholder(tf.float32, shape, name="x")


CALLS = {
    "Conv2D('conv', x[2,5,5,3], 4, 3)": lambda: Conv2D('conv', p([2, 5, 5, 3]), 4, 3),
    "Conv2D('conv', x[2,5,5,3], out_channel=4, kernel_shape=3, use_bias=False)":
        lambda: Conv2D('conv', p([2, 5, 5, 3]), out_channel=4, kernel_shape=3, use_bias=False),
    "Conv2D('conv', x[2,5,5,4], 6, 3, split=2)": lambda: Conv2D('conv', p([2, 5, 5, 4]), 6, 3, split=2),
    "Conv2D('conv', x[2,5,5,3], 4, 3, dilation_rate=2)": lambda: Conv2D('conv', p([2, 5, 5, 3]), 4, 3,
                                                                        dilation_rate=2),
    "Conv2D('conv', x[2,3,5,5], 4, (3,1), data_format='NCHW')":
        lambda: Conv2D('conv', p([2, 3, 5, 5]), 4, (3, 1), data_format='NCHW'),
    "Conv2D('conv', x[2,5,5,3], 4, 3, kernel_regularizer=l2_regularizer(0.1))":
        lambda: Conv2D('conv', p([2, 5, 5, 3]), 4, 3, kernel_regularizer=l2_regularizer(0.1)),
    "Conv2DTranspose('deconv', x[2,3,3,5], 4, 3, strides=2)":
        lambda: Conv2DTranspose('deconv', p([2, 3, 3, 5]), 4, 3, strides=2),
    "Deconv2D('deconv', x[2,3,3,5], 4, 3, 2, padding='valid', use_bias=False)":
        lambda: Deconv2D('deconv', p([2, 3, 3, 5]), 4, 3, 2, padding='valid', use_bias=False),
    "FullyConnected('fc', x[3,2,2], 5)": lambda: FullyConnected('fc', p([3, 2, 2]), 5),
    "FullyConnected('fc', x[3,4], out_dim=5, use_bias=False)":
        lambda: FullyConnected('fc', p([3, 4]), out_dim=5, use_bias=False),
    "FullyConnected('fc', x[3,4], 5, kernel_regularizer=l2_regularizer(0.1), bias_regularizer=l1_regularizer(0.1))":
        lambda: FullyConnected('fc', p([3, 4]), 5, kernel_regularizer=l2_regularizer(0.1),
                               bias_regularizer=l1_regularizer(0.1)),
    "BatchNorm('bn', x[4,3,3,2])": lambda: BatchNorm('bn', p([4, 3, 3, 2])),
    "BatchNorm('bn', x[4,3]) inference": lambda: BatchNorm('bn', p([4, 3])),
    "BatchNorm('bn', x[4,2,3,3], data_format='NCHW', center=False)":
        lambda: BatchNorm('bn', p([4, 2, 3, 3]), data_format='NCHW', center=False),
    "BatchNorm('bn', x[4,3], use_scale=False, use_bias=False)":
        lambda: BatchNorm('bn', p([4, 3]), use_scale=False, use_bias=False),
    "BatchNorm('bn', x[4,3,3,2], ema_update='internal')": lambda: BatchNorm('bn', p([4, 3, 3, 2]),
                                                                             ema_update='internal'),
    "BatchNorm('bn', x[4,3,3,2], ema_update='skip')": lambda: BatchNorm('bn', p([4, 3, 3, 2]), ema_update='skip'),
    "BatchNorm('bn', x[4,3,3,2], virtual_batch_size=2)": lambda: BatchNorm('bn', p([4, 3, 3, 2]),
                                                                            virtual_batch_size=2),
    "BatchNorm('bn', x[4,3,3,2], virtual_batch_size=2) inference": lambda: BatchNorm('bn', p([4, 3, 3, 2]),
                                                                                      virtual_batch_size=2),
    "BatchRenorm('brn', x[4,3,3,2], rmax=3.0, dmax=5.0)": lambda: BatchRenorm('brn', p([4, 3, 3, 2]), rmax=3.0,
                                                                              dmax=5.0),
    "BatchRenorm('brn', x[4,3], rmax=3.0, dmax=5.0, use_bias=False)":
        lambda: BatchRenorm('brn', p([4, 3]), rmax=3.0, dmax=5.0, use_bias=False),
    "BatchRenorm('brn', x[4,3], rmax=3.0, dmax=5.0) inference": lambda: BatchRenorm('brn', p([4, 3]), rmax=3.0,
                                                                                    dmax=5.0),
    "BNReLU('bnrelu', x[4,3,3,2])": lambda: BNReLU('bnrelu', p([4, 3, 3, 2])),
    "BNReLU(x[4,3])": lambda: BNReLU(p([4, 3])),
    "LayerNorm('ln', x[2,3,3,4])": lambda: LayerNorm('ln', p([2, 3, 3, 4])),
    "LayerNorm('ln', x[2,4], use_scale=False)": lambda: LayerNorm('ln', p([2, 4]), use_scale=False),
    "InstanceNorm('in', x[2,4,3,3], data_format='NCHW')": lambda: InstanceNorm('in', p([2, 4, 3, 3]),
                                                                                data_format='NCHW'),
    "InstanceNorm('in', x[2,3,3,4], center=False)": lambda: InstanceNorm('in', p([2, 3, 3, 4]), center=False),
    "PReLU('prelu', x[2,3])": lambda: PReLU('prelu', p([2, 3])),
    "PReLU('prelu', x[2,3]) inference": lambda: PReLU('prelu', p([2, 3])),
    "Maxout(x[2,3,3,4], 2)": lambda: Maxout(p([2, 3, 3, 4]), 2),
    "Maxout('mo', x[2,6], 3)": lambda: Maxout('mo', p([2, 6]), 3),
    "ConcatWith(x[2,3], [y[2,2]], 1)": lambda: ConcatWith(p([2, 3]), [tf1.zeros([2, 2])], 1),
    "FixedUnPooling('unpool', x[2,3,3,2], 2)": lambda: FixedUnPooling('unpool', p([2, 3, 3, 2]), 2),
    "FixedUnPooling('unpool', x[2,2,3,3], (2,3), data_format='NCHW')":
        lambda: FixedUnPooling('unpool', p([2, 2, 3, 3]), (2, 3), data_format='NCHW'),
    "MaxPooling('pool', x[2,4,4,2], 2)": lambda: MaxPooling('pool', p([2, 4, 4, 2]), 2),
    "AvgPooling('pool', x[2,4,4,2], 3, 1, padding='same')": lambda: AvgPooling('pool', p([2, 4, 4, 2]), 3, 1,
                                                                                padding='same'),
    "GlobalAvgPooling('gap', x[2,4,4,2])": lambda: GlobalAvgPooling('gap', p([2, 4, 4, 2])),
    "Dropout('drop', x[2,3], rate=0.5)": lambda: Dropout('drop', p([2, 3]), rate=0.5),
    "Dropout(x[2,3], keep_prob=0.7)": lambda: Dropout(p([2, 3]), keep_prob=0.7),
}
EXPECTED = {**RECORDED, **DERIVED}


def test_every_recorded_call_is_built():
    assert sorted(CALLS) == sorted(EXPECTED)


@pytest.mark.parametrize("call", sorted(EXPECTED))
def test_variables_and_collections_match_tensorpack(call):
    expected_vars, n_update, n_reg, out_shape = EXPECTED[call]
    training = not call.endswith("inference")
    with tf.Graph().as_default():
        with TowerContext("", is_training=training):
            out = CALLS[call]()
        got = [(v.op.name, v.shape.as_list(), v in tf1.trainable_variables()) for v in tf1.global_variables()]
        assert got == [(n, s, t) for n, s, t in expected_vars]
        assert len(tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)) == n_update
        assert len(tf1.get_collection(tf1.GraphKeys.REGULARIZATION_LOSSES)) == n_reg
        assert out.shape.as_list() == out_shape
        # tensorpack puts the moving statistics of the main training tower in MODEL_VARIABLES (its
        # layer code does so; under tf_keras its tf.layers path skips them, which is not followed here)
        model_vars = {v.op.name for v in tf1.model_variables()}
        assert model_vars == ({n for n, _, t in expected_vars if not t} if training else set())


def _tensorpack_fixture_model(x):
    """The model tensorpack built for tests/data/models_tensorpack (same layer calls)."""
    l = Conv2D('conv0', x, 4, 3, activation=tf.nn.relu)
    l = BatchNorm('bn0', l)
    l = PReLU('prelu', l)
    l = Conv2D('conv1', l, 4, kernel_shape=3, stride=2, use_bias=False)
    l = Deconv2D('deconv', l, 2, 3, strides=2)
    l = LayerNorm('ln', l)
    l = InstanceNorm('inorm', l)
    l = MaxPooling('pool', l, 2)
    l = BNReLU('bnrelu', l)
    l = BatchRenorm('brn', l, rmax=3.0, dmax=5.0)
    l = BatchNorm('bn_ghost', l, virtual_batch_size=2)
    l = FullyConnected('fc', l, 5)
    l = BatchNorm('bn1', l, momentum=0.8)
    return tf.identity(l, name='logits')


def test_tensorpack_checkpoint_restores_and_gives_the_same_outputs():
    """The fixture: tensorpack built the model above (a training tower and a reused inference
    tower), set every variable to random values, saved them, then recorded the inference output,
    the training output, and every non-trainable variable after one run of UPDATE_OPS with the
    training output."""
    expected = np.load(DATA / "expected.npz")
    reader = tf1.train.NewCheckpointReader(str(DATA / "model"))
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, [4, 6, 6, 3])
        with TowerContext("", is_training=True):
            y_train = _tensorpack_fixture_model(x)
        with TowerContext("infer", is_training=False), tf1.variable_scope(tf1.get_variable_scope(), reuse=True):
            y_infer = _tensorpack_fixture_model(x)
        gvars = {v.op.name: v for v in tf1.global_variables()}
        ckpt_shapes = reader.get_variable_to_shape_map()
        assert {n: v.shape.as_list() for n, v in gvars.items()} == ckpt_shapes
        upd = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)
        assert len(upd) == 8
        with tf1.Session() as sess:
            tf1.train.Saver().restore(sess, str(DATA / "model"))
            out_infer = sess.run(y_infer, {x: expected["x"]})
            out_train = sess.run(y_train, {x: expected["x"]})
            sess.run(upd + [y_train], {x: expected["x"]})
            after = sess.run({n: v for n, v in gvars.items() if "after/" + n in expected.files})
    np.testing.assert_allclose(out_infer, expected["out_infer"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out_train, expected["out_train"], rtol=1e-4, atol=1e-5)
    assert len(after) == 13
    for name, value in after.items():
        np.testing.assert_allclose(value, expected["after/" + name], rtol=1e-4, atol=1e-6, err_msg=name)
