"""CSVWriter: the CSV files of real training runs, read back with the ``csv`` module."""

from __future__ import annotations

import csv
import os

import pytest

import trainbus.callbacks
from trainbus.callbacks import Callback
from trainbus.testing import train_tiny
from resume import SetGlobalStep  # tests/_support


def read_csv(path):
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        return list(r.fieldnames), list(r)


class GrowingStats(Callback):
    """Epoch 1 puts a; epoch 2 puts a and b; epoch 3 puts c; ``step`` at every step."""

    def __init__(self, path=None):
        self.path, self.seen = path, []

    def _before_epoch(self):
        if self.path is not None and os.path.exists(self.path):
            self.seen.append(read_csv(self.path))

    def _trigger_step(self):
        self.trainer.monitors.put_scalar("step", self.trainer.global_step)

    def _trigger(self):
        e, put = self.trainer.epoch_num, self.trainer.monitors.put_scalar
        if e in (1, 2):
            put("a", 0.5 * e)
        if e == 2:
            put("b", 7)
        if e >= 3:
            put("c", -1.25)


def test_one_row_per_epoch_and_columns_grow(logdir):
    path = logdir / "stats.csv"
    cb = GrowingStats(str(path))
    train_tiny(callbacks=[cb], monitors=[trainbus.callbacks.CSVWriter()], max_epoch=3, steps_per_epoch=2)
    header, rows = read_csv(path)
    assert header == ["epoch_num", "global_step", "step", "a", "b", "c"]
    assert rows == [
        {"epoch_num": "1", "global_step": "2", "step": "2", "a": "0.5", "b": "", "c": ""},
        {"epoch_num": "2", "global_step": "4", "step": "4", "a": "1.0", "b": "7", "c": ""},
        {"epoch_num": "3", "global_step": "6", "step": "6", "a": "", "b": "", "c": "-1.25"},
    ]
    # the file was complete after each epoch, with the header of the stats seen so far
    assert cb.seen[0][0] == ["epoch_num", "global_step", "step", "a"] and len(cb.seen[0][1]) == 1
    assert cb.seen[1][0] == ["epoch_num", "global_step", "step", "a", "b"] and len(cb.seen[1][1]) == 2
    assert not [p for p in os.listdir(logdir) if p.startswith(".stats.csv")]


def test_resume_appends_and_drops_rows_after_the_restored_step(logdir):
    path = logdir / "stats.csv"
    train_tiny(callbacks=[GrowingStats()], monitors=[trainbus.callbacks.CSVWriter()], max_epoch=3, steps_per_epoch=2)
    train_tiny(callbacks=[GrowingStats()], monitors=[trainbus.callbacks.CSVWriter()], max_epoch=4, steps_per_epoch=2,
               starting_epoch=3, session_init=SetGlobalStep(4))
    header, rows = read_csv(path)
    assert header == ["epoch_num", "global_step", "step", "a", "b", "c"]
    assert [(r["epoch_num"], r["global_step"], r["c"]) for r in rows] == [
        ("1", "2", ""), ("2", "4", ""), ("3", "6", "-1.25"), ("4", "8", "-1.25")]


def test_absolute_filename_and_bad_filenames(tmp_path):
    target = tmp_path / "out" / "run.csv"
    train_tiny(callbacks=[GrowingStats()], monitors=[trainbus.callbacks.CSVWriter(str(target))],
               max_epoch=1, steps_per_epoch=1)
    assert read_csv(target)[1] == [{"epoch_num": "1", "global_step": "1", "step": "1", "a": "0.5"}]
    with pytest.raises(ValueError, match="is a directory"):
        trainbus.callbacks.CSVWriter(str(tmp_path))
    with pytest.raises(ValueError, match="expected a file name"):
        trainbus.callbacks.CSVWriter("")


def test_without_logger_dir_relative_name_is_ignored(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    w = trainbus.callbacks.CSVWriter()
    assert not w.enabled and w.filename is None
    train_tiny(callbacks=[GrowingStats()], monitors=[w], max_epoch=1, steps_per_epoch=1)
    assert list(tmp_path.iterdir()) == []


def test_conformance():
    from trainbus.testing import check_distribution

    check_distribution("trainbus-monitor-csv")
