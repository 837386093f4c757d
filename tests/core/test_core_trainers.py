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
