"""MinSaver / MaxSaver edges: an equal value is not an improvement, the checkpoint directory
chosen when the graph is set up, no directory at all (each test kills a mutant the other tests
missed)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import tensorflow as tf

import trainbus.callbacks as C
from trainbus.testing import train_tiny
from trainbus.utils import logger

from statcbs import PutStat, ReadW


def test_an_equal_value_is_not_an_improvement(logdir, tb_log):
    """The same value in epochs 1 and 2: the copies keep epoch 1's weights (the first best)."""
    reader = ReadW()
    mins, maxs = C.MinSaver("err"), C.MaxSaver("err")
    train_tiny(callbacks=[PutStat("err", [0.5, 0.5]), C.ModelSaver(), mins, maxs, reader], max_epoch=2)
    assert not np.array_equal(reader.values[0], reader.values[1])
    for f in ("min-err.tfmodel", "max-err.tfmodel"):
        np.testing.assert_array_equal(tf.train.load_checkpoint(str(logdir / f)).get_tensor("W"), reader.values[0])
    assert mins.best == maxs.best == (8, 0.5)
    saved = [r.getMessage() for r in tb_log if r.getMessage().startswith("Model at global_step=")]
    assert len(saved) == 2, saved  # one copy each, after epoch 1


def test_made_before_the_log_directory_it_copies_into_it(tmp_path):
    logger._reset_for_tests()
    try:
        ms = C.MinSaver("err")
        assert ms.checkpoint_dir is None
        d = tmp_path / "later"
        logger.set_logger_dir(str(d), action="k")
        train_tiny(callbacks=[PutStat("err", [0.5]), C.ModelSaver(), ms], max_epoch=1)
        assert ms.checkpoint_dir == str(d)
        assert (d / "min-err.tfmodel.index").is_file()
    finally:
        logger._reset_for_tests()


def test_without_any_directory_it_fails_at_setup_saying_how_to_fix_it(tmp_path):
    logger._reset_for_tests()
    with pytest.raises(RuntimeError, match=r"MinSaver has no checkpoint directory: pass checkpoint_dir=\.\.\., or call "
                                           r"trainbus\.utils\.logger\.set_logger_dir\(dir\)"):
        train_tiny(callbacks=[C.ModelSaver(checkpoint_dir=str(tmp_path)), C.MinSaver("err")], max_epoch=1)
    assert not os.path.exists(tmp_path / "min-err.tfmodel.index")


def test_a_missing_statistic_is_a_warning_naming_it(logdir, tb_log):
    ms = C.MinSaver("never-put")
    train_tiny(callbacks=[C.ModelSaver(), ms], max_epoch=1, steps_per_epoch=2)
    assert any(r.levelname == "WARNING" and r.getMessage() == "[MinSaver] no value of 'never-put' in the monitors "
               "yet; is the callback producing it placed before this one?" for r in tb_log)


def _global_step_of(prefix) -> int:
    return int(tf.train.load_checkpoint(str(prefix)).get_tensor("global_step"))


def test_a_best_measured_now_is_saved_from_the_weights_when_no_checkpoint_of_its_step_exists(logdir, tb_log):
    """The ModelSaver saves only every 2 epochs: after epoch 1 the weights measured are still
    those of the session, so MinSaver saves them itself (the model of step 2, not an older one)."""
    reader = ReadW()
    saver = C.PeriodicTrigger(C.ModelSaver(), every_k_epochs=2)
    ms = C.MinSaver("err")
    train_tiny(callbacks=[PutStat("err", [0.5, 0.6]), saver, ms, reader], max_epoch=2, steps_per_epoch=2)
    assert ms.best == (2, 0.5)
    assert _global_step_of(logdir / "min-err.tfmodel") == 2
    np.testing.assert_array_equal(tf.train.load_checkpoint(str(logdir / "min-err.tfmodel")).get_tensor("W"),
                                  reader.values[0])
    assert not list(logdir.glob(".min-err.tfmodel.tmp-*")), list(logdir.iterdir())


class DropIndex(C.Callback):
    """Removes the index file of the checkpoint just written (a disk losing it)."""

    def _trigger(self):
        os.remove(os.path.join(logger.get_logger_dir(), f"model-{self.global_step}.index"))


def test_a_latest_checkpoint_without_index_is_not_copied_the_weights_are_saved(logdir):
    train_tiny(callbacks=[PutStat("err", [0.5]), C.ModelSaver(), DropIndex(), C.MinSaver("err")], max_epoch=1,
               steps_per_epoch=2)
    assert _global_step_of(logdir / "min-err.tfmodel") == 2


def test_a_checkpoint_from_another_step_is_never_copied_under_the_best_name(logdir, tb_log):
    """The ModelSaver saved only before training (model-0); the value was measured at step 2,
    while the weights are those of step 2: they are saved, not model-0."""
    saver = C.PeriodicTrigger(C.ModelSaver(), every_k_epochs=100, before_train=True)
    train_tiny(callbacks=[PutStat("err", [0.5]), saver, C.MinSaver("err")], max_epoch=1, steps_per_epoch=2)
    assert _global_step_of(logdir / "min-err.tfmodel") == 2


class PutOnce(C.Callback):
    """Puts ``name`` = ``value`` at the end of epoch 1 only."""

    def __init__(self, name, value):
        self.name, self.value = name, value

    def _trigger(self):
        if self.epoch_num == 1:
            self.trainer.monitors.put_scalar(self.name, self.value)


def test_a_best_whose_model_is_gone_is_warned_about_and_nothing_is_copied(logdir, tb_log):
    """MinSaver runs every 2 epochs and sees, at step 4, a value measured at step 2: the newest
    checkpoint is model-4 and the weights have changed, so the model measured is gone. tensorpack's
    rule: warn, copy nothing (the best stays unset: the file would not hold that model)."""
    ms = C.MinSaver("err")
    train_tiny(callbacks=[PutOnce("err", 0.5), C.ModelSaver(), C.PeriodicTrigger(ms, every_k_epochs=2)],
               max_epoch=2, steps_per_epoch=2)
    assert not (logdir / "min-err.tfmodel.index").exists()
    assert ms.best is None
    warnings = [r.getMessage() for r in tb_log if r.levelname == "WARNING"]
    assert any(w.startswith("[MinSaver] the model measured at global_step 2 (err=0.5) cannot be saved: the newest "
                            "checkpoint is model-4 and the weights have changed since.") for w in warnings), warnings


def test_a_checkpoint_from_the_same_step_is_not_warned_about(logdir, tb_log):
    train_tiny(callbacks=[PutStat("err", [0.5, 0.4]), C.ModelSaver(), C.MinSaver("err")], max_epoch=2,
               steps_per_epoch=2)
    assert not [r for r in tb_log if "is not from global_step" in r.getMessage()]


def test_state_keys_name_the_statistic_and_what_differs_from_the_class():
    assert C.MinSaver("err").state_key == "MinSaver(err)"
    assert C.MaxSaver("err").state_key == "MaxSaver(err)"
    assert C.MinSaver("err", reverse=True).state_key == "MinSaver(err,max)"
    assert C.MinSaver("err", filename="best").state_key == "MinSaver(err,best)"
    assert C.MaxSaver("acc", filename="top").state_key == "MaxSaver(acc,top)"


def test_a_saved_state_without_a_step_restores_the_value_at_step_0():
    ms = C.MinSaver("err")
    ms._load_state_dict({"best_value": 0.25})
    assert ms.best == (0, 0.25)
    ms._load_state_dict({})  # nothing saved: unchanged
    assert ms.best == (0, 0.25)


def test_each_copied_file_is_complete_when_it_is_fsynced(tmp_path, monkeypatch):
    """The copy's bytes are flushed out of Python's buffer before the fsync, so the fsync makes
    the whole file durable (checked: the file's size at each fsync of a copy)."""
    import trainbus_saver._saver as saver_mod

    src = tmp_path / "model-3"
    (tmp_path / "model-3.data-00000-of-00001").write_bytes(b"d" * 1000)
    (tmp_path / "model-3.index").write_bytes(b"i" * 300)
    sizes = []
    real_fsync = os.fsync

    def fsync(fd):
        name = os.readlink(f"/proc/self/fd/{fd}")
        if ".tmp-copy" in name:
            sizes.append((os.path.basename(name), os.fstat(fd).st_size))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    saver_mod._copy_checkpoint(str(src), str(tmp_path / "best"))
    assert sizes == [(".best.tmp-copy.data-00000-of-00001", 1000), (".best.tmp-copy.index", 300)], sizes
    assert (tmp_path / "best.index").read_bytes() == b"i" * 300


def _fake_checkpoint(prefix, shards=1, tag=b"x"):
    for i in range(shards):
        with open(f"{prefix}.data-{i:05d}-of-{shards:05d}", "wb") as f:
            f.write(tag * (100 + i))
    with open(f"{prefix}.index", "wb") as f:
        f.write(tag * 10)


def test_a_failed_copy_leaves_no_temporary_file_and_raises(tmp_path):
    """The source lost its index between listing and copying: the error comes out, the copied
    data file's temporary is removed, the previous copy is untouched."""
    import trainbus_saver._saver as saver_mod

    _fake_checkpoint(tmp_path / "best", tag=b"o")
    (tmp_path / "model-3.data-00000-of-00001").write_bytes(b"d" * 50)
    with pytest.raises(FileNotFoundError):
        saver_mod._copy_checkpoint(str(tmp_path / "model-3"), str(tmp_path / "best"))
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "best.data-00000-of-00001", "best.index", "model-3.data-00000-of-00001"]
    assert (tmp_path / "best.index").read_bytes() == b"o" * 10


def test_a_copy_replaces_the_previous_one_index_out_first_index_in_last(tmp_path, monkeypatch):
    """The previous copy (two data shards) is replaced by one of one shard: its index goes first
    (and the directory is synced), the new data, then the new index, then the directory is
    synced again; shards of the previous copy that the new one does not have are removed."""
    import trainbus_saver._saver as saver_mod

    _fake_checkpoint(tmp_path / "best", shards=2, tag=b"o")
    _fake_checkpoint(tmp_path / "model-3", tag=b"n")
    events = []
    real_replace, real_fsync_dir = os.replace, saver_mod.fsync_dir

    def replace(a, b):
        events.append(("replace", os.path.basename(b), (tmp_path / "best.index").exists()))
        return real_replace(a, b)

    def fsync_dir(d):
        events.append(("fsync_dir", os.path.basename(d), (tmp_path / "best.index").exists()))
        return real_fsync_dir(d)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(saver_mod, "fsync_dir", fsync_dir)
    saver_mod._copy_checkpoint(str(tmp_path / "model-3"), str(tmp_path / "best"))
    assert events == [("fsync_dir", tmp_path.name, False), ("replace", "best.data-00000-of-00001", False),
                      ("replace", "best.index", False), ("fsync_dir", tmp_path.name, True)], events
    assert sorted(p.name for p in tmp_path.glob("best*")) == ["best.data-00000-of-00001", "best.index"]
    assert (tmp_path / "best.data-00000-of-00001").read_bytes() == b"n" * 100
