"""InferenceRunner / DataParallelInferenceRunner and the Inferencers, in real training runs."""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

import trainbus
from trainbus.callbacks import CallbackFactory, PeriodicTrigger
from trainbus.dataflow import BatchData, DataFromGenerator, DataFromList
from trainbus.input_source import QueueInput
from trainbus.testing import RecordingMonitor, train_tiny

tf1 = tf.compat.v1
cbs = trainbus.callbacks


def val_data(n=30, batch=4, dim=4, classes=3, seed=1):
    """A validation dataflow whose last batch is smaller (30 = 7 * 4 + 2)."""
    rng = np.random.RandomState(seed)
    xs = rng.rand(n, dim).astype("float32")
    ys = rng.randint(0, classes, size=n).astype("int32")
    ds = BatchData(DataFromList([[x, y] for x, y in zip(xs, ys)], shuffle=False), batch, remainder=True)
    return ds, xs, ys


def numpy_forward(sess, xs, ys):
    variables = {v.op.name: v for v in sess.graph.get_collection("variables")}
    w, b = sess.run([variables["W"], variables["b"]])
    logits = xs @ w + b
    z = logits - logits.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    return logits, -logp[np.arange(len(ys)), ys]


class Oracle:
    """Computes, at each trigger, what the inferencers should report (numpy, same weights)."""

    def __init__(self, xs, ys, batch=4):
        self.xs, self.ys, self.batch = xs, ys, batch
        self.expected = []

    def __call__(self, cb):
        logits, ce = numpy_forward(cb.trainer.sess, self.xs, self.ys)
        wrong = (logits.argmax(1) != self.ys).astype("float64")
        bounds = list(range(0, len(self.ys), self.batch))
        batch_costs = [ce[i:i + self.batch].mean() for i in bounds]
        batch_errs = [wrong[i:i + self.batch].mean() for i in bounds]
        self.expected.append({"cost": float(np.mean(batch_costs)), "true_err": float(wrong.mean()),
                              "mean_of_batch_errs": float(np.mean(batch_errs)), "step": cb.trainer.global_step})


def test_inference_runner_true_error_and_scalar_stats(logdir):
    ds, xs, ys = val_data()
    oracle = Oracle(xs, ys)
    mon = RecordingMonitor()
    runner = cbs.InferenceRunner(ds, [cbs.ScalarStats("cost"), cbs.ClassificationError("wrong", "val_error")])
    tr = train_tiny(callbacks=[runner, CallbackFactory(trigger=oracle)], monitors=[mon], max_epoch=3)
    got = {}
    for name, val, step in mon.scalars:
        got.setdefault(name, []).append((step, val))
    assert [s for s, _ in got["validation_cost"]] == [8, 16, 24]
    assert [s for s, _ in got["val_error"]] == [8, 16, 24]
    for exp, (_, cost), (_, err) in zip(oracle.expected, got["validation_cost"], got["val_error"]):
        assert cost == pytest.approx(exp["cost"], rel=1e-5)
        assert err == pytest.approx(exp["true_err"], abs=1e-9)
    # the uneven last batch makes the true error differ from the mean of batch errors at least once
    assert any(abs(e["true_err"] - e["mean_of_batch_errs"]) > 1e-6 for e in oracle.expected)
    # the tower shares the trained variables: no new variables, tensors reachable by tower handle
    assert not [v.name for v in tr.graph.get_collection("variables") if "InferenceTower" in v.name]
    handle = tr.towers["InferenceTower"]
    assert handle.get_tensor("cost").name == "InferenceTower/cost:0"
    assert not handle.is_training
    assert runner.input.size() == 8


def test_inferencer_protocol_order_and_public_methods(logdir):
    events = []

    class Rec(cbs.Inferencer):
        def _setup_graph(self):
            events.append("setup_graph")

        def _before_train(self):
            events.append("before_train")

        def _before_inference(self):
            events.append("before_inference")

        def _get_fetches(self):
            return ["logits", "y"]

        def _on_fetches(self, results):
            logits, y = results
            assert logits.shape[1] == 3 and logits.shape[0] == y.shape[0]
            events.append(("on_fetches", logits.shape[0]))

        def _after_inference(self):
            events.append("after_inference")
            return {"rec_stat": 1.5}

        def _after_train(self):
            events.append("after_train")

    ds, _, _ = val_data(n=10)
    rec = Rec()
    assert rec.get_fetches() == ["logits:0", "y:0"]
    mon = RecordingMonitor()
    train_tiny(callbacks=[cbs.InferenceRunner(ds, rec)], monitors=[mon], max_epoch=2)
    one_round = ["before_inference", ("on_fetches", 4), ("on_fetches", 4), ("on_fetches", 2), "after_inference"]
    assert events == ["setup_graph", "before_train"] + one_round * 2 + ["after_train"]
    assert [(n, v) for n, v, _ in mon.scalars] == [("rec_stat", 1.5)] * 2


def test_binary_classification_stats_precision_recall(logdir):
    TinyModel = trainbus.testing.TinyModel

    class BinModel(TinyModel):
        def build_graph(self, x, y):
            cost = super().build_graph(x, y)
            g = tf1.get_default_graph()
            scope = g.get_name_scope()  # "" in the training tower, "InferenceTower" in the inference one
            logits = g.get_tensor_by_name(f"{scope}/logits:0" if scope else "logits:0")
            tf.cast(tf.equal(tf.argmax(logits, 1, output_type=tf.int32), 0), tf.int32, name="pred_pos")
            tf.cast(tf.equal(y, 0), tf.int32, name="label_pos")
            return cost

    ds, xs, ys = val_data(n=26, seed=3)
    seen = []

    def oracle(cb):
        logits, _ = numpy_forward(cb.trainer.sess, xs, ys)
        pred, label = logits.argmax(1) == 0, ys == 0
        tp = (pred & label).sum()
        seen.append((tp / pred.sum() if pred.sum() else 0.0, tp / label.sum() if label.sum() else 0.0))

    mon = RecordingMonitor()
    train_tiny(callbacks=[cbs.InferenceRunner(ds, cbs.BinaryClassificationStats("pred_pos", "label_pos")),
                          CallbackFactory(trigger=oracle)], monitors=[mon], model=BinModel(), max_epoch=2)
    prec = [v for n, v, _ in mon.scalars if n == "val_precision"]
    rec = [v for n, v, _ in mon.scalars if n == "val_recall"]
    assert len(prec) == len(rec) == 2
    assert prec == pytest.approx([p for p, _ in seen]) and rec == pytest.approx([r for _, r in seen])


def test_custom_tower_func_and_periodic_trigger(logdir):
    def tower(x, y):
        w = tf1.get_variable("W", [4, 3])
        tf.reduce_sum(w * 0 + 1.0, name="ones")
        tf.reduce_mean(tf.cast(y, tf.float32), name="ymean")

    ds, _, ys = val_data(n=12)
    mon = RecordingMonitor()
    runner = cbs.InferenceRunner(ds, cbs.ScalarStats(["ones", "ymean"], prefix=""), tower_name="Custom",
                                 tower_func=tower, device=-1)
    tr = train_tiny(callbacks=[PeriodicTrigger(runner, every_k_steps=4)], monitors=[mon], max_epoch=1)
    ones = [(s, v) for n, v, s in mon.scalars if n == "ones"]
    # every 4 steps plus the end of the epoch (PeriodicTrigger with every_k_steps only: steps 4 and 8)
    assert [s for s, _ in ones] == [4, 8]
    assert all(v == 12.0 for _, v in ones)
    ymean = [v for n, v, _ in mon.scalars if n == "ymean"]
    assert ymean[0] == pytest.approx(np.mean([ys[i:i + 4].mean() for i in range(0, 12, 4)]))
    # a custom tower function keeps its own towers; the tensors are in the graph under the tower name
    assert tr.graph.get_tensor_by_name("Custom/ones:0").device.lower().endswith("cpu:0")


@pytest.mark.parametrize("gpus", [2, 3, [0, 1, 2, 3]])
def test_data_parallel_equals_single_runner(logdir, gpus):
    ds1, _, _ = val_data(n=30)   # 8 batches: not a multiple of 3
    ds2, _, _ = val_data(n=30)
    mon = RecordingMonitor()
    single = cbs.InferenceRunner(ds1, [cbs.ScalarStats("cost", prefix="single"),
                                       cbs.ClassificationError("wrong", "single_err")])
    dp = cbs.DataParallelInferenceRunner(ds2, [cbs.ScalarStats("cost", prefix="dp"),
                                               cbs.ClassificationError("wrong", "dp_err")], gpus, tower_name="DPTower")
    tr = train_tiny(callbacks=[single, dp], monitors=[mon], max_epoch=2)
    vals = {}
    for n, v, _ in mon.scalars:
        vals.setdefault(n, []).append(v)
    assert len(vals["dp_err"]) == 2
    assert vals["dp_err"] == pytest.approx(vals["single_err"], abs=1e-9)
    assert vals["dp_cost"] == pytest.approx(vals["single_cost"], rel=1e-5)
    n = gpus if isinstance(gpus, int) else len(gpus)
    names = [h.ns_name for h in tr.towers.inference()]
    assert names == ["InferenceTower"] + [f"DPTower{k}" for k in range(n)]
    for k in range(n):
        assert tr.towers[f"DPTower{k}"].get_tensor("x").op.name == f"DPTower{k}/x"


def test_data_parallel_with_queue_input(logdir):
    ds, xs, ys = val_data(n=20, batch=4)  # 5 batches over 2 towers
    oracle = Oracle(xs, ys)
    mon = RecordingMonitor()
    dp = cbs.DataParallelInferenceRunner(QueueInput(ds), cbs.ClassificationError("wrong", "qerr"), 2)
    train_tiny(callbacks=[dp, CallbackFactory(trigger=oracle)], monitors=[mon], max_epoch=2)
    errs = [v for n, v, _ in mon.scalars if n == "qerr"]
    assert errs == pytest.approx([e["true_err"] for e in oracle.expected], abs=1e-9)


def test_errors_are_clear_and_early(logdir):
    ds, _, _ = val_data()
    with pytest.raises(TypeError, match="DataFlow or an InputSource"):
        cbs.InferenceRunner([1, 2, 3], [cbs.ScalarStats("cost")])
    with pytest.raises(TypeError, match="must be an Inferencer"):
        cbs.InferenceRunner(ds, ["cost"])
    with pytest.raises(ValueError, match="non-empty list"):
        cbs.InferenceRunner(ds, [])
    with pytest.raises(ValueError, match="size of the input"):
        cbs.InferenceRunner(DataFromGenerator(lambda: iter([])), [cbs.ScalarStats("cost")])
    with pytest.raises(ValueError, match="gpus"):
        cbs.DataParallelInferenceRunner(ds, [cbs.ScalarStats("cost")], 0)
    with pytest.raises(ValueError, match="twice"):
        cbs.DataParallelInferenceRunner(ds, [cbs.ScalarStats("cost")], [1, 1])
    with pytest.raises(TypeError, match="device"):
        cbs.InferenceRunner(ds, [cbs.ScalarStats("cost")], device="gpu0")
    with pytest.raises(ValueError, match="names"):
        cbs.ScalarStats([])
    with pytest.raises(TypeError, match="tensor name"):
        cbs.BinaryClassificationStats(None, "y")
    a = cbs.InferenceRunner(ds, [cbs.ScalarStats("cost")])
    b = cbs.InferenceRunner(val_data()[0], [cbs.ScalarStats("cost")])
    with pytest.raises(ValueError, match="own tower_name"):
        train_tiny(callbacks=[a, b], max_epoch=1)
    with pytest.raises(KeyError, match="no tensor 'nosuch:0'"):
        train_tiny(callbacks=[cbs.InferenceRunner(val_data()[0], [cbs.ScalarStats("nosuch")])], max_epoch=1)


def test_inferencer_value_checks():
    ce = cbs.ClassificationError("wrong", "e")
    ce.before_inference()
    with pytest.raises(ValueError, match="vector"):
        ce.on_fetches([np.float32(0.5)])
    ce.on_fetches([np.array([1, 0, 0, 1])])
    ce.on_fetches([np.array([1, 1])])
    assert ce.after_inference() == {"e": pytest.approx(4 / 6)}
    bs = cbs.BinaryClassificationStats("p", "l", prefix="t")
    bs.before_inference()
    bs.on_fetches([np.array([1, 1, 0, 0]), np.array([1, 0, 1, 0])])
    bs.on_fetches([np.array([1]), np.array([1])])
    assert bs.after_inference() == {"t_precision": pytest.approx(2 / 3), "t_recall": pytest.approx(2 / 3)}
    with pytest.raises(ValueError, match="only 0 and 1"):
        bs.on_fetches([np.array([2]), np.array([1])])
    ss = cbs.ScalarStats(["a", "b"], prefix="")
    ss.before_inference()
    ss.on_fetches([1.0, 2.0])
    ss.on_fetches([3.0, 6.0])
    assert ss.after_inference() == {"a": 2.0, "b": 4.0}
    with pytest.raises(ValueError, match="scalar"):
        ss.on_fetches([np.zeros(3), 1.0])
