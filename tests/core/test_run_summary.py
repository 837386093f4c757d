"""``launch_train_with_config`` from Python: the table of trainable variables once the graph is
built, and the end-of-run summary (epochs, steps, why it stopped, last and best values in the
direction the run's callbacks say, checkpoints, log directory), both in the log file; a config
whose ``starting_epoch`` is past ``max_epoch`` trains nothing and says so."""

from __future__ import annotations

import json
import re

import pytest

from trainbus.utils import logger


@pytest.fixture
def logdir(tmp_path):
    d = tmp_path / "log"
    logger.set_logger_dir(str(d), action="k")
    yield d
    logger._reset_for_tests()


def _log(d) -> str:
    return (d / "log.log").read_text()


def test_summary_and_variables_table_in_the_log(logdir):
    from trainbus.callbacks import Callback, EarlyStopping, JSONWriter, MaxSaver, ModelSaver
    from trainbus.testing import train_tiny

    class Put(Callback):
        def _trigger_epoch(self):
            self.trainer.monitors.put_scalar("acc", 0.25 * self.trainer.epoch_num)
            self.trainer.monitors.put_scalar("loss", 1.0 / self.trainer.epoch_num)

    train_tiny(callbacks=[Put(), ModelSaver(max_to_keep=2), MaxSaver("acc"),
                          EarlyStopping("loss", patience=10, mode="min")],
               monitors=[JSONWriter()], max_epoch=3)
    text = _log(logdir)
    assert text.index("List of Trainable Variables:") < text.index("Start Epoch 1")
    assert re.search(r"^W\s+\[4, 3\]\s+12$", text, re.M) and "Number of parameters (elements): 15" in text
    summary = text[text.index("Run summary:"):]
    assert re.search(r"Run summary: 3 epoch\(s\) \(epoch 1 to 3\) and 24 step\(s\) in [\d.]+ sec, global step 24; "
                     r"reached max_epoch = 3", summary), summary
    acc = next(ln for ln in summary.splitlines() if ln.strip().startswith("acc "))
    assert "0.75 (3)" in acc and "max 0.75 at epoch 3 (step 24)" in acc and "min " not in acc  # MaxSaver
    loss = next(ln for ln in summary.splitlines() if ln.strip().startswith("loss "))
    assert "min 0.3333 at epoch 3 (step 24)" in loss and "max " not in loss  # EarlyStopping(mode="min")
    assert "checkpoints kept: model-16, model-24, max-acc.tfmodel" in summary
    assert f"log directory: {logdir}" in summary
    stats = json.loads((logdir / "stats.json").read_text())
    assert [r["acc"] for r in stats if "acc" in r] == [0.25, 0.5, 0.75]


def test_stop_reason_in_the_summary(logdir):
    from trainbus.callbacks import Callback
    from trainbus.testing import train_tiny

    class Stop(Callback):
        def _trigger_epoch(self):
            if self.trainer.epoch_num == 2:
                self.trainer.request_stop("enough after epoch 2")

    train_tiny(callbacks=[Stop()], max_epoch=5)
    summary = _log(logdir)[_log(logdir).index("Run summary:"):]
    assert re.search(r"Run summary: 2 epoch\(s\) \(epoch 1 to 2\) and 16 step\(s\) .*global step 16; stopped: "
                     r"enough after epoch 2", summary), summary
    assert "checkpoints kept: none" in summary


def test_stop_training_raised_by_a_callback_is_the_reason(logdir):
    from trainbus import StopTraining
    from trainbus.callbacks import Callback
    from trainbus.testing import train_tiny

    class Enough(Callback):
        def _trigger_epoch(self):
            if self.trainer.epoch_num == 2:
                raise StopTraining("the loss is low enough")

    train_tiny(callbacks=[Enough()], max_epoch=5)
    summary = _log(logdir)[_log(logdir).index("Run summary:"):]
    assert re.search(r"global step 16; stopped in epoch 2 by StopTraining: the loss is low enough$", summary.splitlines()[0]
                     .split("] ", 1)[-1]), summary


def test_a_config_past_its_max_epoch_trains_nothing(logdir, caplog):
    from trainbus import TrainConfig, launch_train_with_config
    from trainbus.testing import TinyModel, tiny_dataflow
    from trainbus.train import SimpleTrainer

    config = TrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), max_epoch=3)
    config.starting_epoch = 4  # what AutoResumeTrainConfig gives after a finished run of 3 epochs
    trainer = SimpleTrainer()
    launch_train_with_config(config, trainer)
    out = caplog.text
    assert f"the run in {logdir} already finished: it trained up to epoch 3 and max_epoch is 3; nothing to do" in out
    assert "Start Epoch" not in out and trainer.global_step == 0
    assert not logdir.exists()  # the log directory's action never happened


def test_auto_resume_of_a_finished_run_trains_nothing_and_says_how_to_continue(logdir, tb_log):
    import trainbus
    from trainbus.callbacks import ModelSaver
    from trainbus.testing import TinyModel, tiny_dataflow

    def run(max_epoch):
        cfg = trainbus.AutoResumeTrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), steps_per_epoch=2,
                                             max_epoch=max_epoch, callbacks=[ModelSaver()], extra_callbacks=[],
                                             monitors=[])
        trainer = trainbus.SimpleTrainer()
        trainbus.launch_train_with_config(cfg, trainer)
        return cfg, trainer

    run(2)
    files = sorted(p.name for p in logdir.iterdir())
    cfg, trainer = run(2)
    assert cfg.starting_epoch == 3 and trainer.global_step == 0  # nothing was trained
    assert sorted(p.name for p in logdir.iterdir()) == files
    assert any("max_epoch" in r.getMessage() and "finished" in r.getMessage() for r in tb_log), \
        [r.getMessage() for r in tb_log][-5:]
    _, trainer = run(3)
    assert trainer.global_step == 6


def test_a_model_desc_class_instead_of_an_instance_says_to_call_it():
    import pytest

    import trainbus
    from trainbus.testing import TinyModel, tiny_dataflow

    with pytest.raises(TypeError, match=r"TrainConfig\(model=TinyModel\) got the class; pass an instance: "
                                        r"model=TinyModel\(\)"):
        trainbus.TrainConfig(model=TinyModel, dataflow=tiny_dataflow())
