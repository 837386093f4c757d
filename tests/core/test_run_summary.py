"""``launch_train_with_config`` from Python: the end-of-run summary (epochs, steps, why it
stopped) in the log file; a config whose ``starting_epoch`` is past ``max_epoch`` trains nothing
and says so. (With checkpoints and best values from the plugins' callbacks:
tests/ecosystem/test_run_summary_plugins.py.)"""

from __future__ import annotations

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

    config = TrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), max_epoch=3, extra_callbacks=[], monitors=[])
    config.starting_epoch = 4  # what AutoResumeTrainConfig gives after a finished run of 3 epochs
    trainer = SimpleTrainer()
    launch_train_with_config(config, trainer)
    out = caplog.text
    assert f"the run in {logdir} already finished: it trained up to epoch 3 and max_epoch is 3; nothing to do" in out
    assert "Start Epoch" not in out and trainer.global_step == 0
    assert not logdir.exists()  # the log directory's action never happened


def test_a_model_desc_class_instead_of_an_instance_says_to_call_it():
    import pytest

    import trainbus
    from trainbus.testing import TinyModel, tiny_dataflow

    with pytest.raises(TypeError, match=r"TrainConfig\(model=TinyModel\) got the class; pass an instance: "
                                        r"model=TinyModel\(\)"):
        trainbus.TrainConfig(model=TinyModel, dataflow=tiny_dataflow(), extra_callbacks=[], monitors=[])
