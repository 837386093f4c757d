"""trainbus-lossguard: a third-party trainbus plugin.

* :class:`LossGuard` (callback) watches a scalar tensor of the model (the loss by default) at
  every step and ends training cleanly when it becomes NaN/inf or stays above a limit.
* :class:`JSONLinesMonitor` (monitor) appends every scalar to a JSON-lines file.

Installed, they are reached by name: ``trainbus.callbacks.LossGuard``,
``trainbus.callbacks.JSONLinesMonitor``.
"""

from __future__ import annotations

import json
import math
import os
from typing import Any

from trainbus.callbacks import Callback, MonitorBase
from trainbus.train import StopTraining

__all__ = ["LossGuard", "JSONLinesMonitor"]


class LossGuard(Callback):
    """End training when a scalar tensor diverges.

    Every step the tensor is fetched in the training step's own ``Session.run``. Training stops
    (``StopTraining``: every callback's ``after_train`` still runs) when the value is not finite,
    or when it is above ``max_value`` for ``patience`` steps in a row. After every epoch the
    largest value of the epoch is put into the monitors as ``lossguard/max_<tensor>``.

    :param tensor: name of the scalar tensor (looked up in the training tower), default ``"cost"``.
    :param max_value: the limit; ``None`` checks finiteness only.
    :param patience: how many consecutive steps above ``max_value`` end training (>= 1).

    Example::

        TrainConfig(..., callbacks=[trainbus.callbacks.LossGuard("cost", max_value=10.0)])
    """

    def __init__(self, tensor: str = "cost", max_value: float | None = None, patience: int = 1) -> None:
        if not isinstance(tensor, str) or not tensor:
            raise ValueError(f"LossGuard(tensor=...) must be a tensor name such as 'cost', got {tensor!r}")
        if max_value is not None and not isinstance(max_value, (int, float)):
            raise TypeError(f"LossGuard(max_value=...) must be a number or None, got {max_value!r}")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ValueError(f"LossGuard(patience=...) must be an integer >= 1, got {patience!r}")
        self.tensor_name = tensor
        self.max_value = max_value
        self.patience = patience
        #: why training was stopped (None while it was not)
        self.reason: str | None = None
        #: the global step at which training was stopped
        self.stopped_at: int | None = None
        self._over = 0
        self._epoch_max = -math.inf

    def _setup_graph(self) -> None:
        self._tensor = self.get_tensors_maybe_in_tower([self.tensor_name])[0]

    def _before_epoch(self) -> None:
        self._epoch_max = -math.inf

    def _before_run(self, ctx: Any) -> Any:
        return [self._tensor]

    def _after_run(self, ctx: Any, run_values: Any) -> None:
        value = float(run_values.results[0])
        self._epoch_max = max(self._epoch_max, value)
        if not math.isfinite(value):
            self._stop(f"{self.tensor_name} became {value} at global step {self.global_step}")
        if self.max_value is not None and value > self.max_value:
            self._over += 1
            if self._over >= self.patience:
                self._stop(f"{self.tensor_name} = {value:.6g} > max_value {self.max_value} for {self._over} step(s)")
        else:
            self._over = 0

    def _stop(self, reason: str) -> None:
        self.reason = reason
        self.stopped_at = self.global_step
        raise StopTraining(f"LossGuard: {reason}")

    def _trigger_epoch(self) -> None:
        if math.isfinite(self._epoch_max):
            self.trainer.monitors.put_scalar(f"lossguard/max_{self.tensor_name}", self._epoch_max)


class JSONLinesMonitor(MonitorBase):
    """Append every scalar to a JSON-lines file: one ``{"step", "epoch", "name", "value"}``
    object per line, flushed at once (a crash loses at most the line being written).

    :param filename: the file, relative to the log directory unless absolute; default
        ``scalars.jsonl``.
    """

    def __init__(self, filename: str = "scalars.jsonl") -> None:
        if not isinstance(filename, str) or not filename:
            raise ValueError(f"JSONLinesMonitor(filename=...) must be a file name, got {filename!r}")
        self.filename = filename
        self.path: str | None = None
        self._file: Any = None

    def _setup_graph(self) -> None:
        from trainbus.utils import logger

        path = self.filename
        if not os.path.isabs(path):
            logdir = logger.get_logger_dir()
            if logdir is None:
                raise ValueError("JSONLinesMonitor needs a log directory (logger.set_logger_dir(...)) or an absolute "
                                 f"filename; got the relative {path!r}")
            path = os.path.join(logdir, path)
        self.path = path
        self._file = open(path, "a", encoding="utf-8")

    def process_scalar(self, name: str, val: Any) -> None:
        row = {"step": self.trainer.global_step, "epoch": self.trainer.epoch_num, "name": name, "value": float(val)}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()

    def _after_train(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
