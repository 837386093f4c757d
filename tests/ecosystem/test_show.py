"""``trainbus show LOGDIR... [--plot FILE.png]`` through the real command: the per-epoch table of a
real training's stats.json, its best values and checkpoints (a damaged one named), several runs
side by side, the curves drawn into a PNG that is read back, lenient reading of non-finite
values, the speed on a 1000-epoch history without TensorFlow, and the one-line mistakes."""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import subprocess
import sys
import time

import pytest
import zygote  # tests/_support

HERE = pathlib.Path(__file__).resolve().parent / "runfiles"
TRAINBUS = [sys.executable, "-m", "trainbus"]

pytestmark = pytest.mark.timeout(300)


def _run(*args: str, cwd: pathlib.Path | None = None, env: dict | None = None, timeout: float = 240,
         fresh: bool = False):
    """``trainbus ARGS``: forked from the worker's zygote (tests/_support/zygote.py), or in a new
    interpreter when ``fresh`` (what happens at interpreter start matters)."""
    env = env if env is not None else dict(os.environ, TRAINBUS_DEBUG="")
    if not fresh:
        return zygote.run([*TRAINBUS, *args], cwd=cwd, env=env, timeout=timeout)
    return subprocess.run([*TRAINBUS, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env)


RUN = """
[model]
class = "tinyrun:LinearNet"
args = {{ lr = {lr} }}

[data]
function = "tinyrun:make_data"
args = {{ n = 64, batch = 8 }}

[[callbacks]]
name = "ModelSaver"
args = {{ max_to_keep = 2 }}

[[callbacks]]
name = "MinSaver"
args = {{ monitor_stat = "cost" }}

[[monitors]]
name = "JSONWriter"

[train]
steps_per_epoch = 4
max_epoch = 3
logdir = "{logdir}"
logdir_action = "k"
"""


def _train(tmp: pathlib.Path, name: str, lr: float) -> pathlib.Path:
    """A real tiny training by ``trainbus train`` (ModelSaver, MinSaver on the cost, JSONWriter)."""
    logdir = tmp / name
    run = tmp / f"{name}.toml"
    run.write_text(RUN.format(lr=lr, logdir=logdir.as_posix()))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    r = _run("train", str(run), cwd=tmp, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return logdir


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
    tmp = tmp_path_factory.mktemp("show")
    return _train(tmp, "fast", 0.1), _train(tmp, "slow", 0.01)


def _stats(logdir: pathlib.Path) -> list[dict]:
    return json.loads((logdir / "stats.json").read_text())


def test_show_prints_every_epoch_best_values_and_readable_checkpoints(two_runs):
    fast, _ = two_runs
    r = _run("show", str(fast))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    stats = _stats(fast)
    epochs = sorted({rec["epoch_num"] for rec in stats})
    assert epochs == [1, 2, 3]
    last = [rec for rec in stats if rec["epoch_num"] == 3][-1]
    assert f"run {fast}: 3 epoch(s), last epoch 3, global step {last['global_step']}" in out
    header = next(ln for ln in out.splitlines() if ln.strip().startswith("epoch"))
    assert "step" in header and "cost" in header
    rows = [ln.split() for ln in out.splitlines() if re.match(r"^\s+\d+\s+\d+\s", ln)]
    assert [int(row[0]) for row in rows] == epochs
    cost_col = header.split().index("cost")
    costs = {rec["epoch_num"]: rec["cost"] for rec in stats if "cost" in rec}
    for row in rows:
        assert math.isclose(float(row[cost_col]), costs[int(row[0])], rel_tol=1e-3, abs_tol=1e-4)
    # MinSaver's min-cost.tfmodel says the cost is best when smallest: one direction, the right epoch
    best_epoch = min(costs, key=costs.get)
    assert re.search(rf"cost\s+min \S+ at epoch {best_epoch} \(step \d+\)", out), out
    assert not re.search(r"cost\s+max ", out)
    ckpt_lines = [ln.strip() for ln in out.splitlines() if ".tfmodel" in ln or ln.strip().startswith("model-")]
    assert any(ln.startswith("min-cost.tfmodel") and ln.endswith("readable") for ln in ckpt_lines), out
    models = [ln for ln in ckpt_lines if ln.startswith("model-")]
    assert len(models) == 2 and all(ln.endswith("readable") for ln in models), out  # max_to_keep = 2


def test_show_names_a_damaged_checkpoint(two_runs, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(two_runs[0], copy)
    index = sorted(copy.glob("model-*.index"))[-1]
    index.write_bytes(index.read_bytes()[:-20])  # the table footer is gone
    data = next(copy.glob("min-cost.tfmodel.data-*"))
    data.unlink()
    r = _run("show", str(copy))
    assert r.returncode == 0, r.stderr
    bad = {ln.split()[0]: ln for ln in r.stdout.splitlines() if "NOT READABLE" in ln}
    assert set(bad) == {index.name[:-len(".index")], "min-cost.tfmodel"}, r.stdout
    assert "no table footer" in bad[index.name[:-len(".index")]]
    assert "no .data-* file" in bad["min-cost.tfmodel"]


def test_show_several_runs_side_by_side_and_plot_png(two_runs, tmp_path, matplotlib_importable):
    from PIL import Image

    fast, slow = two_runs
    png = tmp_path / "curves" / "runs.png"
    r = _run("show", str(fast), str(slow), "--plot", str(png), env=dict(os.environ, TRAINBUS_DEBUG=""))
    assert r.returncode == 0, r.stderr
    side = r.stdout[r.stdout.index("side by side:"):]
    header = side.splitlines()[1].split()
    assert header == ["scalar", "fast", "slow"]
    last_fast = [rec for rec in _stats(fast) if "cost" in rec][-1]["cost"]
    last_slow = [rec for rec in _stats(slow) if "cost" in rec][-1]["cost"]
    cost_last = next(ln for ln in side.splitlines() if ln.split()[:2] == ["cost", "last"])
    vals = [float(x) for x in re.findall(r"(\S+) \(epoch 3\)", cost_last)]
    assert len(vals) == 2
    assert math.isclose(vals[0], last_fast, rel_tol=1e-3, abs_tol=1e-4)
    assert math.isclose(vals[1], last_slow, rel_tol=1e-3, abs_tol=1e-4)
    assert f"written to {png}" in r.stdout
    img = Image.open(png)
    assert img.format == "PNG"
    assert img.size[0] >= 800 and img.size[1] >= 250, img.size
    rgb = img.convert("RGB")
    counts = {c: 0 for c in ((0x1F, 0x77, 0xB4), (0xFF, 0x7F, 0x0E))}  # the first two colours of the cycle
    for px in rgb.getdata():
        if px in counts:
            counts[px] += 1
    assert all(n > 50 for n in counts.values()), counts  # both runs' curves are drawn


def _synthetic(dirname: pathlib.Path, n: int) -> None:
    dirname.mkdir()
    recs = []
    for e in range(1, n + 1):
        recs.append({"epoch_num": e, "global_step": 10 * e, "loss": 1.0 / e, "accuracy": 1 - 1.0 / (e + 1)})
    recs[4]["loss"] = "NaN"           # strict JSON's non-finite values, as JSONWriter writes them
    recs[5]["accuracy"] = "Infinity"
    recs[6]["loss"] = "-Infinity"
    (dirname / "stats.json").write_text(json.dumps(recs))


def test_show_reads_nonfinite_strings_and_is_fast_without_tensorflow(tmp_path):
    big = tmp_path / "big"
    _synthetic(big, 1000)
    probe = ("import sys, time\nt = time.perf_counter()\nfrom trainbus.cli import main\n"
             f"rc = main(['show', {str(big)!r}])\n"
             "sys.stderr.write(f'\\nELAPSED {time.perf_counter() - t:.3f} TF {\"tensorflow\" in sys.modules}\\n')\n"
             "sys.exit(rc)\n")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    elapsed, tf_loaded = re.search(r"ELAPSED (\S+) TF (\w+)", r.stderr).groups()
    assert tf_loaded == "False"
    assert float(elapsed) < 1.0, elapsed
    rows = {int(ln.split()[0]): ln.split() for ln in r.stdout.splitlines() if re.match(r"^\s+\d+\s+\d+\s", ln)}
    assert len(rows) == 1000
    assert rows[5][2] == "nan" and rows[6][3] == "inf" and rows[7][2] == "-inf"
    # no saver says a direction: both extremes; NaN is never best, -inf is the smallest loss
    assert re.search(r"loss\s+min -inf at epoch 7 \(step 70\)", r.stdout)
    assert re.search(r"loss\s+max 1 at epoch 1 \(step 10\)", r.stdout)
    assert re.search(r"accuracy\s+max inf at epoch 6 \(step 60\)", r.stdout)
    t = time.perf_counter()
    r = _run("show", str(big), "--tail", "3")
    assert r.returncode == 0 and "(the last 3 of 1000 epochs)" in r.stdout
    assert len([ln for ln in r.stdout.splitlines() if re.match(r"^\s+\d+\s+\d+\s", ln)]) == 3
    assert time.perf_counter() - t < 10


def test_show_mistakes_are_one_line_exit_2(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "stats.json").write_text("[{\"epoch_num\": 1,")
    for args, words in ((["show", str(tmp_path / "missing")], "does not exist"),
                        (["show", str(tmp_path / "empty")], "has no stats.json and no checkpoint"),
                        (["show", str(tmp_path / "bad")], "cannot be read"),
                        (["show"], "LOGDIR")):
        r = _run(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and words in lines[0], (args, r.stderr)
        assert "Traceback" not in r.stderr


def test_plot_without_matplotlib_says_what_to_install(tmp_path):
    run = tmp_path / "run"
    _synthetic(run, 10)
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    # a sitecustomize that makes matplotlib unimportable, as on an install without trainbus[plot]
    (blocker / "sitecustomize.py").write_text(
        "import sys\nclass _Block:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'matplotlib' or name.startswith('matplotlib.'):\n"
        "            raise ModuleNotFoundError(\"No module named 'matplotlib'\", name='matplotlib')\n"
        "sys.meta_path.insert(0, _Block())\n")
    env = dict(os.environ, PYTHONPATH=str(blocker), TRAINBUS_DEBUG="")
    png = tmp_path / "x.png"
    r = _run("show", str(run), "--plot", str(png), env=env, fresh=True)  # sitecustomize runs at interpreter start
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines() == [
        "trainbus show: --plot needs matplotlib, which is not installed here: pip install \"trainbus[plot]\" "
        "(or: pip install matplotlib)"]
    assert "run " in r.stdout  # the table was still printed
    assert not png.exists()
