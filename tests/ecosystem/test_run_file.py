"""``trainbus train RUN.toml``: a valid file trains for real; ``--dry-run`` prints the resolved
plan; every mistake of a bad file is reported at once with its line, before anything starts."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import zygote  # tests/_support

from trainbus.bus import registry as _registry
from trainbus.runfile import RunConfigError, load_run_file, scan_key_lines

HERE = pathlib.Path(__file__).resolve().parent / "runfiles"


def _trainbus(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    # forked from the worker's zygote (tests/_support/zygote.py): a process of its own, TensorFlow imported
    return zygote.run([sys.executable, "-m", "trainbus", *args], cwd=cwd, env=env, timeout=300)


def _line_of(path: pathlib.Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


@pytest.fixture()
def valid_file(tmp_path) -> pathlib.Path:
    p = tmp_path / "run.toml"
    p.write_text((HERE / "valid.toml").read_text().replace("LOGDIR", str(tmp_path / "log")))
    (tmp_path / "tinyrun.py").write_text((HERE / "tinyrun.py").read_text())
    return p


def test_valid_file_trains_for_real(valid_file, tmp_path) -> None:
    r = _trainbus("train", str(valid_file), cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    log = tmp_path / "log"
    # JSONWriter (by name): one stats entry per epoch
    stats = json.loads((log / "stats.json").read_text())
    assert [s["epoch_num"] for s in stats] == [1, 2, 3]
    assert [s["global_step"] for s in stats] == [4, 8, 12]
    assert stats[-1]["cost"] < stats[0]["cost"]  # it learned
    # ModelSaver(max_to_keep=2) (by name, with its argument): the last two checkpoints remain
    kept = sorted(p.name for p in log.glob("model-*.index"))
    assert kept == ["model-12.index", "model-8.index"], sorted(p.name for p in log.iterdir())
    # the model's argument reached the model: learning_rate in the checkpoint is 0.05
    import tensorflow as tf

    assert tf.train.load_variable(str(log / "model-12"), "learning_rate") == pytest.approx(0.05)
    # ScalarPrinter (by name) printed the cost after each epoch
    assert (r.stdout + r.stderr).count("cost: ") >= 3


def test_dry_run_prints_the_plan_and_trains_nothing(valid_file, tmp_path) -> None:
    r = _trainbus("train", str(valid_file), "--dry-run", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    lines = out.splitlines()
    assert lines[0] == f"run plan of {valid_file}"

    def row(label: str) -> str:
        return next(line for line in lines if line.strip().startswith(label + " "))

    assert "tinyrun:LinearNet(lr=0.05)" in row("model")
    assert "tinyrun:make_data(n=64, batch=8)" in row("data") and "not called in a dry run" in row("data")
    assert "SimpleTrainer()" in row("trainer") and "trainbus 0.1.0 (core)" in row("trainer")
    assert "ModelSaver(max_to_keep=2)" in row("callbacks[0]") and "trainbus-saver 0.1.0" in row("callbacks[0]")
    assert "PeriodicTrigger(triggerable=trainbus.testing:HookRecorder(tag='every2'), every_k_steps=2)" in row("callbacks[1]")
    assert "trainbus 0.1.0 (core)" in row("callbacks[1]")
    assert "JSONWriter()" in row("monitors[0]") and "trainbus-monitor-json 0.1.0" in row("monitors[0]")
    assert "ScalarPrinter()" in row("monitors[1]") and "trainbus-monitor-stdout 0.1.0" in row("monitors[1]")
    assert "DEFAULT_CALLBACKS" in row("extra_callbacks[0]")
    assert "steps_per_epoch=4 starting_epoch=1 max_epoch=3" in row("loop")
    # the callback order per hook (cli.describe_order): ModelSaver before the trigger, in file order
    order = out.split("callback order per hook:\n", 1)[1]
    trigger_epoch = next(line for line in order.splitlines() if line.strip().startswith("trigger_epoch:"))
    assert trigger_epoch.index("ModelSaver") < trigger_epoch.index("JSONWriter")
    assert "callback[1]:PeriodicTrigger" in order
    # nothing was trained: no log directory, no checkpoint
    assert not (tmp_path / "log").exists()


def test_three_mistakes_are_reported_at_once_with_their_lines(tmp_path, monkeypatch) -> None:
    src = HERE / "three_mistakes.toml"
    # a first-party name whose distribution is not installed (the catalogue knows who provides it)
    monkeypatch.setitem(_registry.KNOWN_PROVIDERS["trainbus.callbacks"], "GradientNoiseInjector", "trainbus-noise")
    monkeypatch.syspath_prepend(str(HERE))
    with pytest.raises(RunConfigError) as err:
        load_run_file(src)
    problems = err.value.problems
    assert len(problems) == 3, str(err.value)
    by_line = {p.line: p for p in problems}
    depth, misspelt, missing = (_line_of(src, "depth = 3"), _line_of(src, '"ModelSavr"'),
                                _line_of(src, '"GradientNoiseInjector"'))
    assert sorted(by_line) == [depth, misspelt, missing]
    assert by_line[depth].where == "model.args.depth"
    assert "'depth' is not a parameter" in by_line[depth].message and "lr, dim" in by_line[depth].message
    assert by_line[misspelt].where == "callbacks[1].name"
    assert "Did you mean ModelSaver" in by_line[misspelt].message
    assert by_line[missing].where == "callbacks[2].name"
    assert "pip install trainbus-noise" in by_line[missing].message
    text = str(err.value)
    assert text.startswith(f"{src}: 3 problem(s); nothing was started")
    assert f"{src}:{depth}: model.args.depth:" in text


def test_cli_reports_the_mistakes_and_exits_2(tmp_path) -> None:
    src = HERE / "three_mistakes.toml"
    r = _trainbus("train", str(src), cwd=HERE)
    assert r.returncode == 2
    err = r.stderr
    for needle in ("depth = 3", '"ModelSavr"', '"GradientNoiseInjector"'):
        assert f"{src}:{_line_of(src, needle)}: " in err, err
    assert "no installed distribution provides trainbus.callbacks.GradientNoiseInjector" in err
    assert "Epoch" not in r.stdout  # nothing started


def test_structural_mistakes_each_with_a_line(tmp_path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text(
        "[model]\n"                                        # 1
        "klass = \"tinyrun:LinearNet\"\n"                 # 2  unknown key / missing class
        "[data]\n"                                         # 3
        "function = \"tinyrun:no_such_function\"\n"       # 4
        "[trainer]\n"                                      # 5
        "name = \"SimpleTrainer\"\n"                       # 6
        "args = { nonsense = 1 }\n"                        # 7
        "[[monitors]]\n"                                   # 8
        "name = \"JSONWriter\"\n"                          # 9
        "[train]\n"                                        # 10
        "max_epoch = \"two\"\n"                            # 11
        "step_per_epoch = 3\n"                             # 12
        "[extras]\n"                                       # 13
    )
    (tmp_path / "tinyrun.py").write_text((HERE / "tinyrun.py").read_text())
    with pytest.raises(RunConfigError) as err:
        load_run_file(p)
    got = {(pr.line, pr.where) for pr in err.value.problems}
    assert (1, "model") in got                      # missing class = ...
    assert (2, "model.klass") in got                # unknown key
    assert (4, "data.function") in got              # no such function
    assert (7, "trainer.args.nonsense") in got      # not a parameter of SimpleTrainer
    assert (11, "train.max_epoch") in got
    assert (12, "train.step_per_epoch") in got
    assert (13, "extras") in got
    msgs = "\n".join(pr.message for pr in err.value.problems)
    assert "did you mean 'steps_per_epoch'" in msgs and "did you mean 'class'" in msgs


def test_toml_syntax_error_is_one_line_with_file_line_and_column(tmp_path) -> None:
    p = tmp_path / "broken.toml"
    p.write_text("[model]\nclass = \"a:B\"\n[train\nmax_epoch = 1\n")
    with pytest.raises(RunConfigError) as err:
        load_run_file(p)
    (problem,) = err.value.problems
    assert (problem.line, problem.column) == (3, 7) and "not valid TOML" in problem.message
    assert str(err.value) == (f"{p}:3:7: not valid TOML: Expected ']' at the end of a table declaration; "
                              "nothing was started")
    # the parser's "at end of document" is placed at the end of the last line
    p.write_text('[model]\nclass = "a:B\n\n')
    with pytest.raises(RunConfigError) as err:
        load_run_file(p)
    assert str(err.value).startswith(f"{p}:2:") and "\n" not in str(err.value)
    # and through the command: that one line on stderr, exit status 2, nothing started
    p.write_text("[model]\nclass = \"a:B\"\n[train\nmax_epoch = 1\n")
    r = _trainbus("train", str(p), cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip() == f"trainbus train: {err.value.filename}:3:7: not valid TOML: " \
                                                 "Expected ']' at the end of a table declaration; nothing was started"
    assert [x.name for x in tmp_path.iterdir()] == ["broken.toml"]


def test_scan_key_lines_follows_arrays_of_tables_and_inline_tables() -> None:
    text = ('[[callbacks]]\nname = "A"\n\n[[callbacks]]\nname = "B"\n[callbacks.args]\nx = 1\n'
            's = """\n[[callbacks]]\n"""\n[train]\nmax_epoch = 2\nargs = { a = { b = [1,\n 2] } }\n')
    lines = scan_key_lines(text)
    assert lines[("callbacks", 0, "name")] == 2
    assert lines[("callbacks", 1)] == 4
    assert lines[("callbacks", 1, "args", "x")] == 7
    assert ("callbacks", 2) not in lines  # the header inside the multi-line string is text
    assert lines[("train", "max_epoch")] == 12
    assert lines[("train", "args", "a", "b", 1)] == 14
