""":class:`StagingInput`: prefetch the tensors of another input source into a ``StagingArea``."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainbus.callbacks.base import Callback
from trainbus.input_source.base import FeedfreeInput, InputSource, StepFeed
from trainbus.tfutils.dependency import dependency_of_fetches

tf1 = tf.compat.v1


class _StagingCallback(Callback):
    def __init__(self, src: StagingInput) -> None:
        self._src = src

    def _setup_graph(self) -> None:
        self._stage = tf1.group(*self._src._stage_ops)
        self._check = self._src._unstage_ops[0][0] if self._src._unstage_ops else None
        self._args = tf1.train.SessionRunArgs(fetches=self._stage)
        inner = self._src._input
        # an input fed at each step (FeedInput) is fed for the prefetch too, from the same iteration
        feed_source = None if isinstance(inner, FeedfreeInput) else getattr(inner, "feed_source", None)
        self._feed = feed_source() if feed_source is not None else None

    def _before_train(self) -> None:
        for _ in range(self._src._nr_stage):
            if self._feed is None:
                self.trainer.sess.run(self._stage)
                continue
            placeholders, next_values = self._feed
            values = next_values()
            try:
                self.trainer.sess.run(self._stage, feed_dict=dict(zip(placeholders, values)))
            except (ValueError, TypeError) as e:  # a datapoint the placeholders cannot take
                explain = getattr(getattr(next_values, "__self__", None), "explain_feed_error", None)
                explained = explain(e, tuple(values)) if explain is not None else None
                if explained is None:
                    raise
                raise explained from e

    def _before_run(self, ctx: Any) -> Any:
        if self._check is None or dependency_of_fetches(ctx.original_args.fetches, self._check):
            return self._args
        return None

    def __str__(self) -> str:
        return "StagingInputCallback"


class StagingInput(FeedfreeInput):
    """Prefetch another input source into a ``StagingArea`` (``nr_stage`` elements ahead).

    :param input: the InputSource to prefetch from.
    :param nr_stage: how many elements to prefetch before training starts.
    :param device: where to put the staging area (default: the tower's device).
    """

    def __init__(self, input: InputSource, nr_stage: int = 1, device: str | None = None) -> None:
        if not isinstance(input, InputSource):
            raise TypeError(f"StagingInput wraps an InputSource, got {input!r}")
        self._input = input
        self._nr_stage = int(nr_stage)
        self._device = device
        self._stage_ops: list[Any] = []
        self._unstage_ops: list[Any] = []

    def size(self) -> int:
        return self._input.size()

    def failure(self) -> BaseException | None:
        return self._input.failure()

    def skip_datapoints(self, n: int) -> bool:
        return self._input.skip_datapoints(n)

    def step_feed(self) -> StepFeed | None:
        """The feed of the input it prefetches from (the stage op runs with the step)."""
        return self._input.step_feed()

    def _setup(self, input_signature: list[Any]) -> None:
        self._input.wrapped_in(self.describe())
        self._input_callbacks = self._input.setup(input_signature)

    def _get_input_tensors(self) -> list[Any]:
        from tensorflow.python.ops.data_flow_ops import StagingArea

        inputs = self._input.get_input_tensors()
        dev = self._device
        ctx = tf1.device(dev) if dev is not None else _null()
        with ctx, self.cached_name_scope():
            area = StagingArea([x.dtype for x in inputs], shapes=None)
            self._stage_ops.append(area.put(inputs))
            outputs = area.get()
            if isinstance(outputs, tf.Tensor):
                outputs = [outputs]
            for vin, vout in zip(inputs, outputs):
                vout.set_shape(vin.shape)
            self._unstage_ops.append(outputs)
            return outputs

    def _get_callbacks(self) -> list[Callback]:
        return list(self._input_callbacks) + [_StagingCallback(self)]


class _null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *a: Any) -> bool:
        return False
