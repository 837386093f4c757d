"""SmartInit: built-in formats, errors, a third-party format plugin, and a real training run."""

import json
import os
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf

from trainbus.bus import registry as _registry
from trainbus.tfutils import sessinit

tf1 = tf.compat.v1


@pytest.fixture()
def ckpt(tmp_path):
    with tf.Graph().as_default():
        tf1.get_variable("W", initializer=np.full((4, 3), 0.25, "float32"))
        tf1.get_variable("b", initializer=np.array([1.0, 2.0, 3.0], "float32"))
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            return tf1.train.Saver().save(sess, str(tmp_path / "model"), global_step=3)


def _values_after(init):
    with tf.Graph().as_default():
        tf1.get_variable("W", [4, 3], initializer=tf1.zeros_initializer())
        tf1.get_variable("b", [3], initializer=tf1.zeros_initializer())
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            init._setup_graph()
            init._run_init(sess)
            return {v.op.name: sess.run(v) for v in tf1.global_variables()}


def test_smartinit_builtin_formats(ckpt, tmp_path):
    SmartInit = sessinit.SmartInit
    assert isinstance(SmartInit(None), sessinit.JustCurrentSession)
    assert isinstance(SmartInit(""), sessinit.JustCurrentSession)
    s = SmartInit(ckpt)
    assert type(s) is sessinit.SaverRestore and s.checkpoint_path == ckpt
    assert type(SmartInit(os.path.dirname(ckpt))) is sessinit.SaverRestore
    assert type(SmartInit(ckpt, ignore_mismatch=True)) is sessinit.SaverRestoreRelaxed
    np.testing.assert_array_equal(_values_after(s)["b"], [1, 2, 3])

    d = SmartInit({"b": np.array([4.0, 5.0, 6.0], "float32")})
    assert type(d) is sessinit.DictRestore
    np.testing.assert_array_equal(_values_after(d)["b"], [4, 5, 6])

    np.savez(tmp_path / "p.npz", W=np.ones((4, 3), "float32"))
    n = SmartInit(str(tmp_path / "p.npz"))
    assert type(n) is sessinit.DictRestore
    np.testing.assert_array_equal(_values_after(n)["W"], np.ones((4, 3)))

    chain = SmartInit([ckpt, {"b": np.zeros(3, "float32") - 1}, None])
    assert type(chain) is sessinit.ChainInit
    vals = _values_after(chain)
    np.testing.assert_array_equal(vals["W"], np.full((4, 3), 0.25))
    np.testing.assert_array_equal(vals["b"], [-1, -1, -1])


def test_smartinit_errors_name_the_object_and_what_was_tried(tmp_path):
    missing = str(tmp_path / "nope" / "model-9")
    with pytest.raises(FileNotFoundError) as e:
        sessinit.SmartInit(missing)
    assert missing in str(e.value) and "trainbus-sessinit" in str(e.value)
    weird = tmp_path / "weights.weird"
    weird.write_text("x")
    with pytest.raises(ValueError) as e:
        sessinit.SmartInit(str(weird))
    assert "weights.weird" in str(e.value) and "asked" in str(e.value)
    with pytest.raises(TypeError, match="of type int"):
        sessinit.SmartInit(12345)


def test_smartinit_shape_mismatch_raises_unless_ignored(tmp_path):
    bad = {"W": np.zeros((2, 2), "float32")}
    with pytest.raises(ValueError, match="'W'"):
        _values_after(sessinit.SmartInit(bad))
    vals = _values_after(sessinit.SmartInit(bad, ignore_mismatch=True))
    np.testing.assert_array_equal(vals["W"], np.zeros((4, 3)))


@pytest.fixture()
def json_format_plugin(tmp_path):
    """A fake installed distribution whose ambient plugin loads .json files {var: list}."""
    site = tmp_path / "site"
    pkg = site / "tb_jsoninit"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        import json
        import numpy as np
        import trainbus

        CALLS = []

        @trainbus.hookimpl
        def sessinit_for(obj, ignore_mismatch):
            CALLS.append(obj)
            if isinstance(obj, str) and obj.endswith(".json"):
                from trainbus.tfutils.sessinit import DictRestore
                with open(obj) as f:
                    data = json.load(f)
                return DictRestore({k: np.asarray(v, "float32") for k, v in data.items()}, ignore_mismatch=ignore_mismatch)
            return None
    """))
    info = site / "tb_jsoninit-0.3.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tb-jsoninit\nVersion: 0.3.0\n"
                                   "Keywords: trainbus-plugin\n")
    (info / "entry_points.txt").write_text("[trainbus.plugin_api]\n1 = tb_jsoninit\n[trainbus.plugins]\njsoninit = tb_jsoninit\n")
    sys.path.insert(0, str(site))
    _registry.clear_cache()
    try:
        yield
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("tb_jsoninit", None)
        _registry.clear_cache()
        from trainbus.bus import manager as _manager

        _manager._load_ambient_cached.cache_clear()


def test_third_party_plugin_adds_a_format(json_format_plugin, tmp_path, ckpt):
    f = tmp_path / "weights.json"
    f.write_text(json.dumps({"b": [9.0, 8.0, 7.0]}))
    init = sessinit.SmartInit(str(f))
    assert type(init) is sessinit.DictRestore
    np.testing.assert_array_equal(_values_after(init)["b"], [9, 8, 7])
    import tb_jsoninit

    assert str(f) in tb_jsoninit.CALLS
    # built-in formats still answer; a list mixes both
    chain = sessinit.SmartInit([ckpt, str(f)])
    vals = _values_after(chain)
    np.testing.assert_array_equal(vals["W"], np.full((4, 3), 0.25))
    np.testing.assert_array_equal(vals["b"], [9, 8, 7])


def test_json_unknown_without_the_plugin(tmp_path):
    f = tmp_path / "weights.json"
    f.write_text("{}")
    with pytest.raises(ValueError, match="weights.json"):
        sessinit.SmartInit(str(f))


def test_smartinit_in_training_restores_weights_and_callback_state(logdir, tmp_path):
    """Train, save with a Saver + callback states, then start a new training from SmartInit(ckpt)."""
    from trainbus.callbacks import Callback
    from trainbus.testing import train_tiny
    from trainbus.checkpoint import write_callback_states

    saved = {}

    class Counter(Callback):
        def __init__(self):
            self.count = 0
            self.loaded = None

        def _setup_graph(self):
            self.saver = tf1.train.Saver()
            self.vs = {v.op.name: v for v in tf1.global_variables() if v.op.name in ("W", "b", "global_step")}

        def _before_train(self):
            saved["start"] = {n: self.trainer.sess.run(v) for n, v in self.vs.items()}

        def _trigger_step(self):
            self.count += 1

        def _after_train(self):
            if "prefix" not in saved:
                saved["prefix"] = self.saver.save(self.trainer.sess, str(tmp_path / "ck" / "model"),
                                                  global_step=self.trainer.global_step)
                saved["end"] = {n: self.trainer.sess.run(v) for n, v in self.vs.items()}
                write_callback_states(saved["prefix"], self.trainer.callback_states())

        def _state_dict(self):
            return {"count": self.count}

        def _load_state_dict(self, d):
            self.loaded = d

    train_tiny(callbacks=[Counter()], max_epoch=1, steps_per_epoch=3)
    assert saved["end"]["global_step"] == 3
    cb = Counter()
    train_tiny(callbacks=[cb], max_epoch=1, steps_per_epoch=1, session_init=sessinit.SmartInit(saved["prefix"]))
    np.testing.assert_array_equal(saved["start"]["W"], saved["end"]["W"])
    np.testing.assert_array_equal(saved["start"]["b"], saved["end"]["b"])
    assert saved["start"]["global_step"] == 3
    assert cb.loaded == {"count": 3}


def test_get_model_loader_is_tensorpacks_older_name_for_smartinit(ckpt):
    from trainbus.tfutils.sessinit import get_model_loader

    assert get_model_loader is sessinit.SmartInit
    loader = get_model_loader(ckpt)
    assert type(loader) is sessinit.SaverRestore
    np.testing.assert_array_equal(_values_after(loader)["W"], np.full((4, 3), 0.25, "float32"))
