"""trainbus.checkpoint owns the run directory: confined checkpoint lists, callback states that are
never stale, MinSaver keeping the model it measured, strict stats.json, monitors bound when training
starts, mid-epoch resume that keeps epoch boundaries, and action "d" that never deletes the cwd."""

from __future__ import annotations

import json
import math
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import trainbus
import trainbus.callbacks as C
from trainbus import checkpoint as ckpt
from trainbus.testing import TinyModel, tiny_dataflow, train_tiny
from trainbus.utils import logger

from resume import SetGlobalStep
from statcbs import PutStat, ReadW


def _gs(prefix) -> int:
    return int(tf.train.load_checkpoint(str(prefix)).get_tensor("global_step"))


def _write_list(d, paths):
    text = f'model_checkpoint_path: "{paths[-1]}"\n' + "".join(f'all_model_checkpoint_paths: "{p}"\n' for p in paths)
    (d / "checkpoint").write_text(text)


# ------------------------------------------------------------------------------- confinement
def _train_into(d, max_epoch, **kw):
    logger._reset_for_tests()
    logger.set_logger_dir(str(d), action="k")
    try:
        return train_tiny([C.ModelSaver(**kw)], max_epoch=max_epoch, steps_per_epoch=2)
    finally:
        logger._reset_for_tests()


def test_rotation_never_deletes_checkpoints_another_directory_holds(tmp_path, tb_log):
    """The list names checkpoints of another directory by ``../`` and by absolute path, with no
    copy here: rotation leaves them on disk, a warning names them, and the list this run writes
    names only its own checkpoints."""
    other, mine = tmp_path / "other", tmp_path / "mine"
    _train_into(other, 2)  # model-2, model-4 in other/
    before = sorted(p.name for p in other.iterdir())
    mine.mkdir()
    _write_list(mine, ["../other/model-2", str(other / "model-4")])
    _train_into(mine, 3, max_to_keep=1)
    assert sorted(p.name for p in other.iterdir()) == before
    warnings = [r.getMessage() for r in tb_log if r.levelname == "WARNING"]
    for listed in ("../other/model-2", str(other / "model-4")):
        assert any(f"names {listed}, which is outside that directory and has no copy in it" in w
                   and "never rotated away nor resumed from" in w for w in warnings), warnings
    listing = ckpt.read_listing(str(mine))
    assert [e.listed for e in listing.entries] == ["model-6"] and not listing.foreign


def test_a_copied_run_directory_uses_and_rotates_only_its_own_copies(tmp_path):
    """A run directory copied elsewhere still lists the original's absolute paths: the copy
    resumes from its own files and rotates only them; the original stays complete."""
    orig, copy = tmp_path / "orig", tmp_path / "copy"
    _train_into(orig, 3, max_to_keep=3)
    text = (orig / "checkpoint").read_text()
    (orig / "checkpoint").write_text(text.replace('"model-', f'"{orig}/model-'))  # absolute entries
    shutil.copytree(orig, copy)
    before = sorted(p.name for p in orig.iterdir())
    listing = ckpt.read_listing(str(copy))
    assert [e.prefix for e in listing.entries] == [str(copy / f"model-{s}") for s in (2, 4, 6)]
    assert all(e.relocated for e in listing.entries) and not listing.foreign
    assert ckpt.latest_checkpoint(str(copy)) == (str(copy / "model-6"), 6)
    logger._reset_for_tests()
    logger.set_logger_dir(str(copy), action="k")
    try:
        cfg = trainbus.AutoResumeTrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), steps_per_epoch=2,
                                             max_epoch=5, callbacks=[C.ModelSaver(max_to_keep=2)],
                                             extra_callbacks=[], monitors=[])
        assert cfg.session_init.checkpoint_path == str(copy / "model-6")
        trainbus.launch_train_with_config(cfg, trainbus.SimpleTrainer())
    finally:
        logger._reset_for_tests()
    assert sorted(p.name for p in orig.iterdir()) == before
    assert sorted(p.name for p in copy.glob("model-*.index")) == ["model-10.index", "model-8.index"]


def test_remove_checkpoint_refuses_a_prefix_outside_the_directory(tmp_path, tb_log):
    (tmp_path / "a").mkdir()
    victim = tmp_path / "b"
    victim.mkdir()
    (victim / "model-1.index").write_bytes(b"x")
    assert ckpt.remove_checkpoint(str(tmp_path / "a"), str(victim / "model-1"), "T") is False
    assert (victim / "model-1.index").exists()
    assert any(r.getMessage() == f"T: not deleting {victim / 'model-1'}: it is outside the checkpoint directory "
               f"{tmp_path / 'a'}." for r in tb_log)


# ------------------------------------------------------------------------ states never stale
def _resume(d, callbacks, max_epoch, steps_per_epoch=2, monitors=None):
    logger._reset_for_tests()
    logger.set_logger_dir(str(d), action="k")
    try:
        cfg = trainbus.AutoResumeTrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), max_epoch=max_epoch,
                                             steps_per_epoch=steps_per_epoch, callbacks=callbacks,
                                             extra_callbacks=[], monitors=monitors or [C.JSONWriter()])
        trainer = trainbus.SimpleTrainer()
        trainbus.launch_train_with_config(cfg, trainer)
        return trainer
    finally:
        logger._reset_for_tests()


def test_min_saver_state_saved_with_a_checkpoint_is_the_state_after_its_trigger(tmp_path):
    """Epochs 1-2 give 0.5 then 0.3; continuing to epoch 3 gives 0.4: the kept model stays epoch
    2's and the best stays 0.3 (a state saved before MinSaver handled epoch 2 would say 0.5, and
    0.4 would replace the best model)."""
    d = tmp_path / "log"
    vals = [0.5, 0.3, 0.4]
    ms = C.MinSaver("err")
    reader = ReadW()
    _resume(d, [PutStat("err", vals), C.ModelSaver(), ms, reader], max_epoch=2)
    assert ms.best == (4, 0.3)
    saved = json.loads((d / "model-4.trainbus.json").read_text())
    assert saved["MinSaver(err)"] == {"best_step": 4, "best_value": 0.3}
    w_epoch2 = reader.values[1]
    ms2 = C.MinSaver("err")
    _resume(d, [PutStat("err", vals), C.ModelSaver(), ms2], max_epoch=3)
    assert ms2.best == (4, 0.3)
    np.testing.assert_array_equal(tf.train.load_checkpoint(str(d / "min-err.tfmodel")).get_tensor("W"), w_epoch2)
    assert _gs(d / "min-err.tfmodel") == 4


def test_callbacks_before_or_after_the_saver_save_the_same_state(tmp_path):
    """EarlyStopping listed after ModelSaver: the state saved at epoch N holds its count after
    epoch N, so a resumed run stops exactly where an uninterrupted one would."""
    runs = {}
    for order in ("after", "before"):
        d = tmp_path / order
        es = lambda: C.EarlyStopping("err", patience=2)  # noqa: E731
        vals = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
        cbs = [PutStat("err", vals), C.ModelSaver()]
        cbs = cbs + [es()] if order == "after" else [cbs[0], es(), cbs[1]]
        _resume(d, cbs, max_epoch=2)
        state = json.loads((d / "model-4.trainbus.json").read_text())
        runs[order] = state
        cbs2 = [PutStat("err", vals), C.ModelSaver(), es()]
        trainer = _resume(d, cbs2, max_epoch=6)
        # no improvement after epoch 1, patience 2: an uninterrupted run stops after epoch 3
        assert trainer.epoch_num == 3, order
    assert runs["after"] == runs["before"]


def test_a_step_triggered_checkpoint_at_an_epoch_end_waits_for_the_epoch_triggers(logdir):
    """ModelSaver every 2 steps (trigger_step) and MinSaver at the epoch's end: the state saved
    with the checkpoint of the epoch's last step holds MinSaver's best of that epoch."""
    train_tiny([PutStat("err", [0.5, 0.3]), C.PeriodicTrigger(C.ModelSaver(), every_k_steps=2, every_k_epochs=None),
                C.MinSaver("err")], max_epoch=2, steps_per_epoch=2)
    assert json.loads((logdir / "model-4.trainbus.json").read_text())["MinSaver(err)"]["best_value"] == 0.3
    assert json.loads((logdir / "model-2.trainbus.json").read_text())["MinSaver(err)"]["best_value"] == 0.5


# ------------------------------------------------------------------------------- NaN values
def test_a_nan_value_never_becomes_the_best(logdir, tb_log):
    ms = C.MinSaver("err")
    train_tiny([PutStat("err", [math.nan, 0.5, math.inf]), C.ModelSaver(), ms], max_epoch=3, steps_per_epoch=2)
    assert ms.best == (4, 0.5)
    assert _gs(logdir / "min-err.tfmodel") == 4
    warnings = [r.getMessage() for r in tb_log if r.levelname == "WARNING"]
    assert "[MinSaver] 'err' is nan at global_step 2; a value that is not finite never counts as the best (the kept " \
           "model stays)" in warnings, warnings
    assert any(w.startswith("[MinSaver] 'err' is inf at global_step 6") for w in warnings), warnings


def test_a_saved_nan_best_is_ignored_on_resume(tb_log):
    ms = C.MinSaver("err")
    ms._load_state_dict({"best_step": 2, "best_value": "NaN"})
    assert ms.best is None
    assert any("the saved best 'err' is 'NaN', not a finite number; it is ignored" in r.getMessage() for r in tb_log)


# ------------------------------------------------------------------------------ strict JSON
def _strict(text):
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_stats_json_is_strict_and_gives_non_finite_values_back_as_floats(logdir):
    train_tiny([PutStat("loss", [math.nan, math.inf, -math.inf, 0.25])], monitors=[C.JSONWriter()], max_epoch=4,
               steps_per_epoch=1)
    records = _strict((logdir / "stats.json").read_text())
    assert [r["loss"] for r in records] == ["NaN", "Infinity", "-Infinity", 0.25]
    loaded = C.JSONWriter.load_existing_json(str(logdir))
    assert math.isnan(loaded[0]["loss"]) and loaded[1]["loss"] == math.inf and loaded[2]["loss"] == -math.inf
    # a resumed run's history holds floats again
    trainer = _resume(logdir, [PutStat("loss", [0, 0, 0, 0, 0.5])], max_epoch=5, steps_per_epoch=1)
    hist = trainer.monitors.get_history("loss")
    assert len(hist) == 5 and math.isnan(hist[0][1]) and hist[1][1] == math.inf and hist[2][1] == -math.inf
    assert hist[4][1] == 0.5


def test_callback_states_are_strict_json(tmp_path):
    path = ckpt.write_callback_states(str(tmp_path / "model-1"), {"A": {"v": math.nan, "w": [math.inf]}})
    assert _strict(open(path).read()) == {"A": {"v": "NaN", "w": ["Infinity"]}}
    back = ckpt.read_callback_states(str(tmp_path / "model-1"))
    assert math.isnan(back["A"]["v"])


# ---------------------------------------------------------------------- monitors bound late
def test_a_config_built_before_the_log_directory_writes_into_it(tmp_path):
    """TrainConfig with the default monitors made before set_logger_dir: stats.json and the
    event file are written (tensorpack writes both)."""
    logger._reset_for_tests()
    put = C.CallbackFactory(trigger=lambda cb: cb.trainer.monitors.put_scalar("x", 1.5))
    cfg = trainbus.TrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), max_epoch=1, steps_per_epoch=2,
                               callbacks=[put], extra_callbacks=[])
    d = tmp_path / "later"
    logger.set_logger_dir(str(d), action="k")
    try:
        trainbus.launch_train_with_config(cfg, trainbus.SimpleTrainer())
    finally:
        logger._reset_for_tests()
    assert json.loads((d / "stats.json").read_text())[0]["x"] == 1.5
    assert list(d.glob("events.out.tfevents.*"))


def test_monitors_reused_after_the_log_directory_changed_write_into_the_new_one(tmp_path):
    monitors = [C.JSONWriter(), C.CSVWriter(), C.TFEventWriter()]
    put = C.CallbackFactory(trigger=lambda cb: cb.trainer.monitors.put_scalar("x", 2.0))
    for name in ("one", "two"):
        logger._reset_for_tests()
        logger.set_logger_dir(str(tmp_path / name), action="k")
        try:
            train_tiny([put], monitors=monitors, max_epoch=1, steps_per_epoch=1)
        finally:
            logger._reset_for_tests()
    for name in ("one", "two"):
        d = tmp_path / name
        assert json.loads((d / "stats.json").read_text()) == [{"x": 2.0, "epoch_num": 1, "global_step": 1}]
        assert (d / "stats.csv").read_text().splitlines() == ["epoch_num,global_step,x", "1,1,2.0"]
        assert list(d.glob("events.out.tfevents.*"))


# --------------------------------------------------------------------------- mid-epoch resume
class EpochEnds(C.Callback):
    def __init__(self):
        self.ends = []

    def _trigger_epoch(self):
        self.ends.append((self.epoch_num, self.global_step))


def test_a_run_resumed_inside_an_epoch_finishes_that_epoch_on_its_boundary(logdir, tb_log):
    """Restored at global step 11 with 8 steps per epoch: epoch 2 runs its remaining 5 steps and
    ends at step 16; epoch 3 at 24 (not 19 and 27)."""
    ends = EpochEnds()
    train_tiny([ends], max_epoch=3, steps_per_epoch=8, starting_epoch=2, session_init=SetGlobalStep(11))
    assert ends.ends == [(2, 16), (3, 24)]
    assert any(r.getMessage().startswith("Resuming inside epoch 2 at global step 11: it runs its remaining 5 steps "
                                         "and ends at global step 16.") for r in tb_log)


def test_an_interrupted_run_resumed_by_auto_resume_keeps_its_epoch_boundaries(tmp_path):
    d = tmp_path / "log"

    class StopAt(C.Callback):
        def _trigger_step(self):
            if self.global_step == 11:
                raise trainbus.StopTraining("stop at 11")

    _resume(d, [C.ModelSaver(), StopAt()], max_epoch=5, steps_per_epoch=8)
    assert ckpt.latest_checkpoint(str(d))[1] == 11
    ends = EpochEnds()
    trainer = _resume(d, [C.ModelSaver(), ends], max_epoch=3, steps_per_epoch=8)
    assert ends.ends == [(2, 16), (3, 24)] and trainer.global_step == 24


# ------------------------------------------------------------------------- action "d" guard
def test_action_d_refuses_the_current_directory_and_the_run_files_directory(tmp_path, monkeypatch):
    logger._reset_for_tests()
    (tmp_path / "keep.txt").write_text("x")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"action 'd' would delete .*, which holds the current directory"):
        logger.set_logger_dir(str(tmp_path), action="d")
    with pytest.raises(ValueError, match=r"which holds the current directory"):
        logger.set_logger_dir(".", action="d")
    other = tmp_path / "runs"
    other.mkdir()
    (other / "run.toml").write_text("")
    monkeypatch.chdir("/")
    logger.protect_path(str(other / "run.toml"))
    try:
        with pytest.raises(ValueError, match=rf"would delete {other}, which holds the run file"):
            logger.set_logger_dir(str(other), action="d")
    finally:
        logger._reset_for_tests()
    assert (tmp_path / "keep.txt").exists() and (other / "run.toml").exists()


# ------------------------------------------------------------------- log.log on a full disk
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (every write fails with ENOSPC)")
def test_a_log_file_that_cannot_be_written_is_one_warning_not_a_traceback_per_record(capsys):
    """/dev/full: every write of log.log fails with ENOSPC, as on a full disk."""
    logger._reset_for_tests()
    try:
        logger._set_file("/dev/full")
        for i in range(20):
            logger.info(f"record {i}")
    finally:
        logger._reset_for_tests()
    err = capsys.readouterr().err
    assert "--- Logging error ---" not in err and "Traceback" not in err, err
    assert err.splitlines() == ["[trainbus] WRN cannot write the log file /dev/full: No space left on device "
                                "(ENOSPC); messages go on on the console only until it can be written again."]


def _w(prefix):
    return tf.train.load_checkpoint(str(prefix)).get_tensor("W")


@pytest.mark.parametrize("feed", [True, False], ids=["FeedInput", "QueueInput"])
def test_resumed_inside_an_epoch_the_input_skips_what_the_epoch_consumed(tmp_path, feed, tb_log):
    """A deterministic one-pass-per-epoch input (steps_per_epoch == len(dataflow)): stopped at
    step 11 and resumed, the run ends with exactly the weights of an uninterrupted run, because
    epoch 2 continues with datapoints 3..7 of its pass (without the skip it would see 0..4)."""
    from trainbus.input_source import FeedInput, QueueInput

    def run(d, callbacks, max_epoch):
        logger._reset_for_tests()
        logger.set_logger_dir(str(d), action="k")
        try:
            df = tiny_dataflow()
            cfg = trainbus.AutoResumeTrainConfig(model=TinyModel(), data=FeedInput(df) if feed else QueueInput(df),
                                                 max_epoch=max_epoch, callbacks=callbacks, extra_callbacks=[],
                                                 monitors=[])
            trainbus.launch_train_with_config(cfg, trainbus.SimpleTrainer())
        finally:
            logger._reset_for_tests()

    class StopAt(C.Callback):
        def _trigger_step(self):
            if self.global_step == 11:
                raise trainbus.StopTraining("stop at 11")

    assert len(tiny_dataflow()) == 8
    run(tmp_path / "whole", [C.ModelSaver()], 3)
    run(tmp_path / "cut", [C.ModelSaver(), StopAt()], 3)
    assert ckpt.latest_checkpoint(str(tmp_path / "cut"))[1] == 11
    run(tmp_path / "cut", [C.ModelSaver()], 3)
    np.testing.assert_array_equal(_w(tmp_path / "cut" / "model-24"), _w(tmp_path / "whole" / "model-24"))
    assert any(r.getMessage().endswith("The input passes over the 3 datapoints this epoch already consumed, so the "
                                       "epoch sees the rest of its pass.") for r in tb_log)
