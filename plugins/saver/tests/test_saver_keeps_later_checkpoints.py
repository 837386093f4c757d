"""ModelSaver never rotates away a checkpoint from a later global step than the ones it writes: a
run started again from step 0 in the log dir of a longer run (not resumed) keeps that run's work."""

from __future__ import annotations

import logging
import os

import trainbus.callbacks as C
from trainbus.testing import train_tiny
from trainbus.tfutils.sessinit import SaverRestore


def test_a_fresh_run_keeps_the_checkpoints_of_a_run_that_got_further(tmp_path, tb_log):
    d = tmp_path / "ck"
    train_tiny(callbacks=[C.ModelSaver(max_to_keep=2, checkpoint_dir=str(d))], max_epoch=4)
    assert sorted(f for f in os.listdir(d) if f.endswith(".index")) == ["model-24.index", "model-32.index"]
    # the same directory, trained again from step 0 without resuming: 3 saves rotate the list twice
    train_tiny(callbacks=[C.ModelSaver(max_to_keep=2, checkpoint_dir=str(d))], max_epoch=3)
    on_disk = sorted(f for f in os.listdir(d) if f.endswith(".index"))
    assert on_disk == ["model-16.index", "model-24.index", "model-32.index"], on_disk
    SaverRestore(str(d / "model-32")).verify()
    SaverRestore(str(d / "model-24")).verify()  # model-24 was rewritten by the second run, also complete
    warnings = [r.getMessage() for r in tb_log if r.levelno == logging.WARNING]
    assert sum("holds checkpoint(s) from later global steps than this run starts at (0): model-24, model-32"
               in w for w in warnings) == 1, warnings
    assert any(f"{d / 'model-32'} is from a later global step (32)" in w and "stays on disk" in w
               for w in warnings), warnings
    text = (d / "checkpoint").read_text()
    assert 'model_checkpoint_path: "model-24"' in text and "model-32" not in text
