"""``trainbus train RUN.toml`` as users run it, through the real command: ``--set PATH=VALUE``
overrides (checked with the file, a bad one named with a did-you-mean, exit 2), a finished run
rerun (exit 0, nothing trained, one line saying how to go on, then ``--set train.max_epoch`` to
continue), the table of trainable variables at setup, the end-of-run summary, no TensorFlow C++
noise on stderr, and the run-file check catching checkpoint callbacks that would fail when
training starts (in ``--dry-run`` too) and telling what the run does with a non-empty log dir."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import zygote  # tests/_support

HERE = pathlib.Path(__file__).resolve().parent / "runfiles"
TRAINBUS = [sys.executable, "-m", "trainbus"]

pytestmark = pytest.mark.timeout(400)

RUN = """\
[model]
class = "tinyrun:LinearNet"
args = {{ lr = 0.05 }}

[data]
function = "tinyrun:make_data"
args = {{ n = 64, batch = 8 }}

[[callbacks]]
name = "ModelSaver"
args = {{ max_to_keep = 3 }}

[[callbacks]]
name = "MinSaver"
args = {{ monitor_stat = "cost" }}

[[monitors]]
name = "JSONWriter"

[train]
steps_per_epoch = 4
max_epoch = 1
logdir = "{logdir}"
logdir_action = "k"
"""

# the TensorFlow C++ notices a quiet run must not show
NOISE = ("absl::InitializeLog", "cudart_stub", "cuInit", "cpu_feature_guard", "oneDNN", "Local rendezvous")


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "TRAINBUS_DEBUG")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    return env


def _train(run: pathlib.Path, *args: str, env: dict | None = None, fresh: bool = False) -> subprocess.CompletedProcess:
    """``trainbus train RUN ARGS``: forked from the worker's zygote (tests/_support/zygote.py), or
    in a new interpreter when ``fresh`` (what TensorFlow prints when imported is checked)."""
    if not fresh:
        return zygote.run([*TRAINBUS, "train", str(run), *args], cwd=run.parent, env=env or _env(), timeout=300)
    return subprocess.run([*TRAINBUS, "train", str(run), *args], capture_output=True, text=True, cwd=run.parent,
                          env=env or _env(), timeout=300)


def _epochs(logdir: pathlib.Path) -> list[int]:
    return sorted({r["epoch_num"] for r in json.loads((logdir / "stats.json").read_text())})


def _write(tmp: pathlib.Path, text: str = RUN) -> tuple[pathlib.Path, pathlib.Path]:
    logdir = tmp / "log"
    run = tmp / "run.toml"
    run.write_text(text.format(logdir=logdir.as_posix()))
    return run, logdir


def test_overrides_finished_run_summary_and_table(tmp_path):
    run, logdir = _write(tmp_path)
    # 1. the file says max_epoch = 1 and max_to_keep = 3; --set changes both (two values, two tables)
    r = _train(run, "--set", "train.max_epoch=2", "--set", "callbacks[0].args.max_to_keep=1", fresh=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert _epochs(logdir) == [1, 2]
    assert sorted(p.name for p in logdir.glob("model-*.index")) == ["model-8.index"]  # max_to_keep = 1
    out = r.stdout
    # the trainable variables at setup, before the first epoch
    table = out.index("List of Trainable Variables:")
    assert table < out.index("Start Epoch 1")
    assert re.search(r"^w\s+\[3\]\s+3$", out, re.M) and re.search(r"^bias\s+\[\]\s+1$", out, re.M)
    assert "Number of parameters (elements): 4" in out
    # the summary at the end
    summary = out[out.index("Run summary:"):]
    assert re.search(r"Run summary: 2 epoch\(s\) \(epoch 1 to 2\) and 8 step\(s\) in [\d.]+ sec, global step 8; "
                     r"reached max_epoch = 2", summary), summary
    stats = json.loads((logdir / "stats.json").read_text())
    costs = [(rec["epoch_num"], rec["global_step"], rec["cost"]) for rec in stats if "cost" in rec]
    best = min(costs, key=lambda c: c[2])
    cost_line = next(ln for ln in summary.splitlines() if ln.strip().startswith("cost "))
    assert f"min {best[2]:.4f}".rstrip("0") in cost_line and f"at epoch {best[0]} (step {best[1]})" in cost_line
    assert "max " not in cost_line  # MinSaver says which way is better
    assert "checkpoints kept: model-8, min-cost.tfmodel" in summary
    assert f"log directory: {logdir}" in summary
    assert not [n for n in NOISE if n in r.stderr], r.stderr
    before = (logdir / "stats.json").read_bytes()

    # 2. the same command again: the run finished; nothing trained or changed, one line, exit 0
    r = _train(run, "--set", "train.max_epoch=2", "--set", "callbacks[0].args.max_to_keep=1")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == (
        f"trainbus train: the run in {logdir} already finished: it trained up to epoch 2 and max_epoch is 2; "
        f"nothing to do. To train more epochs: trainbus train {run} --set train.max_epoch=4")
    assert "Start Epoch" not in r.stdout and "Will load checkpoint" not in r.stdout  # nothing else said
    assert (logdir / "stats.json").read_bytes() == before
    assert sorted(p.name for p in logdir.glob("model-*.index")) == ["model-8.index"]

    # 3. as the line says: a larger max_epoch continues with the next epoch only
    r = _train(run, "--set", "train.max_epoch=3", "--set", "callbacks[0].args.max_to_keep=1")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert _epochs(logdir) == [1, 2, 3]
    assert "Start Epoch 3" in r.stdout and "Start Epoch 2" not in r.stdout
    assert re.search(r"Run summary: 1 epoch\(s\) \(epoch 3 to 3\) and 4 step\(s\) .*global step 12; reached "
                     r"max_epoch = 3", r.stdout)


def test_bad_overrides_are_named_with_did_you_mean(tmp_path):
    run, logdir = _write(tmp_path)
    r = _train(run, "--dry-run", "--set", "train.max_epochs=3", "--set", "callbacks[1].args.monitor_stat=5",
               "--set", "trian.seed=1")
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [ln.strip() for ln in r.stderr.strip().splitlines()]
    assert lines[0] == f"trainbus train: {run}: 3 problem(s); nothing was started:"
    assert any("train.max_epochs: unknown loop option 'max_epochs' (did you mean 'max_epoch'?)" in ln
               and ln.endswith("(from --set train.max_epochs=3)") for ln in lines), lines
    assert any(ln.startswith(f"{run}:") and "callbacks[1].args.monitor_stat" in ln and "is an integer" in ln
               and ln.endswith("(from --set callbacks[1].args.monitor_stat=5)") for ln in lines), lines
    assert any("unknown section 'trian' (did you mean 'train'?)" in ln and ln.endswith("(from --set trian.seed=1)")
               for ln in lines), lines
    # a --set that cannot be applied at all: one problem naming it
    for bad, words in (("callbacks[7].args.x=1", "the run file has 2 callbacks entries (callbacks[0] to callbacks[1])"),
                       ("train.max_epoch", "must look like PATH=VALUE"),
                       ("train..x=1", "cannot read the path"),
                       ("train.max_epoch=[1,", "is not a TOML value")):
        r = _train(run, "--dry-run", "--set", bad)
        assert r.returncode == 2, (bad, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 2 and words in lines[1] and f"--set {bad}" in lines[1], (bad, r.stderr)
    assert not logdir.exists()
    # a word that is not TOML is a string: the log directory given on the command line
    r = _train(run, "--dry-run", "--set", f"train.logdir={tmp_path.as_posix()}/other")
    assert r.returncode == 0, r.stderr
    assert f"{tmp_path.as_posix()}/other: does not exist; created when training starts" in r.stdout


def _problems(r: subprocess.CompletedProcess) -> list[str]:
    return [ln.strip() for ln in r.stderr.strip().splitlines()[1:]]


def test_check_catches_checkpoint_callbacks_that_would_fail(tmp_path):
    # MinSaver listed before ModelSaver: MinSaver copies the checkpoint ModelSaver writes
    swapped = RUN.replace('name = "ModelSaver"\nargs = {{ max_to_keep = 3 }}', "X").replace(
        'name = "MinSaver"\nargs = {{ monitor_stat = "cost" }}', 'name = "ModelSaver"\nargs = {{ max_to_keep = 3 }}')
    swapped = swapped.replace("X", 'name = "MinSaver"\nargs = {{ monitor_stat = "cost" }}')
    run, logdir = _write(tmp_path, swapped)
    line = swapped.splitlines().index('name = "MinSaver"')  # 0-based line of its name: 1-based line of its table
    for args in (("--dry-run",), ()):
        r = _train(run, *args)
        assert r.returncode == 2, (args, r.stdout[-2000:], r.stderr)
        probs = _problems(r)
        assert len(probs) == 1, probs
        assert probs[0].startswith(f"{run}:{line}: callbacks[0]: MinSaver(monitor_stat='cost') copies the checkpoints")
        assert probs[0].endswith("move this entry after callbacks[1] (line 13)"), probs[0]
        assert "Traceback" not in r.stderr and not logdir.exists()
    # a ModelSaver with no log directory to write into
    run, logdir = _write(tmp_path, RUN.replace('logdir = "{logdir}"\nlogdir_action = "k"\n', ""))
    r = _train(run, "--dry-run")
    assert r.returncode == 2, r.stdout + r.stderr
    probs = _problems(r)
    assert [p.split(": ")[1] for p in probs] == ["callbacks[0]", "callbacks[1]"], probs
    assert probs[0] == (f"{run}:9: callbacks[0]: ModelSaver writes checkpoints into the log directory, but the run "
                        "file sets none: add logdir = \"train_log/<name>\" to [train], or give checkpoint_dir in its args")
    # a log directory that cannot be created (a file where a directory must be)
    (tmp_path / "afile").write_text("x")
    run, _ = _write(tmp_path, RUN.replace('logdir = "{logdir}"', 'logdir = "' + (tmp_path / "afile").as_posix()
                                          + '/sub"'))
    for args in (("--dry-run",), ()):
        r = _train(run, *args)
        assert r.returncode == 2, (args, r.stdout[-2000:], r.stderr)
        probs = _problems(r)
        assert len(probs) == 1 and probs[0].startswith(f"{run}:23: train.logdir:"), probs


def test_dry_run_says_what_the_run_does_with_the_log_dir(tmp_path):
    run, logdir = _write(tmp_path)
    r = _train(run, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert f"{logdir}: does not exist; created when training starts" in r.stdout
    logdir.mkdir()
    (logdir / "stats.json").write_text(json.dumps([{"epoch_num": 1, "global_step": 4, "cost": 0.5}]))
    r = _train(run, "--dry-run", "--set", "train.max_epoch=5")
    assert r.returncode == 0, r.stderr
    assert f'{logdir}: not empty; kept (logdir_action = "k"): the run resumes after epoch 1' in r.stdout
    r = _train(run, "--dry-run")
    assert "already reached max_epoch = 1 (epoch 1), so training does nothing" in r.stdout
    r = _train(run, "--dry-run", "--set", 'train.logdir_action="b"')
    assert "not empty; its content is moved to a time-stamped backup beside it" in r.stdout
    # no logdir_action and no terminal: the real run refuses, and the dry run says so with the file's line
    r = _train(run, "--dry-run", "--set", 'train.logdir_action="k"', "--set", "train.resume=false")
    assert "kept (logdir_action = \"k\"), and the run starts over (resume = false)" in r.stdout
    text = run.read_text().replace('logdir_action = "k"\n', "")
    run.write_text(text)
    r = zygote.run([*TRAINBUS, "train", str(run), "--dry-run"], cwd=tmp_path, env=_env(), timeout=300)  # stdin: /dev/null
    assert r.returncode == 2
    assert "exists and is not empty; add logdir_action" in r.stderr
