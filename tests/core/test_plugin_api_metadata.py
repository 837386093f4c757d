"""The plugin API a distribution is written for is metadata of its own, the entry points of
group ``trainbus.plugin_api``, read through one function (``trainbus.bus.registry.declared_api``).
Installed (fake) distributions declaring it readably or not: an unreadable declaration is a
``PluginLoadError`` naming the distribution and what is wrong, wherever it is read (resolving a
name, ``trainbus plugins``, ``trainbus --version``, ``check_distribution``), and the plugin's
module is not imported."""

from __future__ import annotations

import sys

import pytest

import trainbus
from trainbus.bus import registry
from trainbus.bus.report import plugin_report
from trainbus.exceptions import PluginAPIVersionError, PluginLoadError

from fakedist import make_dist, on_path

CB_SRC = """
    from trainbus.callbacks import Callback
    __all__ = ['{name}']
    class {name}(Callback):
        def _trigger(self):
            pass
"""


def _dist(tmp_path, dist: str, cls: str, api_eps: dict[str, str] | None = None, keywords: str = "trainbus-plugin"):
    module = dist.replace("-", "_")
    eps = {"trainbus.callbacks": {cls: f"{module}:{cls}"}}
    if api_eps is not None:
        eps[registry.API_GROUP] = api_eps
    return make_dist(tmp_path / dist, dist, "0.3.0", eps, {module: CB_SRC.format(name=cls)}, keywords=keywords)


def _record(dist: str) -> dict:
    return next(r for r in plugin_report(try_load=False, check_modules=False) if r["name"] == dist)


def test_entry_point_form_is_read_and_the_plugin_loads(tmp_path):
    with on_path(_dist(tmp_path, "trainbus-api-ep", "ApiEpCallback", {"1": "trainbus_api_ep"})):
        cls = trainbus.callbacks.ApiEpCallback
        assert cls.__module__ == "trainbus_api_ep"
        api = registry.declared_api(registry.index("trainbus.callbacks")["ApiEpCallback"][0])
        assert (api.dist, api.text, api.supports(1), api.supports(2)) == ("trainbus-api-ep", "1", True, False)
        rec = _record("trainbus-api-ep")
        assert rec["api"] == "1" and rec["api_ok"] and rec["errors"] == []
        from trainbus.testing import check_distribution

        assert check_distribution("trainbus-api-ep", raise_on_error=False) == []


def test_entry_point_form_naming_other_versions_is_refused_with_both_versions(tmp_path):
    with on_path(_dist(tmp_path, "trainbus-api-later", "ApiLaterCallback", {"3": "trainbus_api_later",
                                                                             "2": "trainbus_api_later"})):
        with pytest.raises(PluginAPIVersionError) as ei:
            trainbus.callbacks.ApiLaterCallback  # noqa: B018
        assert str(ei.value).startswith("the plugin distribution 'trainbus-api-later' supports trainbus plugin API "
                                        "2, 3, but this trainbus implements plugin API 1.")
        assert "trainbus_api_later" not in sys.modules  # refused before its module is imported


def test_an_entry_point_not_named_by_a_version_is_a_load_error_naming_the_distribution(tmp_path):
    with on_path(_dist(tmp_path, "trainbus-api-badep", "ApiBadEpCallback", {"one": "trainbus_api_badep"})):
        with pytest.raises(PluginLoadError) as ei:
            trainbus.callbacks.ApiBadEpCallback  # noqa: B018
        assert type(ei.value) is PluginLoadError
        msg = str(ei.value)
        assert msg.startswith("the plugin distribution 'trainbus-api-badep' declares its plugin API unreadably: its "
                              "entry point one = trainbus_api_badep [group trainbus.plugin_api] is not named by a "
                              "plugin API version (a whole number such as \"1\")."), msg
        assert '[project.entry-points."trainbus.plugin_api"] "1" = "<its package>"' in msg
        assert "trainbus_api_badep" not in sys.modules
        # the same message wherever the declaration is read
        rec = _record("trainbus-api-badep")
        assert rec["api"] == "unreadable" and rec["errors"] == [f"PluginLoadError: {msg}"]
        from trainbus.testing import check_distribution

        assert msg in check_distribution("trainbus-api-badep", raise_on_error=False)
        from trainbus.cli import version_text

        assert "  trainbus-api-badep 0.3.0 (plugin API unreadable: see `trainbus plugins`)" in version_text()


@pytest.mark.parametrize("name", ["v1", "1.5", "-1", "one"])
def test_every_unreadable_version_name_is_refused_before_the_module_is_imported(tmp_path, name):
    # "1" beside it does not make it readable: the whole declaration is refused
    with on_path(_dist(tmp_path, "trainbus-api-odd", "ApiOddCallback", {"1": "trainbus_api_odd",
                                                                         name: "trainbus_api_odd"})):
        with pytest.raises(PluginLoadError, match=rf"^the plugin distribution 'trainbus-api-odd' declares its plugin "
                                                  rf"API unreadably: its entry point {name} = trainbus_api_odd "):
            trainbus.callbacks.ApiOddCallback  # noqa: B018
        assert "trainbus_api_odd" not in sys.modules


def test_several_versions_are_one_declaration(tmp_path):
    with on_path(_dist(tmp_path, "trainbus-api-two", "ApiTwoCallback", {"2": "trainbus_api_two",
                                                                         "1": "trainbus_api_two"})):
        assert trainbus.callbacks.ApiTwoCallback.__name__ == "ApiTwoCallback"
        assert _record("trainbus-api-two")["api"] == "1, 2"


def test_a_distribution_declaring_nothing_is_not_checked_but_check_distribution_says_how_to_declare(tmp_path):
    # the keyword of the unreleased 0.1.0 is not a declaration: it is not read at all
    with on_path(_dist(tmp_path, "trainbus-api-none", "ApiNoneCallback",
                       keywords="trainbus-plugin,trainbus-plugin-api=>=5")):
        assert trainbus.callbacks.ApiNoneCallback.__name__ == "ApiNoneCallback"
        assert _record("trainbus-api-none")["api"] is None
        from trainbus.testing import check_distribution

        problems = check_distribution("trainbus-api-none", raise_on_error=False)
        assert problems == ["it does not declare the plugin API it is written for; add [project.entry-points."
                            "\"trainbus.plugin_api\"] \"1\" = \"<its package>\" to its pyproject.toml"], problems


def test_an_ambient_plugin_with_an_unreadable_declaration_is_skipped_naming_its_distribution(tmp_path, monkeypatch):
    """The ambient plugins (group ``trainbus.plugins``) load through the same check: the plugin is
    skipped with a warning that carries the same message, or refused under TRAINBUS_STRICT_PLUGINS,
    and its module is not imported."""
    import warnings

    from trainbus.bus.manager import PluginWarning, TrainbusPluginManager

    root = make_dist(tmp_path / "trainbus-api-amb", "trainbus-api-amb", "0.2.0",
                     {"trainbus.plugins": {"apiamb": "trainbus_api_amb"}, registry.API_GROUP: {"v1": "trainbus_api_amb"}},
                     {"trainbus_api_amb": "raise RuntimeError('the module of an unreadable declaration was imported')\n"})
    expected = ("the plugin distribution 'trainbus-api-amb' declares its plugin API unreadably: its entry point "
                "v1 = trainbus_api_amb [group trainbus.plugin_api] is not named by a plugin API version")
    with on_path(root):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert "apiamb" not in TrainbusPluginManager().load_ambient()
        messages = [str(w.message) for w in caught if issubclass(w.category, PluginWarning)]
        assert any(m.startswith("the trainbus plugin trainbus-api-amb 0.2.0 (apiamb = trainbus_api_amb) was skipped: "
                                f"PluginLoadError: {expected}") for m in messages), messages
        monkeypatch.setenv("TRAINBUS_STRICT_PLUGINS", "1")
        with pytest.raises(PluginLoadError, match="declares its plugin API unreadably") as ei:
            TrainbusPluginManager().load_ambient()
        assert "trainbus-api-amb" in str(ei.value)
        assert "trainbus_api_amb" not in sys.modules
