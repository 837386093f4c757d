"""Small callbacks the saver tests share: one puts a scripted statistic, one reads a variable."""

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
