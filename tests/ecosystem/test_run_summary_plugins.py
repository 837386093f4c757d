"""The end-of-run summary of ``launch_train_with_config`` with the plugins' callbacks: the table
of trainable variables once the graph is built, the last and best values in the direction the
run's callbacks say (``MaxSaver``, ``EarlyStopping``), the checkpoints ``ModelSaver`` kept, the
log directory; an ``AutoResumeTrainConfig`` of a finished run trains nothing and says how to go on.
(The summary of the core alone: tests/core/test_run_summary.py.)"""

from __future__ import annotations

import json
import re


def _log(d) -> str:  # logdir: the suite's fixture (conftest.py)
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
