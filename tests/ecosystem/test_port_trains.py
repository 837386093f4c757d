"""Two tensorpack scripts, ported by ``trainbus port`` (:func:`trainbus.port.port_tree`), really
train with trainbus and its standard plugins (their ``BatchData``/``DataFromList`` and the default
callbacks and monitors), while the unported ones do not run on TensorFlow 2.21. Subprocesses: the
compat route switches the whole process to TF 1 behaviour, and Keras 2 must be chosen before
TensorFlow is imported."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import zygote  # tests/_support

from trainbus.port import port_tree


TRAIN_COMPAT = """\
    import numpy as np
    import tensorflow as tf
    from tensorpack import *
    from tensorpack.dataflow import BatchData, DataFromList

    class Model(ModelDesc):
        def inputs(self):
            return [tf.placeholder(tf.float32, (None, 6), 'x'), tf.placeholder(tf.int32, (None,), 'y')]

        def build_graph(self, x, y):
            h = tf.layers.dense(x, 8, activation=tf.nn.relu,
                                kernel_regularizer=tf.contrib.layers.l2_regularizer(1e-3))
            logits = tf.contrib.layers.fully_connected(h, 3, activation_fn=None)
            assert logits.get_shape()[1].value == 3
            cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            return tf.add(cost, tf.losses.get_regularization_loss(), name='total_cost')

        def optimizer(self):
            return tf.train.AdamOptimizer(1e-2)

    if __name__ == '__main__':
        rng = np.random.RandomState(0)
        data = [[rng.randn(6).astype('float32'), rng.randint(3)] for _ in range(64)]
        logger.set_logger_dir(LOGDIR, action='d')
        config = TrainConfig(model=Model(), dataflow=BatchData(DataFromList(data), 16), max_epoch=1,
                             steps_per_epoch=3, callbacks=[])
        launch_train_with_config(config, SimpleTrainer())
        print('TRAINED', tf.train.get_global_step is not None)
"""

TRAIN_RNN = """\
    import numpy as np
    from tensorpack import tfv1 as tf
    from tensorpack import *
    import tensorflow.contrib.slim as slim
    rnn = tf.contrib.rnn
    SEQ = 5

    class Model(ModelDesc):
        def inputs(self):
            return [tf.TensorSpec((None, SEQ, 4), tf.float32, 'x'), tf.TensorSpec((None,), tf.int32, 'y')]

        def build_graph(self, x, y):
            cell = rnn.MultiRNNCell([rnn.LSTMBlockCell(8), rnn.BasicLSTMCell(8)])
            outs, _ = rnn.static_rnn(cell, tf.unstack(x, axis=1), dtype=tf.float32)
            logits = slim.fully_connected(outs[-1], 2, activation_fn=None, scope='logits')
            return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits),
                                  name='cost')

        def optimizer(self):
            return tf.train.GradientDescentOptimizer(0.1)

    if __name__ == '__main__':
        rng = np.random.RandomState(1)
        data = [[rng.randn(SEQ, 4).astype('float32'), rng.randint(2)] for _ in range(32)]
        logger.set_logger_dir(LOGDIR, action='d')
        config = TrainConfig(model=Model(), dataflow=BatchData(DataFromList(data), 8), max_epoch=1,
                             steps_per_epoch=2, callbacks=[])
        launch_train_with_config(config, SimpleTrainer())
        print('TRAINED')
"""


@pytest.mark.parametrize("script, route", [(TRAIN_COMPAT, "compat"), (TRAIN_RNN, "v1")])
def test_ported_scripts_train_with_trainbus(tmp_path, script, route):
    logdir = tmp_path / "log"
    text = textwrap.dedent(script).replace("LOGDIR", repr(str(logdir)))
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(text)
    src = tmp_path / "src"
    report = port_tree(src, tmp_path / "dst")
    assert report.exit_code == 0, report.problems
    assert report.files[0].route == route
    env = {k: v for k, v in os.environ.items() if k != "TF_USE_LEGACY_KERAS"}
    # a new interpreter: the ported file picks Keras 2 (TF_USE_LEGACY_KERAS) before TensorFlow is imported
    r = subprocess.run([sys.executable, "train.py"], cwd=tmp_path / "dst", capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    assert "TRAINED" in r.stdout
    # the unported script does not run on TensorFlow 2.21
    r0 = zygote.run([sys.executable, "train.py"], cwd=tmp_path / "src", timeout=600, env=env)
    assert r0.returncode != 0
    assert any(logdir.glob("checkpoint")) or any(logdir.glob("*.index")) or (logdir / "stats.json").exists()
