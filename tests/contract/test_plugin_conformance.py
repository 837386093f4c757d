"""Every installed first-party plugin distribution passes ``trainbus.testing.check_distribution``
(the same check a third-party package runs in its own tests)."""

from __future__ import annotations

import pathlib

import importlib_metadata as md
import pytest

from trainbus.bus import registry as _registry
from trainbus.testing import DistributionCheckError, check_distribution

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _installed_plugin_dists() -> list[str]:
    names = {d.metadata["Name"] for d in md.distributions() if (d.metadata["Name"] or "").startswith("trainbus-")}
    return sorted(names)


def _repo_plugin_dists() -> list[str]:
    import tomllib

    return sorted(tomllib.loads(p.read_text())["project"]["name"] for p in ROOT.glob("plugins/*/pyproject.toml"))


@pytest.mark.parametrize("dist", _installed_plugin_dists())
def test_distribution_conforms(dist: str) -> None:
    assert check_distribution(dist) == []


def test_every_plugin_directory_is_installed_and_checked() -> None:
    # a plugin folder that is not installed in the dev environment would escape the check above
    missing = sorted(set(_repo_plugin_dists()) - set(_installed_plugin_dists()))
    assert missing == [], f"not installed (pip install --no-deps --no-build-isolation -e plugins/<dir>): {missing}"


def test_check_distribution_reports_every_problem(tmp_path, monkeypatch) -> None:
    """A deliberately broken distribution: each kind of mistake is reported, all at once."""
    pkg = tmp_path / "badplug"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from trainbus.callbacks import Callback\n"
        "__all__ = ['GoodCb']\n"
        "class GoodCb(Callback):\n"
        "    def _trigger(self):\n"
        "        pass\n"
        "class Helper:\n"
        "    pass\n"
        "Renamed = GoodCb\n"
        "class NotATrainer:\n"
        "    pass\n"
    )
    info = tmp_path / "trainbus_badplug-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: trainbus-badplug\nVersion: 0.1.0\n"
                                   "Keywords: trainbus-plugin\n")
    (info / "entry_points.txt").write_text(
        "[trainbus.plugin_api]\n"
        "2 = badplug\n"
        "[trainbus.callbacks]\n"
        "GoodCb = badplug:GoodCb\n"
        "Helper = badplug:Helper\n"
        "WrongName = badplug:Renamed\n"
        "Missing = badplug:DoesNotExist\n"
        "Callback = badplug:GoodCb\n"
        "[trainbus.train]\n"
        "NotATrainer = badplug:NotATrainer\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    _registry.clear_cache()
    try:
        problems = check_distribution("trainbus-badplug", raise_on_error=False)
        with pytest.raises(DistributionCheckError) as err:
            check_distribution("trainbus-badplug")
    finally:
        _registry.clear_cache()
    text = "\n".join(problems)
    assert "declares plugin API 2, but this trainbus implements plugin API 1" in text
    assert "Helper = badplug:Helper" in text and "neither a Callback nor a MonitorBase" in text
    assert "the object is named 'GoodCb', not 'WrongName'" in text
    assert "Missing = badplug:DoesNotExist [group trainbus.callbacks] does not load" in text
    assert "'Callback' is already a name of the trainbus core" in text
    assert "is not a subclass of trainbus.train.Trainer" in text
    assert "'NotATrainer' is missing from badplug.__all__" in text
    # GoodCb itself is fine: nothing is reported about it
    assert not [p for p in problems if p.startswith("entry point GoodCb")]
    assert str(len(problems)) in str(err.value) and "trainbus-badplug" in str(err.value)


def test_check_distribution_reports_a_name_clash(tmp_path, monkeypatch) -> None:
    for dist in ("one", "two"):
        (tmp_path / f"clash_{dist}.py").write_text(
            "from trainbus.callbacks import Callback\n__all__ = ['SameName']\n"
            "class SameName(Callback):\n    def _trigger(self):\n        pass\n")
        info = tmp_path / f"trainbus_clash_{dist}-0.1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: trainbus-clash-{dist}\nVersion: 0.1.0\n"
                                       "Keywords: trainbus-plugin\n")
        (info / "entry_points.txt").write_text(f"[trainbus.plugin_api]\n1 = clash_{dist}\n"
                                               f"[trainbus.callbacks]\nSameName = clash_{dist}:SameName\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _registry.clear_cache()
    try:
        problems = check_distribution("trainbus-clash-one", raise_on_error=False)
    finally:
        _registry.clear_cache()
    assert len(problems) == 1
    assert "'SameName' is also provided by trainbus-clash-two 0.1.0" in problems[0]


def _pip_install_plugin(tmp_path, name: str, package: str, cls: str, source: str) -> pathlib.Path:
    """Build the plugin distribution ``name`` (one package exporting the callback ``cls``) from a
    pyproject.toml and pip-install it into a directory of its own (put on sys.path by the
    caller): a real installation, with the RECORD that lists its files, that no other test
    run sharing this environment sees."""
    import subprocess
    import sys

    src = tmp_path / "src" / name
    (src / package).mkdir(parents=True)
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=77"]\nbuild-backend = "setuptools.build_meta"\n'
        f'[project]\nname = "{name}"\nversion = "0.1.0"\n'
        'keywords = ["trainbus-plugin"]\n'
        f'[project.entry-points."trainbus.plugin_api"]\n"1" = "{package}"\n'
        f'[project.entry-points."trainbus.callbacks"]\n{cls} = "{package}:{cls}"\n'
        '[tool.setuptools.packages.find]\nwhere = ["."]\n')
    (src / package / "__init__.py").write_text(source)
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                        "--target", str(site), str(src)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return site


def test_check_distribution_reports_imports_of_private_modules(tmp_path, monkeypatch) -> None:
    """A pip-installed plugin importing private trainbus modules is reported file:line, with the
    plugin_api name to use instead; one importing only trainbus.plugin_api passes."""
    bad = ("from trainbus.callbacks import Callback\n"
           "from trainbus.train._signals import TrainingInterrupted\n"
           "__all__ = ['ProbeBad']\n"
           "class ProbeBad(Callback):\n"
           "    def _trigger(self):\n"
           "        from trainbus.train import _signals\n"
           "        import trainbus._manager as m\n"
           "        return _signals, m, TrainingInterrupted\n"
           "def helper():\n"
           "    import importlib\n"
           "    return importlib.import_module('trainbus.train._fastrun')\n"
           "def other():\n"
           "    from trainbus._defaults import thing\n")
    good = ("from trainbus.callbacks import Callback\n"
            "from trainbus.plugin_api import TrainingInterrupted, tf1\n"
            "__all__ = ['ProbeGood']\n"
            "class ProbeGood(Callback):\n"
            "    def _trigger(self):\n"
            "        return tf1, TrainingInterrupted\n")
    bad_site = _pip_install_plugin(tmp_path / "b", "trainbus-privbad", "privbad", "ProbeBad", bad)
    good_site = _pip_install_plugin(tmp_path / "g", "trainbus-privgood", "privgood", "ProbeGood", good)
    # the installed metadata lists the module: the check reads what pip installed
    monkeypatch.syspath_prepend(str(bad_site))
    monkeypatch.syspath_prepend(str(good_site))
    _registry.clear_cache()
    try:
        problems = check_distribution("trainbus-privbad", raise_on_error=False)
        assert check_distribution("trainbus-privgood", raise_on_error=False) == []
    finally:
        _registry.clear_cache()
    by_line = {p.split(":")[1]: p for p in problems}
    assert all(p.startswith("privbad/__init__.py:") for p in problems), problems
    assert sorted(by_line, key=int) == ["2", "6", "7", "11", "13"], problems
    assert "imports a private trainbus module, trainbus.train._signals" in by_line["2"]
    assert "import trainbus.plugin_api.TrainingInterrupted instead" in by_line["2"]
    # the whole module: the plugin API names it shares, found from where they are defined
    assert by_line["6"].endswith("use trainbus.plugin_api.TrainingInterrupted / trainbus.plugin_api.signum_of_reason / "
                                 "trainbus.plugin_api.checkpoint_report instead"), by_line["6"]
    # module paths that do not exist (the never-released aliases of 0.1.0 are gone)
    for line, module in (("7", "trainbus._manager"), ("11", "trainbus.train._fastrun")):
        assert f"there is no module {module} in this trainbus: import what the plugin needs from " \
               "trainbus.plugin_api" in by_line[line], by_line[line]
    assert "trainbus._defaults" in by_line["13"] and "trainbus.plugin_api has no replacement for it" in by_line["13"]
    with pytest.raises(DistributionCheckError, match=r"privbad/__init__.py:2: imports a private trainbus module"):
        check_distribution("trainbus-privbad")
