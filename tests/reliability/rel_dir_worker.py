"""A training the run-directory tests start as a real process.

usage: rel_dir_worker.py LOGDIR MODE [ARG]

MODE ``hold``: train until the file ARG exists, held at step 3 (it writes LOGDIR/../started there).
MODE ``fill``: at the end of epoch 2, fill the file system of LOGDIR (a small tmpfs) to the last
byte; at the end of epoch 4 free it again; 6 epochs in all.
MODE ``readonly``: at the end of epoch 2, mount a read-only bind of LOGDIR over it; 4 epochs.
Every mode: ModelSaver(max_to_keep=2), MinSaver, JSONWriter, CSVWriter and the event writer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import trainbus
import trainbus.callbacks as C
from trainbus.testing import TinyModel, tiny_dataflow
from trainbus.utils import logger

LOGDIR, MODE = sys.argv[1], sys.argv[2]
ARG = sys.argv[3] if len(sys.argv) > 3 else None
FILLER = os.path.join(LOGDIR, "filler")


class Hold(C.Callback):
    """Holds the training at its third step (the first of epoch 2) until ARG exists, and writes
    LOGDIR/../started there: epoch 1's end has written every file by then (checkpoint, graph
    files, statistics, events) and no writer thread is busy, so the directory stays as it is."""

    def _trigger_step(self):
        if self.global_step == 3:
            with open(os.path.join(os.path.dirname(LOGDIR), "started"), "w") as f:
                f.write(str(os.getpid()))
        while self.global_step >= 3 and not os.path.exists(ARG):
            time.sleep(0.05)


class Fault(C.Callback):
    """Runs before the savers at each epoch's end."""

    def _trigger_epoch(self):
        if MODE == "fill" and self.epoch_num == 2:
            with open(FILLER, "wb", buffering=0) as f:
                try:
                    while True:
                        f.write(b"\0" * 4096)
                except OSError:
                    pass
        if MODE == "fill" and self.epoch_num == 4:
            os.remove(FILLER)
        if MODE == "readonly" and self.epoch_num == 2:
            # a read-only view of the directory mounted over it: every file opened from now on
            # is on a read-only file system (files already open stay writable, as after a remount)
            subprocess.run(["mount", "--bind", LOGDIR, LOGDIR], check=True)
            subprocess.run(["mount", "-o", "remount,bind,ro", LOGDIR], check=True)
        self.trainer.monitors.put_scalar("err", [0.5, 0.4, 0.3, 0.2, 0.1, 0.05][self.epoch_num - 1])


def main() -> None:
    logger.set_logger_dir(LOGDIR, action="k")
    callbacks = [Fault(), C.ModelSaver(max_to_keep=2), C.MinSaver("err")]
    if MODE == "hold":
        callbacks.insert(0, Hold())
    epochs = {"hold": 2 if ARG and os.path.exists(ARG) else 1000, "fill": 6, "readonly": 4}[MODE]
    cfg = trainbus.TrainConfig(model=TinyModel(), dataflow=tiny_dataflow(), steps_per_epoch=2, max_epoch=epochs,
                               callbacks=callbacks, extra_callbacks=[],
                               monitors=[C.JSONWriter(), C.CSVWriter(), C.TFEventWriter()])
    trainbus.launch_train_with_config(cfg, trainbus.SimpleTrainer())
    print("TRAINED", flush=True)


if __name__ == "__main__":
    main()
