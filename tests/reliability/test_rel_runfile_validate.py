"""Nothing is deleted, moved or created before the whole run is checked: a run file with
mistakes, or a ``launch_train_with_config`` run that fails before training starts, leaves the
file system exactly as it was, whatever ``logdir_action`` says; the action happens when
training starts, and the messages logged before then still reach ``log.log``."""

from __future__ import annotations

import hashlib
import os
import pathlib
import sys

import pytest
import zygote  # tests/_support

from trainbus.utils import logger

pytestmark = pytest.mark.timeout(200)

RUNFILES = pathlib.Path(__file__).resolve().parents[1] / "ecosystem" / "runfiles"

BAD = """
[model]
class = "tinyrun:LinearNet"
args = {{ lr = 0.05, depth = 3 }}

[data]
function = "tinyrun:make_data"

[[callbacks]]
name = "ModelSaver"
args = {{ max_to_keep = "x" }}

[[callbacks]]
name = "ModelSavr"

[train]
steps_per_epoch = 4
max_epoch = 2
logdir = "{logdir}"
logdir_action = "{action}"
"""


def _populate(d: pathlib.Path) -> None:
    """An earlier run's log directory: 20 files, one in a subdirectory."""
    (d / "sub").mkdir(parents=True)
    for step in (4, 8, 12, 16):
        for suffix in (".index", ".data-00000-of-00001", ".trainbus.json"):
            (d / f"model-{step}{suffix}").write_bytes(os.urandom(64))
    for name in ("checkpoint", "stats.json", "log.log", "graph-1.meta", "events.out.tfevents.1.host",
                 "min-cost.tfmodel.index", "min-cost.tfmodel.data-00000-of-00001"):
        (d / name).write_text(f"content of {name}\n")
    (d / "sub" / "extra.txt").write_text("x")


def _snapshot(root: pathlib.Path) -> dict:
    """Every path under ``root`` (the directory itself included) with its kind, mode, size,
    modification time and content hash; and the siblings of ``root`` (backups, new dirs)."""
    out = {}
    for p in [root, *sorted(root.rglob("*"))] if root.exists() else []:
        st = p.lstat()
        digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
        out[str(p.relative_to(root.parent))] = (p.is_dir(), st.st_mode, st.st_size, st.st_mtime_ns, digest)
    out["siblings"] = sorted(x.name for x in root.parent.iterdir())
    return out


@pytest.fixture()
def rundir(tmp_path, monkeypatch):
    (tmp_path / "tinyrun.py").write_text((RUNFILES / "tinyrun.py").read_text())
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    logger._reset_for_tests()


def test_cli_delete_with_three_mistakes_deletes_nothing(rundir) -> None:
    """The issue's case: ``logdir_action = "d"`` and three argument mistakes; before the fix
    the 20 files were gone when "nothing was started" was printed."""
    log = rundir / "runs" / "log"
    _populate(log)
    before = _snapshot(log)
    p = rundir / "bad.toml"
    p.write_text(BAD.format(logdir=log, action="d"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    # forked from the worker's zygote (tests/_support/zygote.py): a process of its own, TensorFlow imported
    r = zygote.run([sys.executable, "-m", "trainbus", "train", str(p)], cwd=rundir, env=env, timeout=180)
    assert r.returncode == 2, r.stderr[-3000:]
    assert "3 problem(s); nothing was started" in r.stderr
    assert _snapshot(log) == before


@pytest.mark.parametrize("action", ["d", "b", "n", "k"])
def test_every_action_waits_for_the_checks(rundir, action) -> None:
    from trainbus.runfile import RunConfigError, train_from_file

    log = rundir / "runs" / "log"
    _populate(log)
    before = _snapshot(log)
    p = rundir / "bad.toml"
    p.write_text(BAD.format(logdir=log, action=action))
    with pytest.raises(RunConfigError) as err:
        train_from_file(p)
    assert len(err.value.problems) == 3
    assert _snapshot(log) == before
    assert logger.get_logger_dir() is None and logger.pending_logger_dir_action() is None


def test_keep_creates_no_directory_and_no_log_file(rundir) -> None:
    """``"k"`` (or no action) with a directory that does not exist yet: a failed check
    creates neither the directory nor ``log.log``."""
    from trainbus.runfile import RunConfigError, train_from_file

    log = rundir / "runs" / "fresh"
    (rundir / "runs").mkdir()
    p = rundir / "bad.toml"
    p.write_text(BAD.format(logdir=log, action="k"))
    with pytest.raises(RunConfigError):
        train_from_file(p)
    assert list((rundir / "runs").iterdir()) == []


def test_a_problem_found_while_building_the_run_changes_nothing(rundir) -> None:
    """Past the file's checks, the data function returns something that is not a DataFlow:
    still reported before the log directory is touched."""
    from trainbus.runfile import RunConfigError, train_from_file

    (rundir / "baddata.py").write_text("def make():\n    return [1, 2, 3]\n")
    log = rundir / "runs" / "log"
    _populate(log)
    before = _snapshot(log)
    p = rundir / "run.toml"
    p.write_text(f'[model]\nclass = "tinyrun:LinearNet"\n[data]\nfunction = "baddata:make"\n'
                 f'[train]\nsteps_per_epoch = 2\nmax_epoch = 1\nlogdir = "{log}"\nlogdir_action = "d"\n')
    with pytest.raises(RunConfigError, match="must return a DataFlow or an InputSource"):
        train_from_file(p)
    assert _snapshot(log) == before


def _config(**kw):
    from trainbus.testing import TinyModel, tiny_dataflow
    from trainbus.train import TrainConfig

    args = dict(model=TinyModel(), dataflow=tiny_dataflow(), steps_per_epoch=2, max_epoch=1)
    args.update(kw)
    return TrainConfig(**args)


def test_launch_train_with_config_failures_change_nothing(rundir, tb_log) -> None:
    """The Python route: ``set_logger_dir(dir, "d")`` followed by runs that fail before
    training (a model whose graph cannot be built; a monitor given as a callback) leave the
    directory as it was."""
    import tensorflow as tf

    from trainbus.callbacks import JSONWriter, ModelSaver
    from trainbus.testing import TinyModel
    from trainbus.train import SimpleTrainer, launch_train_with_config

    class Broken(TinyModel):
        def build_graph(self, x, y):
            return tf.matmul(x, tf.zeros([7, 7]))  # shapes do not fit

    log = rundir / "runs" / "log"
    _populate(log)
    before = _snapshot(log)
    logger.set_logger_dir(str(log), action="d")
    with pytest.raises(ValueError):
        launch_train_with_config(_config(model=Broken(), callbacks=[ModelSaver()]), SimpleTrainer())
    assert _snapshot(log) == before
    logger.set_logger_dir(str(log), action="b")
    with pytest.raises(TypeError, match="is a monitor"):
        launch_train_with_config(_config(callbacks=[ModelSaver(), JSONWriter()]), SimpleTrainer())
    assert _snapshot(log) == before
    said = [r.getMessage() for r in tb_log if "failed before training started" in r.getMessage()]
    assert len(said) == 2 and f"the log directory {log} was left as it was (its action 'b'" in said[1], said


def test_launch_train_with_config_acts_when_training_starts(rundir) -> None:
    """A run that passes its checks deletes the old content then, and ``log.log`` holds the
    messages logged since ``set_logger_dir``."""
    from trainbus.callbacks import ModelSaver
    from trainbus.train import SimpleTrainer, launch_train_with_config

    log = rundir / "runs" / "log"
    _populate(log)
    logger.set_logger_dir(str(log), action="d")
    logger.info("configured before training")
    assert (log / "model-16.index").exists()
    launch_train_with_config(_config(callbacks=[ModelSaver()]), SimpleTrainer())
    names = sorted(x.name for x in log.iterdir())
    assert "model-16.index" not in names and "sub" not in names and "model-2.index" in names, names
    text = (log / "log.log").read_text()
    assert text.index("Argv: ") < text.index("configured before training") < text.index("Start Epoch 1 ")
    assert "content of log.log" not in text


def test_a_log_directory_that_cannot_be_created_is_a_problem_of_the_file(rundir) -> None:
    """A file where a parent of the log directory should be: reported with the other
    mistakes, at the logdir line, before anything happens."""
    from trainbus.runfile import RunConfigError, train_from_file

    (rundir / "blocker").write_text("a file, not a directory")
    p = rundir / "bad.toml"
    p.write_text(BAD.format(logdir=rundir / "blocker" / "log", action="k"))
    with pytest.raises(RunConfigError) as err:
        train_from_file(p)
    got = [(pr.line, pr.where) for pr in err.value.problems]
    line = next(i for i, text in enumerate(p.read_text().splitlines(), 1) if text.startswith("logdir = "))
    assert len(got) == 4 and got[-1] == (line, "train.logdir"), got
    assert f"{rundir / 'blocker'} is a file, so the log directory" in err.value.problems[-1].message
    assert (rundir / "blocker").read_text() == "a file, not a directory"


def test_a_log_directory_that_became_impossible_fails_with_a_clear_error(rundir) -> None:
    """The path was fine when chosen and is not when training starts: the error names the
    directory and says what to do."""
    logger.set_logger_dir(str(rundir / "later" / "log"), action="k")
    (rundir / "later").write_text("now a file")
    with pytest.raises(NotADirectoryError, match=r"cannot create the log directory .*later/log .*choose a writable"):
        logger.commit_logger_dir()
