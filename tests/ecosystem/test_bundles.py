"""``pip install "trainbus[standard]"`` / ``[distributed]`` / ``[all]`` into FRESH environments from
wheels of the repository: exactly the bundle's distributions get installed, their names resolve,
every other first-party name says which ``pip install`` provides it, and ``trainbus plugins``
shows each distribution with its version and bundle."""

from __future__ import annotations

import json
import pathlib
import tomllib

import pytest
from optdeps import opt_packages  # tests/_support

ROOT = pathlib.Path(__file__).resolve().parents[2]

OPT_IN = {"trainbus-monitor-comet", "trainbus-monitor-mlflow", "trainbus-monitor-wandb"}
GROUP_MODULES = ("trainbus.callbacks", "trainbus.train", "trainbus.tfutils.sessinit", "trainbus.dataflow")


def _bundles() -> dict[str, set[str]]:
    """The bundle extras of core/pyproject.toml, expanded (read independently of the catalogue)."""
    extras = tomllib.loads((ROOT / "core" / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def members(extra: str) -> set[str]:
        out: set[str] = set()
        for req in extras[extra]:
            if req.startswith("trainbus["):
                out |= members(req[len("trainbus["):-1])
            elif req.startswith("trainbus-"):
                out.add(req.split("[")[0])  # a plugin with extras: trainbus-dataflow[image,mat]
        return out

    return {b: members(b) for b in ("standard", "distributed", "all")}


def _first_party_names() -> dict[tuple[str, str], str]:
    """(group, name) -> distribution, from plugins/*/pyproject.toml."""
    out = {}
    for pp in sorted(ROOT.glob("plugins/*/pyproject.toml")):
        meta = tomllib.loads(pp.read_text())["project"]
        for group, eps in meta.get("entry-points", {}).items():
            if group in GROUP_MODULES:
                for name in eps:
                    out[(group, name)] = meta["name"]
    return out


_RESOLVE_ALL = """
import importlib, inspect, json, sys
out = {}
for group, name in json.loads(sys.argv[1]):
    mod = importlib.import_module(group)
    try:
        obj = getattr(mod, name)
        own = getattr(obj, "__name__", "") or ""
        if inspect.ismodule(obj):  # a module exported by name (trainbus.dataflow.imgaug)
            ok = own.rsplit(".", 1)[-1] == name
        else:  # the object itself, or an alias its package exports next to it (DumpTensor)
            pkg = importlib.import_module(obj.__module__.split(".")[0])
            ok = own == name or (name in getattr(pkg, "__all__", ()) and getattr(pkg, name) is obj)
        out[group + "." + name] = "ok" if ok else "wrong object %r" % (obj,)
    except ModuleNotFoundError as e:
        out[group + "." + name] = "missing: " + str(e)
    except Exception as e:
        out[group + "." + name] = "error: %s: %s" % (type(e).__name__, e)
print(json.dumps(out))
"""


# what trainbus-dataflow's extras change, probed in the bundle's environment
_EXTRAS_PROBE = """
import importlib.util, json
import numpy as np
out = {m: importlib.util.find_spec(m) is not None for m in ("cv2", "scipy")}
ns = {}
exec("from trainbus import *", ns)
out["star"] = "imgaug" in ns and "AugmentImageComponent" in ns
from trainbus.dataflow import imgaug
from trainbus.dataflow.dataset._mat import load_mat
for key, call in (("resize", lambda: imgaug.Resize((4, 6)).augment(np.zeros((8, 8, 3), "uint8")).shape),
                  ("mat", lambda: load_mat("SVHN", "train_32x32.mat"))):
    try:
        out[key] = list(call())
    except Exception as e:
        out[key] = "%s: %s" % ("ImportError" if isinstance(e, ImportError) else type(e).__name__, e)
print(json.dumps(out))
"""


def _check_bundle(venv, bundle: str, bundles: dict[str, set[str]]) -> None:
    members = bundles[bundle]
    installed = venv.distributions()
    assert set(installed) == {"trainbus"} | members, f"[{bundle}] installed {sorted(installed)}"
    assert all(v == "0.1.0" for v in installed.values())
    names = _first_party_names()
    r = venv.run(venv.python, "-c", _RESOLVE_ALL, json.dumps(sorted(names)))
    result = json.loads(r.stdout.strip().splitlines()[-1])
    for (group, name), dist in names.items():
        got = result[f"{group}.{name}"]
        if dist in members:
            assert got == "ok", f"[{bundle}] {group}.{name} from {dist}: {got}"
        else:
            assert got.startswith("missing: ") and f"pip install {dist}" in got, f"[{bundle}] {group}.{name}: {got}"
    # `trainbus plugins`: every installed distribution, its version and bundle, and its names
    out = venv.run(str(venv.path / "bin" / "trainbus"), "plugins", "--strict").stdout
    for dist in members:
        expected_bundle = next(b for b in ("standard", "distributed", "all") if dist in bundles[b])
        assert f"{dist} 0.1.0  [bundle: {expected_bundle}]" in out, out
    for (group, name), dist in names.items():
        assert (f"    {group}.{name}" in out) == (dist in members), f"{group}.{name} in `trainbus plugins` output"
    assert "ERROR" not in out


def test_bundle_members_are_real_distributions() -> None:
    bundles = _bundles()
    repo = {tomllib.loads(p.read_text())["project"]["name"] for p in ROOT.glob("plugins/*/pyproject.toml")}
    for bundle, members in bundles.items():
        assert members <= repo, f"[{bundle}] names distributions that do not exist: {sorted(members - repo)}"
    assert bundles["standard"] < bundles["distributed"] < bundles["all"]
    assert bundles["all"] == repo - OPT_IN, "every first-party plugin except the opt-in ones belongs to [all]"
    # the distributions behind DEFAULT_CALLBACKS / DEFAULT_MONITORS are in [standard]
    from trainbus._defaults import EXPECTED_CALLBACKS, EXPECTED_MONITORS

    assert {d for _, _, d in (*EXPECTED_CALLBACKS, *EXPECTED_MONITORS)} <= bundles["standard"]
    # the generated catalogue agrees with core/pyproject.toml
    from trainbus.bus.catalogue import BUNDLES

    assert {b: set(m) for b, m in BUNDLES.items()} == bundles


@pytest.mark.slow
def test_standard_bundle_in_a_fresh_environment(fresh_venv, tmp_path) -> None:
    bundles = _bundles()
    venv = fresh_venv("standard", zygote=True)
    # nothing of trainbus is visible before the install: the test environment does not leak
    assert venv.distributions() == {}
    assert "No module named 'trainbus'" in venv.py("import trainbus", check=False, zygote=False).stderr
    venv.install("trainbus[standard]")
    _check_bundle(venv, "standard", bundles)
    # the defaults are complete (no "missing" warning) and a real run with them writes its files
    logdir = tmp_path / "log"
    code = f"""
import json, warnings
warnings.simplefilter("error")
from trainbus import DEFAULT_CALLBACKS, DEFAULT_MONITORS, TrainConfig, launch_train_with_config
from trainbus.train import SimpleTrainer
from trainbus.testing import TinyModel, tiny_dataflow
from trainbus.utils import logger
logger.set_logger_dir({str(logdir)!r}, action="k")
cbs = [type(c).__name__ for c in DEFAULT_CALLBACKS()]
mons = [type(m).__name__ for m in DEFAULT_MONITORS()]
cfg = TrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), max_epoch=2, steps_per_epoch=3)
launch_train_with_config(cfg, SimpleTrainer())
print(json.dumps([cbs, mons]))
"""
    cbs, mons = venv.py_json(code)
    # MergeAllSummaries is a factory: its objects' class is named after the variant it chose
    assert [c.split("_")[0] for c in cbs] == ["MovingAverageSummary", "ProgressBar", "MergeAllSummaries", "RunUpdateOps"]
    assert mons == ["TFEventWriter", "JSONWriter", "ScalarPrinter"]
    stats = json.loads((logdir / "stats.json").read_text())
    assert [s["epoch_num"] for s in stats] == [1, 2]
    assert list(logdir.glob("events.out.tfevents.*"))
    # OpenCV and scipy are trainbus-dataflow's extras, not in [standard]: every name still imports,
    # and what needs one of them says which extra to install
    assert venv.py_json(_EXTRAS_PROBE) == {
        "cv2": False, "scipy": False, "star": True,
        "resize": "ImportError: trainbus.dataflow's image support (imgaug, ImageFromFile, the image datasets) "
                  "needs OpenCV; OpenCV (the cv2 module) is not installed in this environment. Install it with: "
                  "pip install 'trainbus-dataflow[image]' (or: pip install opencv-python-headless)",
        "mat": "ImportError: SVHN reads MATLAB .mat files with scipy; scipy is not installed in this environment. "
               "Install it with: pip install 'trainbus-dataflow[mat]' (or: pip install scipy)"}


@pytest.mark.slow
def test_distributed_then_all_bundle_in_a_fresh_environment(fresh_venv) -> None:
    bundles = _bundles()
    venv = fresh_venv("distributed", zygote=True)
    venv.install("trainbus[distributed]")
    _check_bundle(venv, "distributed", bundles)
    # [all] asks for trainbus-dataflow's extras; the wheelhouse has no third-party wheels, so the
    # development environment's copies of OpenCV and scipy (kept apart, under <venv>/opt) are
    # made visible first, as the heavy dependencies are, and satisfy them
    (venv.site / "_trainbus_test_extras.pth").write_text(f"{opt_packages('image')}\n{opt_packages('mat')}\n")
    venv.install("trainbus[all]")
    _check_bundle(venv, "all", bundles)
    requires = venv.py_json("import json, importlib.metadata as m\n"
                            "print(json.dumps([m.requires('trainbus'), m.requires('trainbus-dataflow')]))")
    assert 'trainbus-dataflow[image,mat]; extra == "all"' in requires[0]
    assert {'opencv-python-headless>=4.8; extra == "image"', 'scipy>=1.10; extra == "mat"'} <= set(requires[1])
    # OpenCV resizes, scipy reads (here: finds no file)
    probe = venv.py_json(_EXTRAS_PROBE)
    assert probe["cv2"] and probe["scipy"] and probe["star"]
    assert probe["resize"] == [4, 6, 3]
    assert probe["mat"].startswith("FileNotFoundError") and "train_32x32.mat" in probe["mat"], probe["mat"]
    # the opt-in backends stay out of [all] and say how to get them
    for dist in OPT_IN:
        assert dist not in venv.distributions()
