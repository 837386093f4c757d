"""Third-party plugin packages as users meet them, in FRESH virtual environments:

* ``examples/thirdparty-plugin`` (trainbus-lossguard) installed beside trainbus: its names resolve
  as ``trainbus.callbacks.<Name>``, ``trainbus plugins`` lists it, its own tests pass there, and a
  run file composes it by name and trains;
* ``trainbus new-plugin`` scaffolds a package that installs and passes its own tests;
* a plugin declaring an incompatible plugin API is reported with its name and the versions.
"""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "thirdparty-plugin"


def _wheel_of(src: pathlib.Path, tmp: pathlib.Path) -> pathlib.Path:
    """Build the wheel of one distribution directory (a clean copy) into its own folder."""
    copy = tmp / "src" / src.name
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    out = tmp / "wheels"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                        str(copy)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _run_tests_in(venv, package: pathlib.Path) -> subprocess.CompletedProcess:
    """``python -m pytest`` in a package's own directory, as its author runs it, with the venv's
    interpreter. ``-p no:timeout`` turns pytest-timeout off: a package picking up this
    repository's configuration (``--timeout`` in its addopts) would then fail on it."""
    r = venv.run(venv.python, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:timeout", check=False,
                 cwd=str(package))
    # the package's own configuration is the one in use
    assert f"rootdir: {package}\nconfigfile: pyproject.toml" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    return r


@pytest.mark.slow
def test_thirdparty_package_beside_trainbus(fresh_venv, tmp_path) -> None:
    wheels = _wheel_of(EXAMPLE, tmp_path)
    venv = fresh_venv("thirdparty", zygote=True)
    venv.install("trainbus", "trainbus-lossguard[test]", find_links=[wheels])  # the extra: pytest alone
    assert venv.distributions() == {"trainbus": "0.1.0", "trainbus-lossguard": "1.0.0"}
    # by name, from the facade module and from the top-level package
    names = venv.py_json(
        "import json, trainbus, trainbus.callbacks as c, trainbus_lossguard as m\n"
        "print(json.dumps([c.LossGuard is m.LossGuard, trainbus.JSONLinesMonitor is m.JSONLinesMonitor,\n"
        "                  'LossGuard' in dir(c), c.LossGuard(max_value=3.0).max_value]))")
    assert names == [True, True, True, 3.0]
    # `trainbus plugins` lists it, with its version, bundle (none) and declared plugin API
    out = venv.run(str(venv.path / "bin" / "trainbus"), "plugins", "--strict").stdout
    assert "trainbus-lossguard 1.0.0  [bundle: -]  [plugin API 1]" in out
    assert "    trainbus.callbacks.LossGuard" in out and "    trainbus.callbacks.JSONLinesMonitor" in out
    # the package's own tests (trainbus.testing: train_tiny, HookRecorder, check_distribution) pass there
    # (from its directory inside this repository: its own pytest configuration, not the repository's)
    r = _run_tests_in(venv, EXAMPLE)
    assert r.returncode == 0 and " passed" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]
    assert "failed" not in r.stdout.splitlines()[-1]
    # a training run that composes it by name from a run file (subprocess in that venv)
    run = tmp_path / "run.toml"
    run.write_text(
        '[model]\nclass = "trainbus.testing:TinyModel"\n'
        '[data]\nfunction = "trainbus.testing:tiny_dataflow"\nargs = { n = 32, batch = 4 }\n'
        '[[callbacks]]\nname = "LossGuard"\nargs = { tensor = "cost", max_value = 100.0 }\n'
        '[[monitors]]\nname = "JSONLinesMonitor"\n'
        f'[train]\nsteps_per_epoch = 4\nmax_epoch = 3\nlogdir = "{tmp_path / "log"}"\ndefault_callbacks = false\n')
    dry = venv.run(str(venv.path / "bin" / "trainbus"), "train", str(run), "--dry-run", cwd=str(tmp_path)).stdout
    assert any("LossGuard(tensor='cost', max_value=100.0)" in line and "trainbus-lossguard 1.0.0" in line
               for line in dry.splitlines()), dry
    venv.run(str(venv.path / "bin" / "trainbus"), "train", str(run), cwd=str(tmp_path))
    rows = [json.loads(line) for line in (tmp_path / "log" / "scalars.jsonl").read_text().splitlines()]
    assert [(r["epoch"], r["step"]) for r in rows if r["name"] == "lossguard/max_cost"] == [(1, 4), (2, 8), (3, 12)]
    # a run file naming a first-party callback whose distribution is absent: reported with its
    # line and the pip command, nothing starts
    bad = tmp_path / "bad.toml"
    bad.write_text(run.read_text().replace('name = "LossGuard"', 'name = "ModelSaver"'))
    r = venv.run(str(venv.path / "bin" / "trainbus"), "train", str(bad), check=False, cwd=str(tmp_path))
    assert r.returncode == 2
    line = next(i for i, t in enumerate(bad.read_text().splitlines(), 1) if "ModelSaver" in t)
    assert f"{bad}:{line}: callbacks[0].name: trainbus.callbacks.ModelSaver is provided by the 'trainbus-saver' " \
           "distribution, which is not installed." in r.stderr
    assert "pip install trainbus-saver" in r.stderr and "pip install 'trainbus[standard]'" in r.stderr


@pytest.mark.slow
def test_new_plugin_scaffold_installs_and_passes_its_tests(fresh_venv, tmp_path) -> None:
    """In an environment set up as documented (``trainbus[standard]`` from the wheelhouse), the
    "next:" line ``trainbus new-plugin`` prints is followed as printed: the editable install with
    the ``test`` extra, then pytest in the package's directory."""
    venv = fresh_venv("scaffold", zygote=True)
    venv.install("trainbus[standard]")
    target = tmp_path / "mine"
    trainbus_cmd = str(venv.path / "bin" / "trainbus")
    r = venv.run(trainbus_cmd, "new-plugin", "grad-stats", "--dir", str(target), zygote=False)  # no TensorFlow
    assert "trainbus.callbacks.GradStatsCallback" in r.stdout
    files = sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file())
    assert files == ["README.md", "pyproject.toml", "src/trainbus_grad_stats/__init__.py",
                     "src/trainbus_grad_stats/py.typed", "tests/test_trainbus_grad_stats.py"]
    # refuses to overwrite, and refuses unusable names, with the reason
    again = venv.run(trainbus_cmd, "new-plugin", "grad-stats", "--dir", str(target), check=False, zygote=False)
    assert again.returncode == 2 and "exists and is not empty" in again.stderr
    bad = venv.run(trainbus_cmd, "new-plugin", "Grad Stats", "--dir", str(tmp_path / "x"), check=False, zygote=False)
    assert bad.returncode == 2 and "lowercase letters, digits and single dashes" in bad.stderr
    # the printed next step: `pip install -e '<dir>[test]' && (cd <dir> && pytest)`, and nothing else
    lines = r.stdout.splitlines()
    assert lines[-1] == f"next: pip install -e {shlex.quote(f'{target}[test]')} && (cd {target} && pytest)", r.stdout
    install, test = lines[-1][len("next: "):].split(" && ", 1)
    argv = shlex.split(install)
    assert argv[:3] == ["pip", "install", "-e"], install
    # pip of this test's interpreter acting on the venv; the build backend (setuptools) comes from
    # the package index for pip's isolated build, the trainbus distributions are installed already
    pip = subprocess.run([sys.executable, "-m", "pip", "--python", venv.python, *argv[1:]], capture_output=True,
                         text=True, env=venv.env(), timeout=600)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    assert "does not provide the extra" not in pip.stdout + pip.stderr, pip.stdout + pip.stderr
    dists = venv.distributions()
    assert dists["trainbus-grad-stats"] == "0.1.0", dists
    out = venv.run(trainbus_cmd, "plugins", "--strict").stdout
    assert "trainbus-grad-stats 0.1.0" in out and "trainbus.callbacks.GradStatsMonitor" in out
    # `(cd <dir> && pytest)`: the tests from the package's directory (pytest as a module of the venv)
    assert test == f"(cd {target} && pytest)"
    r = _run_tests_in(venv, target)
    assert r.returncode == 0 and "3 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-3000:]


def _fake_dist(site: pathlib.Path, api: str) -> None:
    """A distribution ``trainbus-future`` written for plugin API ``api`` (dist-info + module)."""
    (site / "trainbus_future.py").write_text(
        "from trainbus.callbacks import Callback\n__all__ = ['FutureCallback']\n"
        "class FutureCallback(Callback):\n    def _trigger(self):\n        pass\n")
    info = site / "trainbus_future-3.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: trainbus-future\nVersion: 3.0.0\n"
                                   "Keywords: trainbus-plugin\n")
    (info / "entry_points.txt").write_text(f"[trainbus.plugin_api]\n{api} = trainbus_future\n"
                                           "[trainbus.callbacks]\nFutureCallback = trainbus_future:FutureCallback\n")


def test_incompatible_plugin_api_is_reported_with_name_and_versions(tmp_path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    _fake_dist(site, "3")
    env = dict(os.environ, PYTHONPATH=str(site), TF_CPP_MIN_LOG_LEVEL="3")
    code = ("import trainbus, trainbus.callbacks as c\n"
            "print(trainbus.PLUGIN_API_VERSION)\n"
            "try:\n    c.FutureCallback\nexcept trainbus.PluginAPIVersionError as e:\n    print('ERR', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    lines = r.stdout.splitlines()
    assert lines[0] == "1"
    assert lines[1].startswith("ERR the plugin distribution 'trainbus-future' supports trainbus plugin API 3, "
                               "but this trainbus implements plugin API 1"), r.stdout + r.stderr
    # `trainbus plugins` shows it with the same message; --strict makes that exit status 2
    r = subprocess.run([sys.executable, "-m", "trainbus", "plugins", "--no-load", "--strict"], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 2
    block = r.stdout.split("trainbus-future 3.0.0", 1)[1].split("\ntrainbus-", 1)[0]
    assert "[plugin API 3]" in block
    assert "ERROR PluginAPIVersionError: the plugin distribution 'trainbus-future' supports trainbus plugin API " \
           "3, but this trainbus implements plugin API 1" in block
