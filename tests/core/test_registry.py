"""Name resolution through entry points: lazy, named errors, conflicts, ambient plugins."""

import sys
import warnings

import pytest

import trainbus
from trainbus.bus import registry as _registry
from trainbus.exceptions import PluginConflictError, PluginLoadError

from fakedist import make_dist, on_path

CB_SRC = """
    from trainbus.callbacks import Callback
    class {name}(Callback):
        def _trigger(self):
            self.fired = True
"""


def test_resolves_lazily_and_caches(tmp_path):
    root = make_dist(tmp_path / "site", "trainbus-fakeone", "1.2.3",
                     {"trainbus.callbacks": {"FakeOne": "fakeone_mod:FakeOne"}},
                     {"fakeone_mod": CB_SRC.format(name="FakeOne")})
    with on_path(root):
        assert "FakeOne" in dir(trainbus.callbacks)
        assert "fakeone_mod" not in sys.modules  # dir() imports nothing
        cls = trainbus.callbacks.FakeOne
        assert cls.__module__ == "fakeone_mod"
        assert trainbus.FakeOne is cls  # top-level name too
        from trainbus.callbacks import FakeOne

        assert FakeOne is cls
        del trainbus.callbacks.__dict__["FakeOne"]
        del trainbus.__dict__["FakeOne"]


def test_known_name_not_installed_says_pip_install(monkeypatch):
    monkeypatch.setitem(_registry.KNOWN_PROVIDERS["trainbus.callbacks"], "ImaginaryCallback", "trainbus-imaginary")
    with pytest.raises(ModuleNotFoundError) as ei:
        from trainbus.callbacks import ImaginaryCallback  # noqa: F401
    assert "pip install trainbus-imaginary" in str(ei.value)
    assert "trainbus.callbacks.ImaginaryCallback" in str(ei.value)


def test_unknown_name_is_attribute_error_with_suggestion():
    with pytest.raises(AttributeError) as ei:
        trainbus.callbacks.PeriodicTrigerr  # noqa: B018
    assert "PeriodicTrigerr" in str(ei.value)


def test_broken_plugin_names_distribution_and_version(tmp_path):
    root = make_dist(tmp_path / "site", "trainbus-broken", "0.7", {"trainbus.callbacks": {"Broken": "broken_mod:Broken"}},
                     {"broken_mod": "import not_a_module_anywhere\n"})
    with on_path(root):
        with pytest.raises(PluginLoadError) as ei:
            trainbus.callbacks.Broken  # noqa: B018
        msg = str(ei.value)
        assert "trainbus-broken 0.7" in msg and "not_a_module_anywhere" in msg
        # everything else still resolves
        assert trainbus.callbacks.PeriodicTrigger is not None


def test_two_providers_raise_listing_both(tmp_path):
    a = make_dist(tmp_path / "a", "trainbus-dup-a", "1.0", {"trainbus.callbacks": {"Dup": "dup_a:Dup"}},
                  {"dup_a": CB_SRC.format(name="Dup")})
    b = make_dist(tmp_path / "b", "trainbus-dup-b", "2.0", {"trainbus.callbacks": {"Dup": "dup_b:Dup"}},
                  {"dup_b": CB_SRC.format(name="Dup")})
    with on_path(a), on_path(b):
        with pytest.raises(PluginConflictError) as ei:
            trainbus.callbacks.Dup  # noqa: B018
        assert "trainbus-dup-a 1.0" in str(ei.value) and "trainbus-dup-b 2.0" in str(ei.value)


def test_incompatible_plugin_api_is_reported(tmp_path):
    root = make_dist(tmp_path / "site", "trainbus-future", "9.0", {"trainbus.callbacks": {"Future": "future_mod:Future"},
                                                               "trainbus.plugin_api": {"7": "future_mod"}},
                     {"future_mod": CB_SRC.format(name="Future")}, keywords="trainbus-plugin")
    with on_path(root):
        with pytest.raises(trainbus.PluginAPIVersionError) as ei:
            trainbus.callbacks.Future  # noqa: B018
        assert "'trainbus-future' supports trainbus plugin API 7, but this trainbus implements plugin API 1" in str(ei.value)


AMBIENT_SRC = """
    import trainbus
    CALLS = []
    @trainbus.hookimpl
    def trigger_epoch(trainer):
        CALLS.append(('{tag}', trainer.epoch_num))
"""


def test_ambient_plugins_load_in_name_order_and_can_be_disabled(tmp_path, monkeypatch):
    root = make_dist(tmp_path / "site", "trainbus-ambient", "0.1",
                     {"trainbus.plugins": {"zeta": "amb_z", "alpha": "amb_a"}},
                     {"amb_z": AMBIENT_SRC.format(tag="zeta"), "amb_a": AMBIENT_SRC.format(tag="alpha")})
    from trainbus.bus.manager import TrainbusPluginManager
    from trainbus.callbacks import Callback

    class Mine(Callback):
        def __init__(self, log):
            self.log = log

        def _trigger(self):
            self.log.append("mine")

    with on_path(root):
        pm = TrainbusPluginManager()
        loaded = pm.load_ambient()
        assert [n for n in loaded if n in ("alpha", "zeta")] == ["alpha", "zeta"]
        log = []
        pm.register_ordered([Mine(log)])
        names = [i.plugin_name for i in reversed(pm.hook.trigger_epoch.get_hookimpls())]
        assert names == ["callback[0]:Mine", "plugin:alpha", "plugin:zeta"]
        monkeypatch.setenv("TRAINBUS_DISABLE_PLUGINS", "zeta")
        pm2 = TrainbusPluginManager()
        loaded2 = pm2.load_ambient()
        assert "alpha" in loaded2 and "zeta" not in loaded2


def test_broken_ambient_plugin_is_a_warning_or_strict_error(tmp_path, monkeypatch):
    root = make_dist(tmp_path / "site", "trainbus-badambient", "0.3", {"trainbus.plugins": {"bad": "amb_bad"}},
                     {"amb_bad": "raise RuntimeError('boom at import')\n"})
    from trainbus.bus.manager import PluginWarning, TrainbusPluginManager

    with on_path(root):
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            assert "bad" not in TrainbusPluginManager().load_ambient()
        assert any("trainbus-badambient 0.3" in str(x.message) and "boom at import" in str(x.message)
                   for x in w if issubclass(x.category, PluginWarning))
        monkeypatch.setenv("TRAINBUS_STRICT_PLUGINS", "1")
        with pytest.raises(PluginLoadError, match="trainbus-badambient"):
            TrainbusPluginManager().load_ambient()


def test_ambient_plugin_raising_in_hook_does_not_stop_training(tmp_path):
    src = """
        import trainbus
        @trainbus.hookimpl
        def trigger_epoch(trainer):
            raise ValueError('plugin bug')
    """
    root = make_dist(tmp_path / "site", "trainbus-raiser", "0.2", {"trainbus.plugins": {"raiser": "amb_raiser"}},
                     {"amb_raiser": src})
    from trainbus.bus.manager import PluginWarning
    from trainbus.testing import HookRecorder, train_tiny

    with on_path(root):
        rec = HookRecorder()
        with pytest.warns(PluginWarning, match="trainbus-raiser 0.2"):
            tr = train_tiny([rec], max_epoch=2)
        assert tr.epoch_num == 2 and rec.hooks().count("trigger_epoch") == 2


def test_one_provider_per_distribution_seen_twice_but_two_distributions_with_one_value_conflict(tmp_path):
    """The same distribution on sys.path twice (an editable install and a symlinked copy) is one
    provider; two distributions declaring the name, even with the same object path, conflict."""
    src = {"twice_mod": CB_SRC.format(name="Twice")}
    one = make_dist(tmp_path / "one", "trainbus-twice", "1.0", {"trainbus.callbacks": {"Twice": "twice_mod:Twice"}}, src)
    again = make_dist(tmp_path / "again", "trainbus-twice", "1.0", {"trainbus.callbacks": {"Twice": "twice_mod:Twice"}},
                      src)
    fork = make_dist(tmp_path / "fork", "trainbus-twice-fork", "1.0",
                     {"trainbus.callbacks": {"Twice": "twice_mod:Twice"}}, src)
    with on_path(one), on_path(again):
        assert len(_registry.index("trainbus.callbacks")["Twice"]) == 2 - 1
        assert trainbus.callbacks.Twice.__name__ == "Twice"
        del trainbus.callbacks.__dict__["Twice"]
    with on_path(one), on_path(fork):
        with pytest.raises(PluginConflictError) as ei:
            _registry.resolve("trainbus.callbacks", "Twice")
        assert "trainbus-twice 1.0" in str(ei.value) and "trainbus-twice-fork 1.0" in str(ei.value)
    sys.modules.pop("twice_mod", None)


def test_clear_cache_forgets_every_cached_lookup():
    _registry._packages_distributions()
    _registry._parse_api("trainbus-some-plugin", (("1", "trainbus_some_plugin"),))
    _registry.index("trainbus.callbacks")
    _registry.clear_cache()
    assert _registry._packages_distributions.cache_info().currsize == 0
    assert _registry._parse_api.cache_info().currsize == 0
    assert _registry.index.cache_info().currsize == 0


def test_resolve_looks_in_the_groups_it_is_given(monkeypatch):
    """``groups`` replaces the module's own group (``trainbus`` resolves the facades' names)."""
    monkeypatch.setitem(_registry.KNOWN_PROVIDERS["trainbus.callbacks"], "ImaginaryOne", "trainbus-imaginary")
    with pytest.raises(ModuleNotFoundError, match="trainbus-imaginary"):
        _registry.resolve("trainbus", "ImaginaryOne", groups=["trainbus.callbacks"])
    with pytest.raises(AttributeError):
        _registry.resolve("trainbus", "ImaginaryOne", groups=["trainbus.train"])


def test_missing_provider_names_its_bundle_when_it_has_one(monkeypatch):
    monkeypatch.setitem(_registry.KNOWN_PROVIDERS["trainbus.callbacks"], "ImaginaryTwo", "trainbus-graph")
    monkeypatch.setitem(_registry.KNOWN_PROVIDERS["trainbus.callbacks"], "ImaginaryThree", "trainbus-imaginary")
    # pretend trainbus-graph is not installed: nothing provides the names
    with pytest.raises(ModuleNotFoundError) as ei:
        _registry.resolve("trainbus.callbacks", "ImaginaryTwo")
    assert "pip install trainbus-graph" in str(ei.value) and "pip install 'trainbus[standard]'" in str(ei.value)
    with pytest.raises(ModuleNotFoundError) as ei:
        _registry.resolve("trainbus.callbacks", "ImaginaryThree")
    assert "pip install trainbus-imaginary" in str(ei.value)
    assert "bundle" not in str(ei.value) and "trainbus[" not in str(ei.value)


def test_out_of_scope_name_is_an_import_error_saying_why():
    with pytest.raises(ImportError) as ei:
        from trainbus.train import BytePSTrainer  # noqa: F401
    assert type(ei.value) is ImportError
    assert "trainbus.train.BytePSTrainer is not provided by trainbus: BytePS is not maintained" in str(ei.value)


def test_distribution_of_names_the_installed_distribution_of_a_module():
    from importlib_metadata import version

    assert _registry.distribution_of("numpy.linalg.linalg") == f"numpy {version('numpy')}"
    assert _registry.distribution_of("numpy") == f"numpy {version('numpy')}"
    for module in ("trainbus.callbacks", "trainbus", "", None, "no_such_top_level_module_anywhere.x"):
        assert _registry.distribution_of(module) is None, module


def test_module_getattr_all_lists_core_then_plugin_names_and_dunders_read_no_metadata(monkeypatch):
    ns: dict = {}
    getattr_, _ = _registry.make_module_getattr("fake.facade", ("trainbus.callbacks",), ns, core_all=["Zeta", "Alpha"])
    plugins = _registry.installed_names(("trainbus.callbacks",))
    assert getattr_("__all__") == list(dict.fromkeys(["Zeta", "Alpha", *plugins]))
    plain, _ = _registry.make_module_getattr("fake.plain", ("trainbus.callbacks",), {})
    with pytest.raises(AttributeError):
        plain("__all__")
    looked: list = []
    monkeypatch.setattr(_registry, "index", lambda group: looked.append(group) or {})
    for dunder in ("__path__", "__wrapped__", "__all__"):
        with pytest.raises(AttributeError, match=f"module 'fake.plain' has no attribute '{dunder}'"):
            plain(dunder)
    assert looked == []
