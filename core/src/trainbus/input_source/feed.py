"""Placeholder inputs: :class:`PlaceholderInput` (fed by whoever runs the graph) and
:class:`FeedInput` (fed from a DataFlow in the step's own ``Session.run``)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainbus.dataflow import dataflow_len, is_dataflow, repeat_forever
from trainbus.input_source.base import InputSource, StepFeed, _placeholder


class PlaceholderInput(InputSource):
    """Just placeholders, fed by whoever runs the graph."""

    def _setup(self, input_signature: list[Any]) -> None:
        self._all_placehdrs = [_placeholder(s) for s in input_signature]

    def _get_input_tensors(self) -> list[Any]:
        return self._all_placehdrs


class FeedInput(InputSource):
    """Feed placeholders with datapoints of a DataFlow, one per ``hooked_sess.run``.

    The feed goes into the same ``Session.run`` as the step (no extra hook call): the trainer
    takes it from :meth:`step_feed` and hands it to its hooked session.

    :param ds: the DataFlow (anything with ``__iter__``/``reset_state``).
    :param infinite: iterate the dataflow again when it ends.
    """

    def __init__(self, ds: Any, infinite: bool = True) -> None:
        if not is_dataflow(ds):
            raise TypeError(f"FeedInput needs a DataFlow (with __iter__ and reset_state), got {ds!r}")
        self.ds = ds
        self._infinite = infinite
        self._iter: Any = None

    def size(self) -> int:
        return dataflow_len(self.ds)

    def _setup(self, input_signature: list[Any]) -> None:
        self._all_placehdrs = [_placeholder(s) for s in input_signature]

    def _get_input_tensors(self) -> list[Any]:
        return self._all_placehdrs

    def reset_state(self) -> None:
        self.ds.reset_state()
        self._iter = repeat_forever(self.ds) if self._infinite else iter(self.ds)

    def next_feed(self) -> tuple:
        """The next datapoint, as a tuple aligned with the placeholders."""
        if self._iter is None:
            self.reset_state()
        try:
            dp = next(self._iter)
        except StopIteration:
            raise tf.errors.OutOfRangeError(None, None, "FeedInput: the dataflow is exhausted") from None
        if len(dp) != len(self._all_placehdrs):
            raise ValueError(f"FeedInput: a datapoint has {len(dp)} components but the model has "
                             f"{len(self._all_placehdrs)} inputs ({[p.op.name for p in self._all_placehdrs]})")
        return tuple(dp)

    def feed_source(self) -> StepFeed:
        """``(placeholders, next_feed)`` for a runner that feeds this input by itself (an
        inference runner); unlike :meth:`step_feed`, it does not restart the iteration."""
        return self._all_placehdrs, self.next_feed

    def step_feed(self) -> StepFeed:
        """``(placeholders, next_feed)``: the trainer feeds every step with the next datapoint
        of the dataflow (its iteration starts, with ``reset_state()``, at the first step)."""
        self._iter = None
        return self._all_placehdrs, self.next_feed
