"""The one-device trainers of the core: :class:`SimpleTrainer`, :class:`NoOpTrainer` and
tensorpack's older name :class:`QueueInputTrainer`.

They live in the core (not in a plugin distribution) so that the core trains by itself:
``trainbus.testing.train_tiny`` and the core's own tests need nothing else installed. They
resolve as ``trainbus.train.SimpleTrainer`` (and ``trainbus.SimpleTrainer``,
``trainbus.train.trainers.SimpleTrainer``) like every other trainer.
"""

from __future__ import annotations

from typing import Any, Callable

from trainbus.tfutils.tower import TowerFunc, TrainTowerContext
from trainbus.train.tower import SingleCostTrainer
from trainbus.utils import logger

__all__ = ["SimpleTrainer", "NoOpTrainer", "QueueInputTrainer"]


class SimpleTrainer(SingleCostTrainer):
    """Single-cost training with one tower on one device."""

    def _setup_graph(self, input: Any, get_cost_fn: TowerFunc, get_opt_fn: Callable[[], Any]) -> list:
        logger.info("Building graph for a single training tower ...")
        with TrainTowerContext(""):
            grads = self._make_get_grad_fn(input, get_cost_fn, get_opt_fn)()
            opt = get_opt_fn()
            self.train_op = opt.apply_gradients(grads, name="train_op")
        return []


class NoOpTrainer(SimpleTrainer):
    """Builds the graph (when given a tower function) but does nothing in each step: only
    the callbacks run. ``steps_per_epoch`` and ``max_epoch`` still apply."""

    def run_step(self) -> None:
        # a hooked run with nothing to fetch: hooks, feeds and the step counter still run
        self.hooked_sess.run([])


class QueueInputTrainer(SimpleTrainer):
    """tensorpack's older name for a :class:`SimpleTrainer` fed by a ``QueueInput`` (kept so
    scripts that name it still run; ``SimpleTrainer`` with any input source does the same)."""

    def _setup_graph(self, input: Any, get_cost_fn: TowerFunc, get_opt_fn: Callable[[], Any]) -> list:
        from trainbus.input_source import QueueInput

        if not isinstance(input, QueueInput):
            raise TypeError(f"QueueInputTrainer trains from a QueueInput, got {type(input).__name__}; "
                            "use SimpleTrainer for other input sources")
        logger.warn("QueueInputTrainer is an old name: SimpleTrainer does the same with a QueueInput")
        return super()._setup_graph(input, get_cost_fn, get_opt_fn)
