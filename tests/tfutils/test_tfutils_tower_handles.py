"""TowerTensorHandle(s) of a real training run: access by index/name, inputs/outputs, and
get_variable returning the variable itself (its value is what sess.run gives)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

import trainbus.callbacks as cbs
from trainbus.testing import train_tiny


class _Grab(cbs.Callback):
    def _setup_graph(self):
        self.handle = self.trainer.towers[0]
        self.by_name = self.trainer.towers[self.handle.ns_name]
        self.w = self.handle.get_variable("W")
        self.ws = self.handle.get_variables(["W", "b"])

    def _after_train(self):
        self.w_value = self.trainer.sess.run(self.w)


def test_tower_handles_and_get_variable(logdir):
    g = _Grab()
    trainer = train_tiny([g], max_epoch=1, steps_per_epoch=4)
    assert g.by_name.ns_name == g.handle.ns_name
    assert len(trainer.towers.training()) == 1 and len(trainer.towers.inference()) == 0
    assert g.handle.is_training
    assert [t.name for t in g.handle.inputs] == ["x:0", "y:0"]
    assert g.handle.outputs.name == "cost:0"
    assert g.handle["x"].name == "x:0"
    # the variable itself, not its resource handle tensor
    assert isinstance(g.w, tf.Variable) and g.w.name == "W:0"
    assert [v.name for v in g.ws] == ["W:0", "b:0"]
    assert g.w_value.shape == (4, 3) and g.w_value.dtype == np.float32
    assert np.abs(g.w_value).sum() > 0  # trained away from the zero initializer
