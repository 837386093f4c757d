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
    assert "trainbus-saver" in venv.distributions() and "trainbus-sessinit" in venv.distributions()
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
    msg = _missing(venv, "trainbus.callbacks", "ModelSaver")
    bundle_cmd = next(m.group(0) for m in CHECKOUT_CMD.finditer(msg) if "trainbus[" in m.group(0))
    assert bundle_cmd == "pip install --find-links dist 'trainbus[standard]'", msg
    _follow(venv, bundle_cmd, checkout)
    assert "trainbus-saver" in venv.distributions()
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


#: the checkout form of any hint, up to its closing parenthesis: the whole command, all its requirements
CHECKOUT_FULL = re.compile(
    r"from a trainbus checkout: tools/build_wheels\.sh, then (pip install --find-links dist [^)]+)\)")
#: the plain form that comes before it
PLAIN_FULL = re.compile(r"(pip install [^(]+?) \(from a trainbus checkout")


def _pip(venv, *args: str, cwd: pathlib.Path, index: bool = False, **extra_env: str) -> subprocess.CompletedProcess:
    """pip of this test's interpreter acting on ``venv``; offline (no index) unless ``index``."""
    env = dict(venv.env(), **extra_env)
    if not index:
        env["PIP_NO_INDEX"] = "1"
    return subprocess.run([sys.executable, "-m", "pip", "--python", venv.python, *args], cwd=str(cwd),
                          capture_output=True, text=True, env=env, timeout=600)


def _defaults_warnings(venv) -> dict:
    """The PluginWarning of DEFAULT_CALLBACKS() and of DEFAULT_MONITORS() in ``venv`` ('' if none),
    and the class names of what each returned (under ``"<name> made"``)."""
    return venv.py_json(
        "import json, warnings\nfrom trainbus.train.config import DEFAULT_CALLBACKS, DEFAULT_MONITORS\n"
        "out = {}\nfor f in (DEFAULT_CALLBACKS, DEFAULT_MONITORS):\n"
        "    with warnings.catch_warnings(record=True) as w:\n        warnings.simplefilter('always')\n"
        "        made = f()\n"
        "    out[f.__name__] = ' '.join(str(x.message) for x in w)\n"
        "    out[f.__name__ + ' made'] = sorted(type(m).__name__ for m in made)\n"
        "print(json.dumps(out))")  # type: ignore[return-value]


@pytest.mark.slow
def test_bundle_defaults_and_extra_hints_work_as_printed(wheelhouse, fresh_venv, tmp_path) -> None:
    """The hints of a missing bundle (``trainbus plugins`` with none installed), of missing
    default callbacks/monitors (the DEFAULT_* warning) and of an optional dependency of a trainbus
    extra (``trainbus[keras]``, ``trainbus-misc[ipython]``), each followed literally in ONE fresh
    environment that has only the core; and a wheelhouse lacking a bundle member is an install
    error naming that distribution."""
    checkout = tmp_path / "checkout"  # a checkout after tools/build_wheels.sh: dist/ holds the wheels
    checkout.mkdir()
    (checkout / "dist").symlink_to(wheelhouse)
    venv = fresh_venv("followed")
    venv.install("trainbus")
    assert set(venv.distributions()) == {"trainbus"}
    trainbus_cmd = str(venv.path / "bin" / "trainbus")
    none_line = venv.run(trainbus_cmd, "plugins").stdout.strip()  # followed below, after the defaults

    # a wheelhouse without trainbus-saver: installing the bundle fails and names the missing distribution
    partial = tmp_path / "partial"
    partial.mkdir()
    for w in wheelhouse.glob("*.whl"):
        if _wheel_dist(w) != "trainbus-saver":
            (partial / w.name).symlink_to(w)
    r = _pip(venv, "install", "--no-index", "--find-links", str(partial), "trainbus[standard]", cwd=tmp_path)
    assert r.returncode != 0, r.stdout
    assert "No matching distribution found for trainbus-saver" in r.stderr, r.stderr
    assert set(venv.distributions()) == {"trainbus"}  # nothing was installed

    # missing default plugins: the warning names each class and distribution, in both forms
    warned = _defaults_warnings(venv)
    assert warned["DEFAULT_CALLBACKS made"] == [] and warned["DEFAULT_MONITORS made"] == [], warned
    cb_msg, mon_msg = warned["DEFAULT_CALLBACKS"], warned["DEFAULT_MONITORS"]
    assert cb_msg.startswith("DEFAULT_CALLBACKS() is missing MovingAverageSummary (trainbus-summary), ProgressBar "
                             "(trainbus-steps), MergeAllSummaries (trainbus-summary), RunUpdateOps (trainbus-graph): "
                             "their distributions are not installed."), cb_msg
    cb_cmds = CHECKOUT_FULL.findall(cb_msg)
    assert cb_cmds == ["pip install --find-links dist trainbus-summary trainbus-steps trainbus-graph",
                       "pip install --find-links dist 'trainbus[standard]'"], cb_msg
    _follow(venv, cb_cmds[0], checkout)  # the checkout form of the callbacks' distributions
    mon_plain = PLAIN_FULL.findall(mon_msg)
    assert mon_plain[0] == "pip install trainbus-monitor-tfevents trainbus-monitor-json trainbus-monitor-stdout", \
        mon_msg
    _follow(venv, mon_plain[0], checkout, PIP_FIND_LINKS=str(wheelhouse))  # the plain form, an index serving them
    warned = _defaults_warnings(venv)
    assert warned["DEFAULT_CALLBACKS"] == "" and warned["DEFAULT_MONITORS"] == "", warned
    assert warned["DEFAULT_CALLBACKS made"] == ["MergeAllSummaries_RunWithOp", "MovingAverageSummary", "ProgressBar",
                                                "RunUpdateOps"], warned
    assert warned["DEFAULT_MONITORS made"] == ["JSONWriter", "ScalarPrinter", "TFEventWriter"], warned

    # a missing bundle: what `trainbus plugins` printed with no plugin installed
    assert none_line.startswith("no trainbus plugin distributions are installed; the standard bundle: "), none_line
    bundle_cmds = CHECKOUT_FULL.findall(none_line)
    assert bundle_cmds == ["pip install --find-links dist 'trainbus[standard]'"], none_line
    _follow(venv, bundle_cmds[0], checkout)
    members = {"trainbus-saver", "trainbus-param", "trainbus-inference", "trainbus-sessinit",
               "trainbus-dataflow"}
    assert members <= set(venv.distributions()), venv.distributions()
    listing = venv.run(trainbus_cmd, "plugins").stdout
    assert "trainbus-saver 0.1.0  [bundle: standard]" in listing, listing

    # an optional dependency of a trainbus extra: trainbus[keras] (tf-keras hidden to get the message)
    msg = venv.py("import sys\nsys.modules['tf_keras'] = None\ntry:\n    import trainbus.contrib.keras\n"
                  "except ImportError as e:\n    print(e)\n").stdout
    keras_cmds = CHECKOUT_FULL.findall(msg)
    assert keras_cmds == ["pip install --find-links dist 'trainbus[keras]'"], msg
    # third-party dependencies (TensorFlow's own included) come from the public index: resolved
    # there with --dry-run, the trainbus wheels from dist/ as printed
    r = _pip(venv, "install", "--dry-run", *shlex.split(keras_cmds[0])[2:], cwd=checkout, index=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "does not provide the extra" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert re.search(r"tf-keras>=2\.16 .*\(from trainbus\[keras\]\)", r.stdout), r.stdout  # the extra's dependency
    # a name of a distribution in no installed bundle (trainbus-prof): its missing-name hint,
    # followed from the checkout
    prof_cmds = CHECKOUT_FULL.findall(_missing(venv, "trainbus.callbacks", "GraphProfiler"))
    assert prof_cmds == ["pip install --find-links dist trainbus-prof",
                         "pip install --find-links dist 'trainbus[all]'"], prof_cmds
    _follow(venv, prof_cmds[0], checkout)
    assert "trainbus-prof" in venv.distributions()
    # trainbus-misc[ipython]: IPython comes from the public index, so pip resolves it there (--dry-run)
    # (trainbus-misc came with the standard bundle)
    assert "trainbus-misc" in venv.distributions()
    out = venv.run(venv.python, "-c",
                   "import importlib.util as u\nreal = u.find_spec\n"
                   "u.find_spec = lambda n, *a: None if n == 'IPython' else real(n, *a)\n"
                   "from trainbus.callbacks import InjectShell\nInjectShell(shell='ipython')\n")
    text = out.stdout + out.stderr
    ipy_cmds = CHECKOUT_FULL.findall(text)
    assert ipy_cmds == ["pip install --find-links dist 'trainbus-misc[ipython]'"], text
    r = _pip(venv, "install", "--dry-run", *shlex.split(ipy_cmds[0])[2:], cwd=checkout, index=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "does not provide the extra" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert re.search(r"^Would install .*\bipython-\d", r.stdout, re.M | re.I), r.stdout


def test_check_distribution_of_a_missing_distribution_says_how_to_install_it(monkeypatch) -> None:
    """``trainbus.testing.check_distribution``: a first-party distribution gets both install forms,
    a package of one's own the editable or wheelhouse install (no name on a public index is implied)."""
    import importlib_metadata as md

    from trainbus.testing import check_distribution

    real = md.distribution
    monkeypatch.setattr(md, "distribution", lambda name: (_ for _ in ()).throw(md.PackageNotFoundError(name))
                        if name == "trainbus-saver" else real(name))
    assert check_distribution("trainbus-saver", raise_on_error=False) == [
        "'trainbus-saver' is not installed in this environment; install it first: pip install trainbus-saver (from a "
        "trainbus checkout: tools/build_wheels.sh, then pip install --find-links dist trainbus-saver)"]
    assert check_distribution("trainbus-not-made-yet", raise_on_error=False) == [
        "'trainbus-not-made-yet' is not installed in this environment; install it first: pip install -e <its source "
        "directory>, or pip install --find-links <a directory of its wheels> trainbus-not-made-yet"]
