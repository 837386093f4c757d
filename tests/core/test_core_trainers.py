"""The one-device trainers are the core's own (``trainbus.train.simple``): found under every
name tensorpack gives them, trained with nothing else installed, and never shadowed by the
retired ``trainbus-trainers-single`` distribution left installed from an older checkout."""

from __future__ import annotations

import sys

import numpy as np

import trainbus
import trainbus.train
from trainbus.bus.report import plugin_report
from trainbus.testing import TinyModel, train_tiny
from trainbus.train import simple

from fakedist import make_dist, on_path

NAMES = ("SimpleTrainer", "NoOpTrainer", "QueueInputTrainer")


def test_found_as_trainbus_train_names_and_as_tensorpacks_module_path():
    from trainbus.train.trainers import NoOpTrainer, SimpleTrainer

    assert SimpleTrainer is trainbus.train.SimpleTrainer is trainbus.SimpleTrainer is simple.SimpleTrainer
    assert NoOpTrainer is trainbus.train.NoOpTrainer is simple.NoOpTrainer
    assert trainbus.train.QueueInputTrainer is simple.QueueInputTrainer
    assert all(trainbus.train.__all__.count(n) == 1 for n in NAMES)


def test_an_older_trainers_single_left_installed_is_never_loaded_nor_a_conflict(tmp_path):
    old = make_dist(tmp_path / "old", "trainbus-trainers-single", "0.1.0",
                    {"trainbus.plugin_api": {"1": "trainbus_trainers_single"},
                     "trainbus.train": {n: f"trainbus_trainers_single:{n}" for n in NAMES}},
                    {"trainbus_trainers_single": "raise RuntimeError('the retired distribution was imported')\n"})
    with on_path(old):
        for name in NAMES:
            assert getattr(trainbus.train, name) is getattr(simple, name)
        from trainbus.train.trainers import SimpleTrainer

        assert SimpleTrainer is simple.SimpleTrainer
        assert all(trainbus.train.__all__.count(n) == 1 for n in NAMES)
        rec = next(r for r in plugin_report(try_load=False) if r["name"] == "trainbus-trainers-single")
        assert rec["errors"] == []
        assert "trainbus_trainers_single" not in sys.modules


def test_noop_trainer_runs_only_the_callbacks():
    from trainbus.testing import HookRecorder

    class ReadW(HookRecorder):
        def _setup_graph(self):
            super()._setup_graph()
            self.var = next(v for v in self.graph.get_collection("variables") if v.op.name == "W")

        def _after_train(self):
            super()._after_train()
            self.w = self.trainer.sess.run(self.var)

    rec = ReadW()
    tr = train_tiny(callbacks=[rec], trainer=simple.NoOpTrainer(), model=TinyModel(), max_epoch=2, steps_per_epoch=3)
    assert tr.global_step == 6 and rec.hooks().count("after_run") == 6
    assert np.array_equal(rec.w, np.zeros((4, 3), "float32"))  # no training step ran


def test_a_variable_without_gradient_is_left_out_of_the_update_with_a_warning(caplog):
    """The trainer drops ``(None, var)`` pairs as tensorpack's ``FilterNoneGrad`` does: it names
    the variable in a warning and trains the others; a model where every variable has a gradient
    gets no warning and does not import the gradient processors for it."""
    import logging

    import tensorflow as tf

    import zygote  # tests/_support: a process of its own that imported TensorFlow and nothing of trainbus

    from trainbus.testing import TinyModel

    tf1 = tf.compat.v1

    class WithUnused(TinyModel):
        def build_graph(self, x, y):
            tf1.get_variable("unused", [2], initializer=tf1.ones_initializer())
            return super().build_graph(x, y)

    class ReadVars(trainbus.callbacks.Callback):
        def _after_train(self):
            by_name = {v.op.name: v for v in tf1.global_variables()}
            self.unused, self.w = self.trainer.sess.run([by_name["unused"], by_name["W"]])

    reader = ReadVars()
    with caplog.at_level(logging.WARNING, logger="trainbus"):
        train_tiny([reader], model=WithUnused(), max_epoch=1, steps_per_epoch=3)
    warnings = [r.getMessage() for r in caplog.records if "No gradient" in r.getMessage()]
    assert warnings == ["No gradient w.r.t 1 trainable variables: unused"]
    assert reader.unused.tolist() == [1.0, 1.0]  # kept out of the update
    assert np.abs(reader.w).sum() > 0  # the others trained

    code = ("import sys\nfrom trainbus.testing import train_tiny\ntrain_tiny(max_epoch=1, steps_per_epoch=2)\n"
            "print('GRADPROC', 'trainbus.tfutils.gradproc' in sys.modules)\n")
    out = zygote.run([sys.executable, "-c", code], timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "GRADPROC False" in out.stdout
    assert "No gradient" not in out.stdout + out.stderr
