"""``trainbus train RUN.toml`` in this process (the CLI's ``main``, nothing trains): an existing log
directory on a read-only file system (a real read-only bind mount: root ignores permission bits)
is one problem line naming it and the fix, in ``--dry-run`` and in the real run, exit 2; a run
that already finished says so on the FIRST line of its output (no "Argv:" or resume line before
it), exit 0, with its log directory untouched."""

from __future__ import annotations

import json
import logging
import os
import pathlib
import subprocess
import sys

import pytest

from trainbus.cli import main

RUNFILES = pathlib.Path(__file__).resolve().parent / "runfiles"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0

RUN = """\
[model]
class = "tinyrun:LinearNet"

[data]
function = "tinyrun:make_data"
args = {{ n = 16, batch = 8 }}

[[monitors]]
name = "JSONWriter"

[train]
steps_per_epoch = 2
max_epoch = 1
logdir = "{logdir}"
logdir_action = "k"
"""
LOGDIR_LINE = RUN.splitlines().index('logdir = "{logdir}"') + 1


@pytest.fixture
def cli(monkeypatch, capsys):
    """``main(argv)`` -> (status, stdout, stderr): the trainbus logger's console lines go to the
    captured stdout with what the CLI prints, in order."""
    monkeypatch.syspath_prepend(str(RUNFILES))
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")  # main() would set it for the whole test process
    monkeypatch.delenv("TRAINBUS_DEBUG", raising=False)
    for h in logging.getLogger("trainbus").handlers:
        if type(h) is logging.StreamHandler:
            monkeypatch.setattr(h, "stream", sys.stdout)

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        status = main(list(argv))
        out, err = capsys.readouterr()
        return status, out, err

    return run


def _write(tmp: pathlib.Path, logdir: pathlib.Path) -> pathlib.Path:
    run = tmp / "run.toml"
    run.write_text(RUN.format(logdir=logdir.as_posix()))
    return run


@pytest.fixture
def read_only_dir(tmp_path):
    """``tmp_path/log`` holding a file, bind-mounted read-only over itself; unmounted afterwards."""
    d = tmp_path / "log"
    d.mkdir()
    (d / "notes.txt").write_text("kept")
    subprocess.run(["mount", "--bind", str(d), str(d)], check=True, capture_output=True)
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(d)], check=True, capture_output=True)
        yield d
    finally:
        while subprocess.run(["umount", str(d)], capture_output=True).returncode == 0:
            pass


@pytest.mark.skipif(not IS_ROOT, reason="a read-only bind mount needs root")
def test_read_only_log_dir_is_one_problem_line_in_dry_run_and_real_run(tmp_path, read_only_dir, cli):
    with pytest.raises(OSError):  # really read-only, for root too
        (read_only_dir / "probe").write_text("x")
    run = _write(tmp_path, read_only_dir)
    for args in (["--dry-run"], []):
        status, out, err = cli("train", str(run), *args)
        assert status == 2, (args, out[-2000:], err[-2000:])
        lines = err.strip().splitlines()
        assert lines[0] == f"trainbus train: {run}: 1 problem(s); nothing was started:", lines
        assert lines[1:] == [
            f"  {run}:{LOGDIR_LINE}: train.logdir: the log directory {read_only_dir.as_posix()} is on a read-only "
            "file system, so the run could write nothing there; remount it read-write or set logdir to a directory "
            "on a writable disk"], lines
        assert "Traceback" not in err and "Start Epoch" not in out
    assert sorted(p.name for p in read_only_dir.iterdir()) == ["notes.txt"]


def test_finished_run_says_so_on_its_first_line(tmp_path, cli):
    logdir = tmp_path / "log"
    logdir.mkdir()
    # what JSONWriter wrote when the run trained its only epoch
    stats = json.dumps([{"epoch_num": 1, "global_step": 2, "cost": 0.25}])
    (logdir / "stats.json").write_text(stats)
    run = _write(tmp_path, logdir)
    status, out, err = cli("train", str(run))
    assert status == 0, out[-2000:] + err[-2000:]
    lines = out.strip().splitlines()
    assert lines[0] == (f"trainbus train: the run in {logdir.as_posix()} already finished: it trained up to epoch 1 "
                        f"and max_epoch is 1; nothing to do. To train more epochs: trainbus train {run} --set "
                        "train.max_epoch=2"), out
    assert len(lines) == 1, out  # no "Argv:", no resume line, before or after it
    assert "Traceback" not in err
    # nothing happened in the log directory
    assert sorted(p.name for p in logdir.iterdir()) == ["stats.json"]
    assert (logdir / "stats.json").read_text() == stats
