"""SmartInit with plugin autoloading off, with the built-in plugin disabled, with a plugin that
returns something else than a SessionInit, and what its errors list."""

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
        tf1.get_variable("b", initializer=np.array([1.0, 2.0, 3.0], "float32"))
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            return tf1.train.Saver().save(sess, str(tmp_path / "model"), global_step=3)


def _fresh_managers():
    from trainbus.bus import manager as _manager

    _registry.clear_cache()
    _manager._load_ambient_cached.cache_clear()


class Repr:
    def __init__(self, n):
        self.n = n

    def __repr__(self):
        return "r" * self.n


def test_without_plugin_autoloading_the_builtin_formats_still_work(ckpt, tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINBUS_DISABLE_PLUGIN_AUTOLOAD", "1")
    init = sessinit.SmartInit(ckpt)
    assert type(init) is sessinit.SaverRestore and init.path == ckpt
    assert type(sessinit.SmartInit({"b": np.zeros(3)})) is sessinit.DictRestore
    weird = tmp_path / "weights.weird"
    weird.write_text("x")
    with pytest.raises(ValueError) as e:
        sessinit.SmartInit(str(weird))
    assert "(asked: trainbus-sessinit (built-in formats))" in str(e.value)


def test_with_the_builtin_plugin_disabled_nothing_loads_a_checkpoint(ckpt, monkeypatch):
    monkeypatch.setenv("TRAINBUS_DISABLE_PLUGINS", "sessinit")
    with pytest.raises(ValueError) as e:
        sessinit.SmartInit(ckpt)
    msg = str(e.value)
    assert repr(ckpt) in msg and "built-in formats)" not in msg
    assert "the built-in plugin 'sessinit': it is disabled" in msg


def test_errors_list_only_the_plugins_that_answer_sessinit_for(tmp_path):
    weird = tmp_path / "weights.weird"
    weird.write_text("x")
    with pytest.raises(ValueError) as e:
        sessinit.SmartInit(str(weird))
    msg = str(e.value)
    asked = msg.split("(asked: ", 1)[1].split(")", 1)[0]
    assert asked.startswith("trainbus-sessinit 0.1.0 (sessinit = trainbus_sessinit._plugin")
    assert "(built-in formats)" not in msg
    assert "monitor" not in msg and "graph" not in msg  # installed ambient plugins without the hook


@pytest.mark.parametrize("n,shown", [(10, "r" * 10), (200, "r" * 200), (201, "r" * 197 + "..."),
                                     (5000, "r" * 197 + "...")])
def test_type_error_shows_a_long_repr_cut_at_200_characters(n, shown):
    with pytest.raises(TypeError) as e:
        sessinit.SmartInit(Repr(n))
    assert f"can load {shown} of type Repr (asked: " in str(e.value)


@pytest.fixture()
def odd_plugin(tmp_path):
    """A fake installed distribution whose plugin answers ``"odd://..."`` with a string."""
    site = tmp_path / "site"
    pkg = site / "tb_oddinit"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        import trainbus

        @trainbus.hookimpl
        def sessinit_for(obj, ignore_mismatch):
            if isinstance(obj, str) and obj.startswith("odd://"):
                return "not an initializer"
            return None
    """))
    info = site / "tb_oddinit-0.2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tb-oddinit\nVersion: 0.2.0\n"
                                   "Keywords: trainbus-plugin\n")
    (info / "entry_points.txt").write_text("[trainbus.plugin_api]\n1 = tb_oddinit\n[trainbus.plugins]\noddinit = tb_oddinit\n")
    sys.path.insert(0, str(site))
    _fresh_managers()
    try:
        yield
    finally:
        sys.path.remove(str(site))
        sys.modules.pop("tb_oddinit", None)
        _fresh_managers()


def test_a_plugin_answer_that_is_not_a_session_init_is_an_error(odd_plugin, tmp_path):
    with pytest.raises(TypeError) as e:
        sessinit.SmartInit("odd://weights")
    msg = str(e.value)
    assert "a plugin's sessinit_for returned 'not an initializer', which is not a SessionInit" in msg
    assert "tb-oddinit 0.2.0" in msg and "trainbus-sessinit 0.1.0" in msg
    weird = tmp_path / "weights.weird"
    weird.write_text("x")
    with pytest.raises(ValueError) as e:
        sessinit.SmartInit(str(weird))
    msg = str(e.value)
    assert "tb-oddinit 0.2.0" in msg and "trainbus-sessinit 0.1.0" in msg and "(built-in formats)" not in msg
