"""ModelExporter: frozen GraphDef and SavedModel, reloaded by plain TF in a process that
cannot import trainbus; outputs equal the trained graph's."""

import json
import os
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
import zygote  # tests/_support

from trainbus.predict import OfflinePredictor, PredictConfig
from trainbus.tfutils.export import ModelExporter
from trainbus.tfutils.varmanip import save_checkpoint_vars

tf1 = tf.compat.v1

X = np.random.RandomState(3).randn(5, 4).astype("float32")

# The child process: blocks trainbus (and its plugins) from being imported, then loads with plain TF.
CHILD = textwrap.dedent("""
    import sys, json, importlib.abc
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "trainbus" or name.startswith(("trainbus.", "trainbus_")):
                raise ImportError("trainbus is blocked in this process: " + name)
            return None
    sys.meta_path.insert(0, Block())
    sys.path[:] = [p for p in sys.path if "core/src" not in p and "/plugins/" not in p]
    try:
        import trainbus  # noqa
        raise SystemExit("trainbus must not be importable here")
    except ImportError:
        pass
    import numpy as np, tensorflow as tf
    tf1 = tf.compat.v1
    jobs, x = json.loads(sys.argv[1]), np.array(json.loads(sys.argv[2]), dtype="float32")
    out = {}
    for key, kind, path in jobs:
        if kind == "pb":
            gd = tf1.GraphDef()
            gd.ParseFromString(open(path, "rb").read())
            with tf.Graph().as_default():
                tf.import_graph_def(gd, name="")
                with tf1.Session() as s:
                    out[key] = s.run("prob:0", {"x:0": x}).tolist()
        else:
            with tf.Graph().as_default():
                with tf1.Session() as s:
                    mg = tf1.saved_model.loader.load(s, ["serve"], path)
                    sig = mg.signature_def["prediction_pipeline"]
                    out[key + "_v1"] = s.run(sig.outputs["prob"].name, {sig.inputs["x"].name: x}).tolist()
            m = tf.saved_model.load(path)
            out[key + "_v2"] = m.signatures["prediction_pipeline"](x=tf.constant(x))["prob"].numpy().tolist()
    print("RESULT" + json.dumps(out))
""")


def _tower(x):
    w = tf1.get_variable("W", [4, 3])
    b = tf1.get_variable("b", [3])
    logits = tf.matmul(x, w) + b
    # a tf.cond (an `If` op with a function library) that also reads a variable in a branch
    scaled = tf.cond(tf.reduce_sum(logits) > -1e9,
                     lambda: logits * tf1.get_variable("T", [], initializer=tf1.constant_initializer(1.0)),
                     lambda: logits)
    tf.nn.softmax(scaled, name="prob")


def _config(ckpt):
    from trainbus.tfutils.sessinit import SmartInit

    return PredictConfig(tower_func=_tower, input_signature=[tf.TensorSpec([None, 4], tf.float32, "x")],
                         input_names=["x"], output_names=["prob"], session_init=SmartInit(ckpt))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Train the graph for a few steps with a real optimizer and save a checkpoint."""
    d = tmp_path_factory.mktemp("trained")
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, [None, 4], name="x")
        _tower(x)
        prob = tf1.get_default_graph().get_tensor_by_name("prob:0")
        loss = -tf.reduce_mean(tf.math.log(prob[:, 0] + 1e-6))
        train_op = tf1.train.GradientDescentOptimizer(0.5).minimize(loss)
        saver = tf1.train.Saver()
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for _ in range(5):
                sess.run(train_op, {x: X})
            expected = sess.run(prob, {x: X})
            ckpt = saver.save(sess, str(d / "model"), global_step=5)
    return ckpt, expected


def _child(jobs):
    # forked from the worker's zygote (tests/_support/zygote.py), which has not imported trainbus; CHILD
    # itself takes trainbus off sys.path and blocks its import (what -I did for a new interpreter)
    out = zygote.run([sys.executable, "-c", CHILD, json.dumps(jobs), json.dumps(X.tolist())], timeout=240,
                     env={**os.environ, "PYTHONPATH": ""})
    assert out.returncode == 0, out.stderr[-3000:]
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT")][0]
    return {k: np.array(v) for k, v in json.loads(line[len("RESULT"):]).items()}


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    """Every export of the trained model, reloaded together in ONE trainbus-free process."""
    from trainbus.tfutils.varmanip import load_checkpoint_vars

    ckpt, expected = trained
    d = tmp_path_factory.mktemp("exports")
    ModelExporter(_config(ckpt)).export_compact(str(d / "opt.pb"), optimize=True)
    ModelExporter(_config(ckpt)).export_compact(str(d / "plain.pb"), optimize=False)
    save_checkpoint_vars(load_checkpoint_vars(ckpt), str(d / "p.npz"))   # as dump_session_params writes
    ModelExporter(_config(str(d / "p.npz"))).export_compact(str(d / "npz.pb"))
    ModelExporter(_config(ckpt)).export_serving(str(d / "served"))
    jobs = [["opt", "pb", str(d / "opt.pb")], ["plain", "pb", str(d / "plain.pb")],
            ["npz", "pb", str(d / "npz.pb")], ["served", "saved", str(d / "served")]]
    return d, expected, _child(jobs)


def test_offline_predictor_matches_trained_graph(trained):
    ckpt, expected = trained
    pred = OfflinePredictor(_config(ckpt))
    np.testing.assert_allclose(pred(X)[0], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["opt", "plain"])
def test_export_compact_reloads_in_plain_tf(exported, name):
    d, expected, results = exported
    gd = tf1.GraphDef()
    gd.ParseFromString((d / f"{name}.pb").read_bytes())
    assert not any(n.op in ("VarHandleOp", "VariableV2") for n in gd.node)   # frozen
    assert any(n.op in ("If", "StatelessIf") for n in gd.node)                 # the cond survived
    assert len(gd.library.function) > 0                                       # with its library
    np.testing.assert_allclose(results[name], expected, rtol=1e-5, atol=1e-6)


def test_export_serving_reloads_in_v1_and_tf2(exported, trained):
    d, expected, results = exported
    assert (d / "served" / "saved_model.pb").is_file() and (d / "served" / "variables").is_dir()
    np.testing.assert_allclose(results["served_v1"], expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(results["served_v2"], expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(FileExistsError, match="served"):
        ModelExporter(_config(trained[0])).export_serving(str(d / "served"))


def test_export_from_npz_params(exported):
    d, expected, results = exported
    np.testing.assert_allclose(results["npz"], expected, rtol=1e-5, atol=1e-6)


def test_model_exporter_needs_a_predict_config():
    with pytest.raises(TypeError, match="PredictConfig"):
        ModelExporter({"output_names": ["prob"]})
