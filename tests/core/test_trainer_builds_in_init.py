"""A trainer subclass that builds its graph in its own ``__init__`` (tensorpack's GAN trainers do:
``GANTrainer(input, model).train_with_defaults(...)``, never through ``launch_train_with_config``)
builds in graph mode, although eager execution is on in this process."""

import numpy as np
import tensorflow as tf

from trainbus.callbacks import Callback
from trainbus.input_source import QueueInput
from trainbus.testing import tiny_dataflow
from trainbus.tfutils.tower import TowerContext, TowerFunc
from trainbus.train import TowerTrainer

tf1 = tf.compat.v1


class _TwoLossModel:
    """Two linear maps trained by two optimizers, like a GAN's generator and discriminator."""

    def inputs(self):
        return [tf.TensorSpec((None, 4), tf.float32, "x"), tf.TensorSpec((None,), tf.int32, "y")]

    def build_graph(self, x, y):
        with tf1.variable_scope("gen"):
            wg = tf1.get_variable("W", [4, 4], initializer=tf1.ones_initializer())
        with tf1.variable_scope("discrim"):
            wd = tf1.get_variable("W", [4, 1], initializer=tf1.ones_initializer())
        self.g_loss = tf.reduce_mean(tf.square(tf.matmul(x, wg)), name="g_loss")
        self.d_loss = tf.reduce_mean(tf.square(tf.matmul(x, wd) - tf.cast(y[:, None], tf.float32)), name="d_loss")


class _InitBuildingTrainer(TowerTrainer):
    def __init__(self, input, model):
        super().__init__()
        assert not tf.executing_eagerly()  # the constructor runs in the trainer's graph
        self.register_callback(input.setup(model.inputs()))
        self.tower_func = TowerFunc(model.build_graph, model.inputs())
        with TowerContext("", is_training=True):
            self.tower_func(*input.get_input_tensors())
        opt = tf1.train.GradientDescentOptimizer(0.01)
        gvars = tf1.trainable_variables("gen")
        dvars = tf1.trainable_variables("discrim")
        with tf.control_dependencies([opt.minimize(model.g_loss, var_list=gvars, name="g_op")]):
            self.train_op = opt.minimize(model.d_loss, var_list=dvars, name="d_op")


def test_trainer_building_in_its_init_trains_with_eager_execution_on():
    assert tf.executing_eagerly()
    model = _TwoLossModel()
    trainer = _InitBuildingTrainer(QueueInput(tiny_dataflow(n=16, batch=4, dim=4)), model)
    assert model.g_loss.graph is trainer.graph and trainer.train_op.graph is trainer.graph
    assert tf.executing_eagerly()  # nothing leaked out of the constructor
    seen = {}

    class ReadWeights(Callback):
        def _after_train(self):
            with self.trainer.graph.as_default():
                for v in tf1.global_variables():
                    seen[v.op.name] = self.trainer.sess.run(v)

    trainer.train_with_defaults(steps_per_epoch=3, max_epoch=2, callbacks=[ReadWeights()], extra_callbacks=[], monitors=[])
    assert trainer.global_step == 6
    # both optimizers ran: each set of weights moved away from its initial ones
    assert not np.allclose(seen["gen/W"], 1.0) and not np.allclose(seen["discrim/W"], 1.0)


def test_two_trainers_in_one_process_get_their_own_graphs():
    a = _InitBuildingTrainer(QueueInput(tiny_dataflow(n=8, batch=4, dim=4)), _TwoLossModel())
    b = _InitBuildingTrainer(QueueInput(tiny_dataflow(n=8, batch=4, dim=4)), _TwoLossModel())
    assert a.graph is not b.graph
    names = {op.name for op in b.graph.get_operations()}
    assert "gen/W" in names and "gen_1/W" not in names  # no name clash with a's variables
    assert np.all([op.graph is b.graph for op in b.graph.get_operations()])
