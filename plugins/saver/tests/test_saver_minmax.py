"""trainbus-saver: MinSaver / MaxSaver keep the checkpoint of the best epoch."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

import trainbus.callbacks as C
from trainbus.testing import train_tiny

from statcbs import PutStat, ReadW


def _w(prefix):
    return tf.train.load_checkpoint(prefix).get_tensor("W")


def test_min_and_max_saver_copy_the_best_checkpoint(logdir):
    reader = ReadW()
    stats = [0.5, 0.3, 0.4, 0.35]
    mins, maxs = C.MinSaver("val-error"), C.MaxSaver("val-error")
    train_tiny(callbacks=[PutStat("val-error", stats), C.ModelSaver(max_to_keep=1), mins, maxs,
                          C.MinSaver("val-error", reverse=True, filename="best-by-max"), reader], max_epoch=4)
    np.testing.assert_array_equal(_w(os.path.join(logdir, "min-val-error.tfmodel")), reader.values[1])  # epoch 2
    np.testing.assert_array_equal(_w(os.path.join(logdir, "max-val-error.tfmodel")), reader.values[0])  # epoch 1
    np.testing.assert_array_equal(_w(os.path.join(logdir, "best-by-max")), reader.values[0])
    assert mins.best == (16, 0.3) and maxs.best == (8, 0.5)
    assert sorted(f for f in os.listdir(logdir) if f.startswith("min-")) == \
        ["min-val-error.tfmodel.data-00000-of-00001", "min-val-error.tfmodel.index"]
    assert not [f for f in os.listdir(logdir) if "tmp" in f]
    # the copy is a full checkpoint, restorable like any other
    from trainbus.tfutils.sessinit import SaverRestore

    assert SaverRestore(os.path.join(logdir, "min-val-error.tfmodel")).path.endswith("min-val-error.tfmodel")


def test_best_value_is_resumable_state(logdir):
    from trainbus.tfutils.sessinit import SaverRestore

    reader = ReadW()
    train_tiny(callbacks=[PutStat("err", [0.2, 0.6]), C.ModelSaver(), C.MinSaver("err"), reader], max_epoch=2)
    best_w = reader.values[0]
    resumed = C.MinSaver("err")
    # the resumed run sees err=0.25: worse than the saved best (0.2), so the copy stays
    train_tiny(callbacks=[PutStat("err", [0, 0, 0.25]), C.ModelSaver(), resumed],
               session_init=SaverRestore(os.path.join(logdir, "model-16")), starting_epoch=3, max_epoch=3)
    assert resumed.best == (8, 0.2)
    np.testing.assert_array_equal(_w(os.path.join(logdir, "min-err.tfmodel")), best_w)


def test_missing_stat_is_a_warning_not_a_crash(logdir):
    ms = C.MinSaver("never-put")
    train_tiny(callbacks=[C.ModelSaver(), ms], max_epoch=1)
    assert ms.best is None and not os.path.exists(os.path.join(logdir, "min-never-put.tfmodel.index"))


def test_needs_an_earlier_model_saver_on_the_same_dir(logdir, tmp_path):
    with pytest.raises(ValueError, match="no ModelSaver"):
        train_tiny(callbacks=[C.MinSaver("err")], max_epoch=1)
    with pytest.raises(ValueError, match="comes before it"):
        train_tiny(callbacks=[C.MaxSaver("err"), C.ModelSaver()], max_epoch=1)
    with pytest.raises(ValueError, match=str(tmp_path / "elsewhere")):
        train_tiny(callbacks=[C.ModelSaver(checkpoint_dir=str(tmp_path / "elsewhere")), C.MinSaver("err")], max_epoch=1)


def test_model_saver_inside_a_scheduler_counts(logdir):
    reader = ReadW()
    train_tiny(callbacks=[PutStat("err", [0.1]), C.PeriodicTrigger(C.ModelSaver(), every_k_epochs=1), C.MinSaver("err"),
                          reader], max_epoch=1)
    np.testing.assert_array_equal(_w(os.path.join(logdir, "min-err.tfmodel")), reader.values[0])


@pytest.mark.parametrize("make, err", [
    (lambda: C.MinSaver(""), TypeError),
    (lambda: C.MaxSaver(3), TypeError),
    (lambda: C.MinSaver("err", filename="sub/dir.tfmodel"), ValueError),
])
def test_bad_arguments_fail_at_construction(make, err):
    with pytest.raises(err):
        make()
