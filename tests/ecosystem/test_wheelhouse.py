"""The documented install from a checkout: ``tools/build_wheels.sh`` builds the wheelhouse, then
``pip install --find-links dist "trainbus[standard]"`` installs the standard bundle from it
alone and a run composed by name trains and writes its checkpoint; and every "pip install"
hint of a missing plugin works when followed literally."""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import sys
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "tools" / "build_wheels.sh"

#: the checkout form of a hint: `pip install --find-links dist <requirement>`
CHECKOUT_CMD = re.compile(r"pip install --find-links dist ('[^']+'|[A-Za-z0-9_.\-]+)")


def _dist_names() -> set[str]:
    tomls = [ROOT / "core" / "pyproject.toml", *ROOT.glob("plugins/*/pyproject.toml")]
    return {tomllib.loads(p.read_text())["project"]["name"] for p in tomls}


def _wheel_dist(path: pathlib.Path) -> str:
    return path.name.split("-")[0].replace("_", "-")


@pytest.mark.slow
def test_build_wheels_then_standard_bundle_trains_by_name(wheelhouse, fresh_venv, tmp_path) -> None:
    # one wheel per distribution directory (the core and every plugins/*/), nothing else
    wheels = sorted(wheelhouse.glob("*.whl"))
    assert sorted(_wheel_dist(w) for w in wheels) == sorted(_dist_names())
    assert all(w.name.endswith("-py3-none-any.whl") for w in wheels)
    venv = fresh_venv("standard")
    assert venv.distributions() == {}
    venv.install("trainbus[standard]")  # --no-index: the wheelhouse alone
    assert "trainbus-saver" in venv.distributions() and "trainbus-trainers-single" in venv.distributions()
    logdir = tmp_path / "log"
    run = tmp_path / "run.toml"
    run.write_text(
        '[model]\nclass = "trainbus.testing:TinyModel"\n'
        '[data]\nfunction = "trainbus.testing:tiny_dataflow"\nargs = { n = 32, batch = 4 }\n'
        '[trainer]\nname = "SimpleTrainer"\n'
        '[[callbacks]]\nname = "ModelSaver"\nargs = { max_to_keep = 2 }\n'
        f'[train]\nsteps_per_epoch = 3\nmax_epoch = 2\nlogdir = "{logdir}"\n')
    venv.run(str(venv.path / "bin" / "trainbus"), "train", str(run), cwd=str(tmp_path))
    state = (logdir / "checkpoint").read_text()
    assert 'model_checkpoint_path: "model-6"' in state, state
    assert (logdir / "model-6.index").is_file()


def test_build_wheels_says_what_is_missing_without_setuptools(tmp_path) -> None:
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHON"] = str(venv / "bin" / "python")
    r = subprocess.run(["bash", str(BUILD_SCRIPT), str(tmp_path / "out")], capture_output=True, text=True, env=env)
    assert r.returncode == 1
    assert "has no setuptools>=77" in r.stderr and "-m pip install 'setuptools>=77' wheel" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").glob("*.whl"))


def _missing(venv, module: str, name: str) -> str:
    """The message of importing ``module.name`` whose distribution is not installed."""
    r = venv.py(f"import {module} as m\ntry:\n    m.{name}\nexcept ModuleNotFoundError as e:\n    print(e)\n"
                "else:\n    print('NO ERROR')\n")
    assert "NO ERROR" not in r.stdout and "is not installed" in r.stdout, r.stdout + r.stderr
    return r.stdout


def _follow(venv, command: str, checkout: pathlib.Path, **extra_env: str) -> None:
    """Run a printed ``pip install ...`` command literally from ``checkout`` (pip of this test's
    interpreter acting on the venv; the machine is offline, so no package index)."""
    argv = shlex.split(command)
    assert argv[:2] == ["pip", "install"], command
    env = dict(venv.env(), PIP_NO_INDEX="1", **extra_env)
    r = subprocess.run([sys.executable, "-m", "pip", "--python", venv.python, *argv[1:]], cwd=str(checkout),
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, f"{command!r} failed:\n{r.stdout}\n{r.stderr}"


@pytest.mark.slow
def test_missing_plugin_hints_work_as_printed(wheelhouse, fresh_venv, tmp_path) -> None:
    checkout = tmp_path / "checkout"  # a checkout after tools/build_wheels.sh: dist/ holds the wheels
    checkout.mkdir()
    (checkout / "dist").symlink_to(wheelhouse)
    venv = fresh_venv("hints")
    venv.install("trainbus")
    # a missing distribution: both forms, the checkout one followed literally
    msg = _missing(venv, "trainbus.callbacks", "InferenceRunner")
    assert "trainbus.callbacks.InferenceRunner is provided by the 'trainbus-inference' distribution" in msg
    assert "    pip install trainbus-inference (from a trainbus checkout: tools/build_wheels.sh, then " \
           "pip install --find-links dist trainbus-inference)" in msg, msg
    commands = CHECKOUT_CMD.findall(msg)
    assert commands == ["trainbus-inference", "'trainbus[standard]'"], msg
    _follow(venv, f"pip install --find-links dist {commands[0]}", checkout)
    assert set(venv.distributions()) == {"trainbus", "trainbus-inference"}
    assert venv.py("from trainbus.callbacks import InferenceRunner; print(InferenceRunner.__name__)").stdout.strip() \
        == "InferenceRunner"
    # the bundle hint of another missing name, followed literally (its quoting included)
    msg = _missing(venv, "trainbus.train", "SimpleTrainer")
    bundle_cmd = next(m.group(0) for m in CHECKOUT_CMD.finditer(msg) if "trainbus[" in m.group(0))
    assert bundle_cmd == "pip install --find-links dist 'trainbus[standard]'", msg
    _follow(venv, bundle_cmd, checkout)
    assert "trainbus-trainers-single" in venv.distributions()
    venv.py("from trainbus.train import SimpleTrainer; from trainbus.callbacks import ModelSaver")
    # the plain form, where an index serves the distributions (here: the wheelhouse as find-links)
    other = fresh_venv("plain")
    other.install("trainbus")
    msg = _missing(other, "trainbus.tfutils.sessinit", "SmartInit")
    plain = re.search(r"    (pip install \S+) \(from a trainbus checkout", msg)
    assert plain is not None and plain.group(1) == "pip install trainbus-sessinit", msg
    _follow(other, plain.group(1), checkout, PIP_FIND_LINKS=str(wheelhouse))
    other.py("from trainbus.tfutils.sessinit import SmartInit")


def test_every_missing_name_prints_both_install_forms(monkeypatch) -> None:
    """For each first-party name, the message of its absence names its distribution and bundle
    in both forms, quoted for the shell (checked in-process with every distribution hidden)."""
    from trainbus.bus import registry
    from trainbus.bus.catalogue import BUNDLES, KNOWN_PROVIDERS

    monkeypatch.setattr(registry, "provider", lambda groups, name: None)
    assert KNOWN_PROVIDERS
    for group, names in KNOWN_PROVIDERS.items():
        for name, dist in names.items():
            with pytest.raises(ModuleNotFoundError) as ei:
                registry.resolve(group, name)
            msg = str(ei.value)
            bundle = next((b for b, members in BUNDLES.items() if dist in members), None)
            expected = [dist] + ([f"'trainbus[{bundle}]'"] if bundle else [])
            assert CHECKOUT_CMD.findall(msg) == expected, msg
            assert f"    pip install {dist} (from a trainbus checkout: tools/build_wheels.sh, then " in msg, msg
            for req in expected:
                assert shlex.split(f"pip install --find-links dist {req}")[-1] == req.strip("'")
