"""The README's main job on a ``pip install "trainbus[standard]"`` environment with nothing else:
the digits example trains (EarlyStopping and its data come with the bundle and the example; no
scikit-learn, which the test makes unimportable), TensorBoard is installed by the bundle, and
``trainbus show`` of that environment reads the run."""

from __future__ import annotations

import json
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

# a .pth line runs at interpreter start: scikit-learn is not there, as on a machine without it
BLOCK_SKLEARN = (
    "import sys; sys.meta_path.insert(0, type('NoSklearn', (), {'find_spec': staticmethod("
    "lambda name, path=None, target=None: (_ for _ in ()).throw(ModuleNotFoundError("
    "\"No module named 'sklearn'\", name='sklearn')) if name.split('.')[0] == 'sklearn' else None)})())\n")


def test_digits_example_on_the_standard_bundle(fresh_venv, tmp_path):
    venv = fresh_venv("standard-example")
    venv.install("trainbus[standard]")
    dists = venv.distributions()
    assert "trainbus-misc" in dists
    site = pathlib.Path(venv.py("import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "zz_no_sklearn.pth").write_text(BLOCK_SKLEARN)
    assert "No module named 'sklearn'" in venv.py("import sklearn", check=False).stderr
    venv.py("import tensorboard")  # the bundle's TensorBoard
    logdir = tmp_path / "digits"
    r = venv.run(venv.python, str(ROOT / "examples" / "digits_convnet.py"), "--logdir", str(logdir),
                 "--max-epoch", "3", cwd=str(tmp_path), timeout=600)
    last = [ln for ln in r.stdout.splitlines() if ln.startswith("validation error:")][-1]
    assert f"look at them with: trainbus show {logdir}" in last
    assert float(re.search(r"best ([\d.]+)", last).group(1)) < 0.2
    stats = json.loads((logdir / "stats.json").read_text())
    assert [s["epoch_num"] for s in stats if "val-error" in s] == [1, 2, 3]
    shown = venv.run(str(venv.path / "bin" / "trainbus"), "show", str(logdir), "--tail", "1")
    assert re.search(r"^\s+3\s+\d+\s", shown.stdout, re.M)
    assert "min-val-error.tfmodel" in shown.stdout and "readable" in shown.stdout
