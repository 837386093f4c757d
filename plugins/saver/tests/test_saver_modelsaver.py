"""trainbus-saver: ModelSaver in real training runs (files, max_to_keep, restore, final save)."""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf

import trainbus
import trainbus.callbacks as C
from trainbus.testing import train_tiny
from trainbus.train import StopTraining

tf1 = tf.compat.v1
STEPS = 8  # tiny_dataflow(): 32 samples in batches of 4


class ReadWeights(C.Callback):
    """Records {W, b} at every trigger (right after an earlier ModelSaver saved)."""

    def __init__(self) -> None:
        self.values: list[dict[str, np.ndarray]] = []
        self.at_start: dict[str, np.ndarray] | None = None

    def _setup_graph(self):
        self.t = self.get_tensors_maybe_in_tower(["W", "b"])

    def _read(self):
        w, b = self.trainer.sess.run(self.t)
        return {"W": w, "b": b}

    def _before_train(self):
        self.at_start = self._read()

    def _trigger(self):
        self.values.append(self._read())


def _ckpts(d):
    return sorted(os.path.basename(p)[: -len(".index")] for p in glob.glob(os.path.join(d, "model-*.index")))


def test_files_state_and_max_to_keep(logdir):
    train_tiny(callbacks=[C.ModelSaver(max_to_keep=2)], max_epoch=4)
    assert _ckpts(logdir) == ["model-24", "model-32"]
    assert sorted(glob.glob(os.path.join(logdir, "model-*.trainbus.json"))) == \
        [os.path.join(logdir, f"model-{s}.trainbus.json") for s in (24, 32)]
    assert len(glob.glob(os.path.join(logdir, "graph-*.meta"))) == 1
    state = tf.train.get_checkpoint_state(str(logdir))
    assert os.path.basename(state.model_checkpoint_path) == "model-32"
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["model-24", "model-32"]
    assert "model-32" in open(os.path.join(logdir, "checkpoint")).read().split('"')  # relative paths
    assert not [f for f in os.listdir(logdir) if "tmp" in f]
    assert tf.train.latest_checkpoint(str(logdir)).endswith("model-32")


def test_checkpoint_holds_the_saved_weights_for_every_reader(logdir):
    reader = ReadWeights()
    train_tiny(callbacks=[C.ModelSaver(), reader], max_epoch=2)
    saved = reader.values[-1]
    prefix = os.path.join(logdir, "model-16")

    # tf.train.load_checkpoint
    r = tf.train.load_checkpoint(prefix)
    np.testing.assert_array_equal(r.get_tensor("W"), saved["W"])
    np.testing.assert_array_equal(r.get_tensor("b"), saved["b"])
    assert r.get_tensor("global_step") == 16
    assert {"EMA/cost", "learning_rate"} <= set(r.get_variable_to_shape_map())

    # a plain tf.compat.v1.train.Saver in a fresh graph
    g = tf.Graph()
    with g.as_default():
        w = tf1.get_variable("W", [4, 3])
        b = tf1.get_variable("b", [3])
        with tf1.Session() as sess:
            tf1.train.Saver([w, b]).restore(sess, prefix)
            np.testing.assert_array_equal(sess.run(w), saved["W"])
            np.testing.assert_array_equal(sess.run(b), saved["b"])

    # trainbus.tfutils.sessinit.SaverRestore in a new training run
    from trainbus.tfutils.sessinit import SaverRestore

    again = ReadWeights()
    tr = train_tiny(callbacks=[again], session_init=SaverRestore(prefix), starting_epoch=3, max_epoch=3)
    np.testing.assert_array_equal(again.at_start["W"], saved["W"])
    np.testing.assert_array_equal(again.at_start["b"], saved["b"])
    assert tr.global_step == 16 + STEPS


def test_callback_states_are_written_with_each_checkpoint(logdir):
    class Stateful(C.Callback):
        def _state_dict(self):
            return {"epoch": self.epoch_num}

        def _load_state_dict(self, state):
            self.loaded = state

    train_tiny(callbacks=[C.ModelSaver(), Stateful()], max_epoch=2)
    with open(os.path.join(logdir, "model-8.trainbus.json")) as f:
        assert json.load(f)["Stateful"] == {"epoch": 1}
    with open(os.path.join(logdir, "model-16.trainbus.json")) as f:
        assert json.load(f)["Stateful"] == {"epoch": 2}


def test_graceful_stop_leaves_a_final_checkpoint(logdir):
    class StopAt(C.Callback):
        def _trigger_step(self):
            if self.global_step == 13:
                raise StopTraining("enough")

    reader = ReadWeights()

    class ReadAtEnd(C.Callback):
        def _setup_graph(self):
            self.t = self.get_tensors_maybe_in_tower(["W"])[0]

        def _after_train(self):
            self.w = self.trainer.sess.run(self.t)

    end = ReadAtEnd()
    train_tiny(callbacks=[C.ModelSaver(), reader, StopAt(), end], max_epoch=5)
    assert _ckpts(logdir) == ["model-13", "model-8"]
    assert tf.train.latest_checkpoint(str(logdir)).endswith("model-13")
    np.testing.assert_array_equal(tf.train.load_checkpoint(os.path.join(logdir, "model-13")).get_tensor("W"), end.w)


def test_no_extra_checkpoint_when_the_last_state_was_saved(logdir):
    train_tiny(callbacks=[C.ModelSaver()], max_epoch=2)
    assert _ckpts(logdir) == ["model-16", "model-8"]


def test_no_final_checkpoint_after_a_failure(logdir):
    class Fail(C.Callback):
        def _trigger_step(self):
            if self.global_step == 11:
                raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        train_tiny(callbacks=[C.ModelSaver(), Fail()], max_epoch=3)
    assert _ckpts(logdir) == ["model-8"]


def test_keep_checkpoint_every_n_hours(logdir, monkeypatch):
    import trainbus_saver._saver as saver_mod

    hour = 3600.0
    clock = iter([1000.0] + [1000.0 + k * hour for k in range(1, 10)])

    class FakeTime:
        @staticmethod
        def time():
            return next(clock)

    monkeypatch.setattr(saver_mod, "time", FakeTime)
    train_tiny(callbacks=[C.ModelSaver(max_to_keep=1, keep_checkpoint_every_n_hours=1.5)], max_epoch=4)
    # saves at +1h, +2h, +3h, +4h; the one older than 1.5 h past the last kept is kept (model-16)
    assert _ckpts(logdir) == ["model-16", "model-32"]
    state = tf.train.get_checkpoint_state(str(logdir))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["model-32"]


def test_max_to_keep_zero_keeps_everything(logdir):
    train_tiny(callbacks=[C.ModelSaver(max_to_keep=0)], max_epoch=3)
    assert _ckpts(logdir) == ["model-16", "model-24", "model-8"]


def test_resumed_run_continues_the_max_to_keep_bookkeeping(logdir):
    from trainbus.tfutils.sessinit import SaverRestore

    train_tiny(callbacks=[C.ModelSaver(max_to_keep=2)], max_epoch=2)
    train_tiny(callbacks=[C.ModelSaver(max_to_keep=2)], session_init=SaverRestore(os.path.join(logdir, "model-16")),
               starting_epoch=3, max_epoch=4)
    assert _ckpts(logdir) == ["model-24", "model-32"]


def test_var_collections_and_checkpoint_dir(logdir, tmp_path):
    other = tmp_path / "ckpts"
    train_tiny(callbacks=[C.ModelSaver(checkpoint_dir=str(other), var_collections="trainable_variables")], max_epoch=1)
    names = set(tf.train.load_checkpoint(str(other / "model-8")).get_variable_to_shape_map())
    assert names == {"W", "b"}
    assert not glob.glob(os.path.join(logdir, "model-*"))


@pytest.mark.parametrize("kwargs, err", [
    (dict(max_to_keep=-1), ValueError),
    (dict(max_to_keep=2.5), ValueError),
    (dict(keep_checkpoint_every_n_hours=0), ValueError),
    (dict(var_collections=5), TypeError),
    (dict(checkpoint_dir=3), TypeError),
])
def test_bad_arguments_fail_at_construction(kwargs, err):
    with pytest.raises(err):
        C.ModelSaver(**kwargs)


def test_no_directory_is_a_clear_error():
    with pytest.raises(RuntimeError, match="set_logger_dir"):
        train_tiny(callbacks=[C.ModelSaver()], max_epoch=1)


def test_public_paths():
    import trainbus_saver

    for name in trainbus_saver.__all__:
        assert getattr(trainbus.callbacks, name) is getattr(trainbus_saver, name)
        assert getattr(trainbus, name) is getattr(trainbus_saver, name)
