"""``Trainer.train_with_defaults``: a default for every option except ``steps_per_epoch``, as
tensorpack; ``TrainConfig`` still defaults it to the size of the data."""

from __future__ import annotations

import pytest
import tensorflow as tf

from trainbus.testing import HookRecorder, TinyModel, tiny_dataflow, train_tiny


def _trainer_with_graph():
    from trainbus.input_source import FeedInput
    from trainbus.train import SimpleTrainer

    tf.compat.v1.reset_default_graph()
    model = TinyModel()
    trainer = SimpleTrainer()
    trainer.setup_graph(model.get_input_signature(), FeedInput(tiny_dataflow()), model.build_graph,
                        model.get_optimizer)
    return trainer


def test_without_steps_per_epoch_is_a_clear_error():
    trainer = _trainer_with_graph()
    rec = HookRecorder()
    with pytest.raises(ValueError) as info:
        trainer.train_with_defaults(callbacks=[rec], monitors=[], extra_callbacks=[], max_epoch=1)
    msg = str(info.value)
    assert msg.startswith("SimpleTrainer.train_with_defaults() needs steps_per_epoch")
    assert "Pass steps_per_epoch=N" in msg and "TrainConfig" in msg
    assert rec.events == []  # nothing ran


def test_with_steps_per_epoch_trains():
    trainer = _trainer_with_graph()
    rec = HookRecorder()
    trainer.train_with_defaults(callbacks=[rec], monitors=[], extra_callbacks=[], steps_per_epoch=3, max_epoch=2)
    assert rec.hooks().count("trigger_step") == 6
    assert trainer.global_step == 6


def test_train_config_still_defaults_it_to_the_data_size():
    rec = HookRecorder()
    trainer = train_tiny([rec], max_epoch=1)  # tiny_dataflow(): 32 samples in batches of 4
    assert rec.hooks().count("trigger_step") == 8
    assert trainer.global_step == 8
