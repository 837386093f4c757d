"""trainbus-graph: RunOp, RunUpdateOps, ProcessTensors, DumpTensors, DumpTensorAsImage,
CheckNumerics in real training runs."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import tensorflow as tf

import trainbus
import trainbus.callbacks as C
from trainbus.testing import RecordingMonitor, train_tiny

tf1 = tf.compat.v1
STEPS = 8  # tiny_dataflow(): 32 samples in batches of 4


class Counter(C.Callback):
    """Owns a float variable ``<name>``; ``value_at_end`` is read in after_train."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.value_at_end = None

    def _setup_graph(self):
        with tf1.variable_scope(tf1.VariableScope(reuse=False, name="")):
            self.var = tf1.get_variable(self.name, initializer=0.0, trainable=False)

    def incr(self):
        return self.var.assign_add(1.0).op

    def _after_train(self):
        self.value_at_end = float(self.trainer.sess.run(self.var))


def _hooks(tr, hook):
    return [line for line in tr.describe_hooks().splitlines() if line.startswith(hook + ":")][0]


def test_run_op_before_and_as_trigger(logdir):
    ctr = Counter("ctr")
    tr = train_tiny(callbacks=[ctr, C.RunOp(ctr.incr, verbose=True)], max_epoch=2)
    assert ctr.value_at_end == 1 + 2  # once before training, once per epoch
    assert "RunOp" not in _hooks(tr, "before_run")


def test_run_op_every_step_only(logdir):
    ctr = Counter("ctr")
    tr = train_tiny(callbacks=[ctr, C.RunOp(ctr.incr, run_before=False, run_as_trigger=False, run_step=True)],
                    max_epoch=2)
    assert ctr.value_at_end == 2 * STEPS
    assert "RunOp" in _hooks(tr, "before_run")
    assert "RunOp" not in _hooks(tr, "before_train") and "RunOp" not in _hooks(tr, "trigger_epoch")


def test_run_op_scheduled_by_periodic_trigger(logdir):
    ctr = Counter("ctr")
    train_tiny(callbacks=[ctr, C.PeriodicTrigger(C.RunOp(lambda: ctr.var.assign_add(10.0).op, run_before=False),
                                                every_k_steps=4)], max_epoch=1)
    assert ctr.value_at_end == 20.0  # trigger() after global steps 4 and 8


def test_run_op_takes_an_operation_of_the_trainer_graph(logdir):
    other = tf.Graph()
    with other.as_default():
        op = tf.no_op(name="elsewhere")
    run_op = C.RunOp(op)  # an Operation is accepted at construction
    with pytest.raises(ValueError, match="not in the trainer's graph"):
        train_tiny(callbacks=[run_op], max_epoch=1)


class AddUpdateOps(C.Callback):
    """Adds to ``collection`` an op that copies the step's cost into a variable (so it only
    works when run in the same Session.run as the fed training step) and counts runs."""

    def __init__(self, collection: str) -> None:
        self.collection = collection

    def _setup_graph(self):
        cost = self.get_tensors_maybe_in_tower(["cost"])[0]
        with tf1.variable_scope(tf1.VariableScope(reuse=False, name="")):
            self.last = tf1.get_variable("last_cost", initializer=0.0, trainable=False)
            self.count = tf1.get_variable("update_count", initializer=0.0, trainable=False)
        tf1.add_to_collection(self.collection, self.last.assign(cost).op)
        tf1.add_to_collection(self.collection, self.count.assign_add(1.0).op)

    def _after_train(self):
        self.final = self.trainer.sess.run([self.last, self.count])


@pytest.mark.parametrize("collection", [None, "MY_UPDATES"])
def test_run_update_ops_runs_with_the_step(logdir, collection):
    add = AddUpdateOps(collection or tf1.GraphKeys.UPDATE_OPS)
    costs = []
    tr = train_tiny(callbacks=[add, C.ProcessTensors(["cost"], costs.append), C.RunUpdateOps(collection)],
                    max_epoch=2)
    last, count = add.final
    assert count == 2 * STEPS
    # cost depends on the fed inputs: the update ran inside the step's Session.run
    assert last == pytest.approx(float(costs[-1]), rel=1e-6)
    assert "RunUpdateOps" in _hooks(tr, "before_run")


def test_run_update_ops_empty_collection_has_no_per_step_cost(logdir):
    tr = train_tiny(callbacks=[C.RunUpdateOps()], max_epoch=1)
    assert "RunUpdateOps" not in _hooks(tr, "before_run")
    assert tr._bus.before_run is None  # the hooked session skips before_run entirely


def test_process_tensors(logdir):
    seen = []
    train_tiny(callbacks=[C.ProcessTensors(["cost", "accuracy"], lambda c, a: seen.append((float(c), float(a))))],
               max_epoch=2)
    assert len(seen) == 2 * STEPS
    assert all(c > 0 and 0 <= a <= 1 for c, a in seen)


def test_dump_tensors_npz(logdir):
    costs = []
    train_tiny(callbacks=[C.ProcessTensors(["cost"], lambda c: costs.append(float(c))), C.DumpTensors(["cost", "W"])],
               max_epoch=1)
    files = sorted(f for f in os.listdir(logdir) if f.startswith("DumpTensor-"))
    assert files == sorted(f"DumpTensor-{i}.npz" for i in range(1, STEPS + 1))
    for step in (1, STEPS):
        d = dict(np.load(os.path.join(logdir, f"DumpTensor-{step}.npz")).items())
        assert set(d) == {"cost", "W"}
        assert d["W"].shape == (4, 3)
        assert float(d["cost"]) == pytest.approx(costs[step - 1], rel=1e-6)


def test_dump_tensor_as_image(logdir):
    from PIL import Image

    class ReadW(C.Callback):
        def __init__(self):
            self.values = []

        def _setup_graph(self):
            self.w = self.get_tensors_maybe_in_tower(["W"])[0]

        def _trigger(self):
            self.values.append(self.trainer.sess.run(self.w))

    def norm(w):
        return (w - w.min()) / (w.max() - w.min() + 1e-12)

    reader, mon = ReadW(), RecordingMonitor()
    train_tiny(callbacks=[C.DumpTensorAsImage("W", map_func=norm), reader,
                          C.DumpTensorAsImage("W", prefix="pair", map_func=lambda w: [norm(w), 1 - norm(w)], scale=100)],
               monitors=[mon], max_epoch=2)
    for epoch, w in enumerate(reader.values, 1):
        img = np.asarray(Image.open(os.path.join(logdir, f"W-ep{epoch:03d}.png")))
        np.testing.assert_array_equal(img, np.clip(norm(w) * 255, 0, 255).astype("uint8"))
        second = np.asarray(Image.open(os.path.join(logdir, f"pair-ep{epoch:03d}-1.png")))
        np.testing.assert_array_equal(second, np.clip((1 - norm(w)) * 100, 0, 255).astype("uint8"))
        assert os.path.isfile(os.path.join(logdir, f"pair-ep{epoch:03d}-0.png"))
    names = [n for n, _ in mon.images]
    assert names == ["W", "pair", "W", "pair"]
    assert mon.images[1][1].shape == (2, 4, 3, 1)


def test_dump_tensor_as_image_rejects_non_images(logdir):
    with pytest.raises(ValueError, match="HW or HWC"):
        train_tiny(callbacks=[C.DumpTensorAsImage("b")], max_epoch=1)


class Poison(C.Callback):
    """Sets variable ``name`` to ``value`` in before_train (or at the first trigger)."""

    def __init__(self, name: str, value: float, when: str) -> None:
        self.name, self.value, self.when = name, value, when

    def _setup_graph(self):
        var = [v for v in tf1.global_variables() if v.op.name == self.name][0]
        self.op = var.assign(tf.fill(tf.shape(var), self.value)).op

    def _before_train(self):
        if self.when == "before_train":
            self.trainer.sess.run(self.op)

    def _trigger(self):
        if self.when == "trigger":
            self.trainer.sess.run(self.op)


def test_check_numerics_passes_on_healthy_training(logdir):
    tr = train_tiny(callbacks=[C.CheckNumerics(run_step=True)], max_epoch=1)
    assert tr.global_step == STEPS


def test_check_numerics_trigger_names_the_variable(logdir):
    with pytest.raises(tf.errors.InvalidArgumentError, match="variable 'W' has NaN or Inf"):
        train_tiny(callbacks=[Poison("W", float("nan"), "trigger"), C.CheckNumerics()], max_epoch=2)


def test_check_numerics_every_step_names_the_variable(logdir):
    with pytest.raises(tf.errors.InvalidArgumentError, match="variable 'learning_rate' has NaN or Inf"):
        train_tiny(callbacks=[Poison("learning_rate", float("inf"), "before_train"),
                              C.CheckNumerics(run_as_trigger=False, run_step=True)], max_epoch=1)


def test_default_callbacks_end_with_run_update_ops():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cbs = trainbus.DEFAULT_CALLBACKS()
    assert type(cbs[-1]).__name__ == "RunUpdateOps"


def test_public_paths():
    import trainbus_graph

    for name in trainbus_graph.__all__:
        assert getattr(trainbus.callbacks, name) is getattr(trainbus_graph, name)
        assert getattr(trainbus, name) is getattr(trainbus_graph, name)


@pytest.mark.parametrize("make, err", [
    (lambda: C.RunOp(42), TypeError),
    (lambda: C.RunUpdateOps(collection=3), TypeError),
    (lambda: C.ProcessTensors("cost", print), TypeError),
    (lambda: C.ProcessTensors(["cost"], 5), TypeError),
    (lambda: C.DumpTensors([]), TypeError),
    (lambda: C.DumpTensorAsImage(3), TypeError),
    (lambda: C.DumpTensorAsImage("W", map_func="gray"), TypeError),
])
def test_bad_arguments_fail_at_construction(make, err):
    with pytest.raises(err):
        make()


def test_dump_without_logger_dir_is_a_clear_error():
    with pytest.raises(RuntimeError, match="set_logger_dir"):
        train_tiny(callbacks=[C.DumpTensors(["cost"])], max_epoch=1)
