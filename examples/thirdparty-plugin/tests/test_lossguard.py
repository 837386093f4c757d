"""Tests of trainbus-lossguard, through the names users write (trainbus.callbacks.<Name>) in
real training runs (trainbus.testing.train_tiny), plus the conformance check."""

from __future__ import annotations

import json

import pytest

import trainbus.callbacks
from trainbus.testing import HookRecorder, check_distribution, train_tiny
from trainbus.utils import logger


@pytest.fixture()
def logdir(tmp_path):
    d = tmp_path / "log"
    logger.set_logger_dir(str(d), action="k")
    return d


def test_distribution_conforms():
    assert check_distribution("trainbus-lossguard") == []


def test_names_resolve_to_this_package():
    import trainbus_lossguard

    assert trainbus.callbacks.LossGuard is trainbus_lossguard.LossGuard
    assert trainbus.callbacks.JSONLinesMonitor is trainbus_lossguard.JSONLinesMonitor


def test_quiet_run_logs_the_epoch_maximum(logdir):
    guard = trainbus.callbacks.LossGuard("cost", max_value=100.0)
    mon = trainbus.callbacks.JSONLinesMonitor()
    trainer = train_tiny(callbacks=[guard], monitors=[mon], max_epoch=2, steps_per_epoch=4)
    assert guard.reason is None and trainer.global_step == 8
    rows = [json.loads(line) for line in (logdir / "scalars.jsonl").read_text().splitlines()]
    maxima = [(r["epoch"], r["step"]) for r in rows if r["name"] == "lossguard/max_cost"]
    assert maxima == [(1, 4), (2, 8)]
    # the first epoch starts at ln(3) (zero weights, 3 classes) and the loss goes down
    values = [r["value"] for r in rows if r["name"] == "lossguard/max_cost"]
    assert values[0] == pytest.approx(1.0986, abs=1e-3) and values[1] < values[0]


def test_divergence_stops_training_cleanly(logdir):
    guard = trainbus.callbacks.LossGuard(max_value=0.5, patience=2)
    rec = HookRecorder()
    trainer = train_tiny(callbacks=[guard, rec], monitors=[], max_epoch=5, steps_per_epoch=4)
    assert guard.stopped_at == 2 and trainer.global_step == 2
    assert "cost" in guard.reason and "max_value 0.5 for 2 step(s)" in guard.reason
    assert rec.hooks()[-1] == "after_train"  # other callbacks still finish


@pytest.mark.parametrize("kwargs, match", [({"patience": 0}, "patience"), ({"tensor": ""}, "tensor"),
                                            ({"max_value": "big"}, "max_value")])
def test_bad_arguments_fail_at_construction(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        trainbus.callbacks.LossGuard(**kwargs)
