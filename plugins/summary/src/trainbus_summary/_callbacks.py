"""MovingAverageSummary, MergeAllSummaries and SimpleMovingAverage.

TensorFlow is imported lazily (``trainbus.plugin_api.tf1()``): building these callbacks, and
collecting ``DEFAULT_CALLBACKS()``, does not import it.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Sequence

import numpy as np

from trainbus.callbacks.base import Callback
from trainbus import plugin_api as _tf
from trainbus.utils import logger

__all__ = ["MovingAverageSummary", "MergeAllSummaries", "MergeAllSummaries_RunAlone",
           "MergeAllSummaries_RunWithOp", "SimpleMovingAverage"]

MOVING_SUMMARY_OPS_KEY = "MOVING_SUMMARY_OPS"


class MovingAverageSummary(Callback):
    """Keep the moving averages of summarized tensors up to date at every step, by running
    the EMA-maintaining ops of a collection. It only updates the averages; writing them out is
    the job of other callbacks (``MergeAllSummaries``).

    One of ``DEFAULT_CALLBACKS()``.

    :param collection: the collection of EMA-maintaining ops/tensors; the default is where
        ``tfutils.summary.add_moving_summary`` puts them.
    :param train_op: ``None`` runs the ops along with every ``trainer.hooked_sess.run`` (in the
        same ``Session.run``); an operation (or its name, or a tensor of it) makes the ops
        control dependencies of that op instead, so they run whenever it runs.
    """

    def __init__(self, collection: str = MOVING_SUMMARY_OPS_KEY, train_op: Any = None) -> None:
        if not isinstance(collection, str) or not collection:
            raise TypeError(f"MovingAverageSummary: collection must be a collection name (str), got {collection!r}")
        if train_op is not None and not isinstance(train_op, str):
            tf = _tf.tf()
            if not isinstance(train_op, (tf.Operation, tf.Tensor)):
                raise TypeError(f"MovingAverageSummary: train_op must be a tf.Operation, a tensor or an op name, got {train_op!r}")
        self._collection = collection
        self._train_op = train_op
        self._fetch: Any = None

    def _setup_graph(self) -> None:
        tf = _tf.tf()
        tf1 = _tf.tf1()
        items = self.graph.get_collection(self._collection)
        ops = [x if isinstance(x, tf.Operation) else x.op for x in items]
        if self._train_op is None:
            if not ops:
                logger.info(f"[MovingAverageSummary] collection '{self._collection}' is empty; nothing to maintain.")
                self._drop_hooks("before_run")
                return
            logger.info(f"[MovingAverageSummary] {len(ops)} operations in collection '{self._collection}' "
                        "will run with every training step.")
            with tf1.name_scope(None):
                op = tf.group(*ops, name="maintain_moving_average_summary")
            self._fetch = tf1.train.SessionRunArgs(fetches=op)
            return
        self._drop_hooks("before_run")
        target = self._train_op
        if isinstance(target, str):
            try:
                target = self.graph.get_operation_by_name(target[:-2] if target.endswith(":0") else target)
            except KeyError:
                raise ValueError(f"MovingAverageSummary(train_op={self._train_op!r}): no operation of that name in the graph") from None
        elif isinstance(target, tf.Tensor):
            target = target.op
        if target.graph is not self.graph:
            raise ValueError(f"MovingAverageSummary: train_op {target.name} is not in the trainer's graph")
        if ops:
            target._add_control_inputs(ops)
        self._train_op = target
        logger.info(f"[MovingAverageSummary] {len(ops)} operations in collection '{self._collection}' "
                    f"will run together with operation '{target.name}'.")

    def _before_run(self, ctx: Any) -> Any:
        return self._fetch

    def __str__(self) -> str:
        return "MovingAverageSummary"


def _summary_key(key: str | None) -> str:
    return _tf.tf1().GraphKeys.SUMMARIES if key is None else key


class MergeAllSummaries_RunAlone(Callback):
    """``MergeAllSummaries(run_alone=True)``: evaluate the merged summaries on their own after
    each epoch (and every ``period`` steps)."""

    def __init__(self, period: int, key: str | None) -> None:
        self._period = int(period)
        self._key = key
        self.summary_op: Any = None

    def hooks_used(self) -> frozenset[str]:
        used = super().hooks_used()
        return used if self._period else used - {"trigger_step"}

    def _setup_graph(self) -> None:
        key = _summary_key(self._key)
        logger.info(f"Summarizing collection '{key}' of size {len(self.graph.get_collection(key))}.")
        self.summary_op = _tf.tf1().summary.merge_all(key)
        if self.summary_op is None:
            self._drop_hooks("trigger_step")

    def _trigger_step(self) -> None:
        if (self.local_step + 1) % self._period == 0:
            self.trigger()

    def _trigger(self) -> None:
        if self.summary_op is not None:
            summary = self.trainer.sess.run(self.summary_op)
            self.trainer.monitors.put_summary(summary)

    def __str__(self) -> str:
        return "MergeAllSummaries(run_alone=True)"


class MergeAllSummaries_RunWithOp(Callback):
    """``MergeAllSummaries(run_alone=False)``: fetch the merged summaries along with the last
    training step of each epoch (and every ``period`` steps), in the same ``Session.run``."""

    def __init__(self, period: int, key: str | None) -> None:
        self._period = int(period)
        self._key = key
        self.summary_op: Any = None
        self._fetches: Any = None

    def _setup_graph(self) -> None:
        key = _summary_key(self._key)
        logger.info(f"Summarizing collection '{key}' of size {len(self.graph.get_collection(key))}.")
        self.summary_op = _tf.tf1().summary.merge_all(key)
        if self.summary_op is None:
            self._drop_hooks("before_run", "after_run")
        else:
            self._fetches = _tf.tf1().train.SessionRunArgs(self.summary_op)

    def _need_run(self) -> bool:
        if self.local_step == self.trainer.steps_per_epoch - 1:
            return True
        return self._period > 0 and (self.local_step + 1) % self._period == 0

    def _before_run(self, ctx: Any) -> Any:
        if self._fetches is not None and self._need_run():
            return self._fetches
        return None

    def _after_run(self, ctx: Any, run_values: Any) -> None:
        summary = run_values.results
        if summary is not None:
            self.trainer.monitors.put_summary(summary)

    def __str__(self) -> str:
        return "MergeAllSummaries"


def MergeAllSummaries(period: int = 0, run_alone: bool = False, key: str | None = None) -> Callback:
    """Evaluate all summaries (``tf.summary.merge_all``) and send them to the monitors
    (``trainer.monitors.put_summary``). One of ``DEFAULT_CALLBACKS()``.

    :param period: 0 summarizes once an epoch; ``k > 0`` also summarizes every ``k`` steps.
    :param run_alone: False evaluates the summaries together with the training step (the last
        step of each epoch, and every ``period`` steps), which is needed when summaries depend on
        the inputs (``SimpleTrainer``); True evaluates them on their own after each epoch.
    :param key: the collection of summaries, as in ``tf.summary.merge_all``; default
        ``tf.GraphKeys.SUMMARIES``.
    :returns: a callback (``MergeAllSummaries_RunWithOp`` or ``MergeAllSummaries_RunAlone``).
    """
    if isinstance(period, bool) or not isinstance(period, (int, np.integer)) or period < 0:
        raise ValueError(f"MergeAllSummaries: period must be an integer >= 0 (0: once an epoch), got {period!r}")
    if key is not None and not isinstance(key, str):
        raise TypeError(f"MergeAllSummaries: key must be a collection name (str) or None, got {key!r}")
    if run_alone:
        return MergeAllSummaries_RunAlone(int(period), key)
    return MergeAllSummaries_RunWithOp(int(period), key)


class SimpleMovingAverage(Callback):
    """Put the simple moving average (the mean over a sliding window of steps) of some scalar
    tensors to the monitors, as ``<name>/SMA``, every ``window_size`` global steps.

    :param tensors: a tensor name or a list of them.
    :param window_size: the window, in steps.
    """

    def __init__(self, tensors: str | Sequence[str], window_size: int) -> None:
        from trainbus.tfutils.common import get_op_tensor_name

        if isinstance(tensors, str):
            tensors = [tensors]
        tensors = list(tensors)
        if not tensors or not all(isinstance(t, str) for t in tensors):
            raise TypeError(f"SimpleMovingAverage: tensors must be a tensor name or a non-empty list of names, got {tensors!r}")
        if isinstance(window_size, bool) or not isinstance(window_size, (int, np.integer)) or window_size < 1:
            raise ValueError(f"SimpleMovingAverage: window_size must be a positive integer, got {window_size!r}")
        self._tensor_names = [get_op_tensor_name(t)[1] for t in tensors]
        self._display_names = [get_op_tensor_name(t)[0] for t in tensors]
        self._window = int(window_size)
        self._queue: deque = deque(maxlen=self._window)

    def _setup_graph(self) -> None:
        tensors = self.get_tensors_maybe_in_tower(self._tensor_names)
        for name, t in zip(self._tensor_names, tensors):
            if t.get_shape().ndims != 0:
                raise ValueError(f"SimpleMovingAverage only averages scalar tensors; {name} has shape {t.get_shape()}")
        self._fetch = _tf.tf1().train.SessionRunArgs(fetches=tensors)

    def _before_run(self, ctx: Any) -> Any:
        return self._fetch

    def _after_run(self, ctx: Any, run_values: Any) -> None:
        self._queue.append(run_values.results)

    def _trigger_step(self) -> None:
        if self.global_step % self._window == 0 and self._queue:
            averages = np.asarray(self._queue, dtype="float64").mean(axis=0)
            for name, avg in zip(self._display_names, averages):
                self.trainer.monitors.put_scalar(name + "/SMA", float(avg))

    def __str__(self) -> str:
        return f"SimpleMovingAverage({self._display_names})"
