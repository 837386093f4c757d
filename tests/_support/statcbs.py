"""Small callbacks tests share: a scripted statistic, a variable's value, the learning rate per epoch."""

from __future__ import annotations

import trainbus.callbacks as C


class PutStat(C.Callback):
    """Puts ``values[epoch - 1]`` as the scalar ``name`` at every epoch's trigger."""

    def __init__(self, name, values):
        self.name, self.vals = name, list(values)

    def _trigger(self):
        self.trainer.monitors.put_scalar(self.name, self.vals[self.epoch_num - 1])


class ReadW(C.Callback):
    """Records the value of the model's variable ``W`` at every epoch's trigger."""

    def __init__(self):
        self.values = []

    def _setup_graph(self):
        self.t = self.get_tensors_maybe_in_tower(["W"])[0]

    def _trigger(self):
        self.values.append(self.trainer.sess.run(self.t))


class LRPerEpoch(C.Callback):
    """The learning rate in effect during each epoch (read in ``before_epoch``), by epoch."""

    def __init__(self) -> None:
        self.values: dict[int, float] = {}

    def _setup_graph(self):
        self.var = self.get_tensors_maybe_in_tower(["learning_rate"])[0]

    def _before_epoch(self):
        self.values[self.epoch_num] = float(self.trainer.sess.run(self.var))
