"""Helpers for testing trainbus plugins and callbacks (import ``trainbus.testing``).

* :class:`TinyModel` / :func:`tiny_dataflow` / :func:`train_tiny`: a real (small) training run;
* :class:`HookRecorder`: a callback that records every hook it receives, in order.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from trainbus.callbacks.base import Callback
from trainbus.callbacks.monitor import MonitorBase

__all__ = ["TinyModel", "tiny_dataflow", "train_tiny", "HookRecorder", "RecordingMonitor"]


def tiny_dataflow(n: int = 32, batch: int = 4, dim: int = 4, classes: int = 3, seed: int = 0) -> Any:
    """A deterministic dataflow of ``n // batch`` batches ``[x (batch, dim) float32, y (batch,) int32]``."""
    from trainbus.dataflow import BatchData, DataFromList

    rng = np.random.RandomState(seed)
    xs = rng.rand(n, dim).astype("float32")
    ys = (xs.sum(axis=1) * classes / dim).astype("int32").clip(0, classes - 1)
    return BatchData(DataFromList([[x, y] for x, y in zip(xs, ys)], shuffle=False), batch)


def _tiny_model_class() -> type:
    import tensorflow as tf

    from trainbus.tfutils.summary_min import add_scalar_summary_if_available
    from trainbus.train.model_desc import ModelDesc

    tf1 = tf.compat.v1

    class TinyModel(ModelDesc):
        """Softmax regression ``x (None, dim) -> classes``; names: ``x``, ``y``, ``logits``,
        ``cost``, ``wrong`` (per-sample 0/1 error), ``accuracy``; variable ``W``, ``b``."""

        def __init__(self, dim: int = 4, classes: int = 3, lr: float = 0.1) -> None:
            self.dim, self.classes, self.lr = dim, classes, lr

        def inputs(self) -> list:
            return [tf.TensorSpec([None, self.dim], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "y")]

        def build_graph(self, x: Any, y: Any) -> Any:
            w = tf1.get_variable("W", [self.dim, self.classes], initializer=tf1.zeros_initializer())
            b = tf1.get_variable("b", [self.classes], initializer=tf1.zeros_initializer())
            logits = tf.identity(tf.matmul(x, w) + b, name="logits")
            cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="cost")
            wrong = tf.cast(tf.not_equal(tf.argmax(logits, 1, output_type=tf.int32), y), tf.float32, name="wrong")
            tf.reduce_mean(1.0 - wrong, name="accuracy")
            add_scalar_summary_if_available(cost)
            return cost

        def optimizer(self) -> Any:
            lr = tf1.get_variable("learning_rate", initializer=float(self.lr), trainable=False)
            return tf1.train.GradientDescentOptimizer(lr)

    return TinyModel


def __getattr__(name: str) -> Any:
    if name == "TinyModel":
        cls = _tiny_model_class()
        globals()["TinyModel"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def train_tiny(callbacks: Sequence[Callback] = (), monitors: Sequence[MonitorBase] = (), max_epoch: int = 2,
               steps_per_epoch: int | None = None, trainer: Any = None, extra_callbacks: Sequence[Callback] = (),
               model: Any = None, dataflow: Any = None, session_init: Any = None, starting_epoch: int = 1,
               feed: bool = True) -> Any:
    """Train :class:`TinyModel` for real with these callbacks/monitors; returns the trainer.

    ``feed=True`` uses ``FeedInput`` (deterministic order), else ``QueueInput``.
    """
    from trainbus.input_source import FeedInput, QueueInput
    from trainbus.train.config import TrainConfig
    from trainbus.train.interface import launch_train_with_config

    if trainer is None:
        from trainbus.train import SimpleTrainer  # type: ignore[attr-defined]

        trainer = SimpleTrainer()
    ds = dataflow if dataflow is not None else tiny_dataflow()
    cfg = TrainConfig(model=model if model is not None else globals()["__getattr__"]("TinyModel")(),
                      data=FeedInput(ds) if feed else QueueInput(ds), callbacks=list(callbacks),
                      extra_callbacks=list(extra_callbacks), monitors=list(monitors), max_epoch=max_epoch,
                      steps_per_epoch=steps_per_epoch, session_init=session_init, starting_epoch=starting_epoch)
    launch_train_with_config(cfg, trainer)
    return trainer


class HookRecorder(Callback):
    """Records ``(hook, epoch_num, global_step, local_step)`` for every hook, into
    ``self.events`` (and into a shared list ``sink`` if given, tagged with ``tag``)."""

    def __init__(self, tag: str = "rec", sink: list | None = None, fetch: Any = None) -> None:
        self.tag = tag
        self.events: list[tuple] = []
        self.sink = sink
        self._fetch = fetch

    def _rec(self, hook: str) -> None:
        tr = getattr(self, "trainer", None)
        ev = (hook, tr.epoch_num, tr.global_step, tr.local_step) if tr is not None else (hook, None, None, None)
        self.events.append(ev)
        if self.sink is not None:
            self.sink.append((self.tag,) + ev)

    def hooks(self) -> list[str]:
        """Only the hook names, in order."""
        return [e[0] for e in self.events]

    def _setup_graph(self) -> None:
        self._rec("setup_graph")

    def _before_train(self) -> None:
        self._rec("before_train")

    def _before_epoch(self) -> None:
        self._rec("before_epoch")

    def _before_run(self, ctx: Any) -> Any:
        self._rec("before_run")
        return self._fetch

    def _after_run(self, ctx: Any, values: Any) -> None:
        self._rec("after_run")
        self.last_values = values

    def _trigger_step(self) -> None:
        self._rec("trigger_step")

    def _after_epoch(self) -> None:
        self._rec("after_epoch")

    def _trigger_epoch(self) -> None:
        self._rec("trigger_epoch")
        self.trigger()

    def _trigger(self) -> None:
        self._rec("trigger")

    def _after_train(self) -> None:
        self._rec("after_train")


class RecordingMonitor(MonitorBase):
    """A monitor that keeps everything it receives: ``scalars``, ``images``, ``summaries``, ``events``."""

    def __init__(self) -> None:
        self.scalars: list[tuple[str, Any, int]] = []
        self.images: list[tuple[str, Any]] = []
        self.summaries: list[Any] = []
        self.events: list[Any] = []

    def process_scalar(self, name: str, val: Any) -> None:
        self.scalars.append((name, val, self.trainer.global_step))

    def process_image(self, name: str, val: Any) -> None:
        self.images.append((name, val))

    def process_summary(self, summary: Any) -> None:
        self.summaries.append(summary)

    def process_event(self, evt: Any) -> None:
        self.events.append(evt)
