"""Placeholder inputs: :class:`PlaceholderInput` (fed by whoever runs the graph) and
:class:`FeedInput` (fed from a DataFlow in the step's own ``Session.run``)."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainbus.callbacks.base import Callback
from trainbus.dataflow import DataFlowTerminated, dataflow_len, is_dataflow, repeat_forever
from trainbus.input_source.base import InputSource, StepFeed, _placeholder, explain_datapoint, inputs_of
from trainbus.utils.concurrency import add_wait_interrupt, remove_wait_interrupt, wait_interrupted


class PlaceholderInput(InputSource):
    """Just placeholders, fed by whoever runs the graph."""

    def _setup(self, input_signature: list[Any]) -> None:
        self._all_placehdrs = [_placeholder(s) for s in input_signature]

    def _get_input_tensors(self) -> list[Any]:
        return self._all_placehdrs


class _FeedCallback(Callback):
    """Feeds a :class:`FeedInput` through ``before_run`` for a runner that set the input up
    itself and never asked for :meth:`FeedInput.step_feed` (a trainer written by hand that calls
    ``input.setup()`` and registers its callbacks, as tensorpack's GAN trainers do). Under a
    trainer that took the feed, it drops its ``before_run`` hook at ``setup_graph`` and costs
    nothing per step."""

    def __init__(self, src: FeedInput) -> None:
        self._src = src
        self._phs: Any = None
        self._next: Any = None

    def _setup_graph(self) -> None:
        if self._src._feed_taken:
            self._drop_hooks("before_run")
        else:
            self._phs, self._next = self._src.step_feed()

    def _before_run(self, ctx: Any) -> Any:
        if self._next is None:
            return None
        return tf.compat.v1.train.SessionRunArgs(fetches=[], feed_dict=dict(zip(self._phs, self._next())))

    def _stop_requested(self) -> bool:
        return bool(getattr(self.trainer, "stop_requested", False))

    def _before_train(self) -> None:
        # a dataflow waiting for stalled workers gives up once training is asked to stop
        add_wait_interrupt(self._stop_requested)

    def _after_train(self) -> None:
        remove_wait_interrupt(self._stop_requested)

    def __str__(self) -> str:
        return "FeedInputCallback"


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
        self._feed_taken = False
        self._skip = 0

    def size(self) -> int:
        return dataflow_len(self.ds)

    def _setup(self, input_signature: list[Any]) -> None:
        self._all_placehdrs = [_placeholder(s) for s in input_signature]

    def _get_input_tensors(self) -> list[Any]:
        return self._all_placehdrs

    def reset_state(self) -> None:
        self.ds.reset_state()
        self._iter = repeat_forever(self.ds) if self._infinite else iter(self.ds)
        skip, self._skip = self._skip, 0
        for _ in range(skip):  # once, before the first step: nothing per step
            next(self._iter, None)

    def skip_datapoints(self, n: int) -> bool:
        """Pass over the first ``n`` datapoints when the iteration starts (see
        :meth:`InputSource.skip_datapoints`)."""
        self._skip = max(0, int(n))
        return True

    def next_feed(self) -> tuple:
        """The next datapoint, as a tuple aligned with the placeholders."""
        if self._iter is None:
            self.reset_state()
        try:
            dp = next(self._iter)
        except StopIteration:
            raise tf.errors.OutOfRangeError(None, None, "FeedInput: the dataflow is exhausted") from None
        except DataFlowTerminated:
            if not wait_interrupted():
                raise
            # training was asked to stop (a signal) while the dataflow waited for its workers: the
            # input ends here, and the stop stays graceful (final checkpoint)
            raise tf.errors.OutOfRangeError(None, None, "FeedInput: training was asked to stop while the "
                                            "dataflow waited for data") from None
        try:
            if len(dp) == len(self._all_placehdrs):
                return tuple(dp)
        except TypeError:  # no len(): not a list of components
            pass
        raise ValueError(explain_datapoint(self.describe(), self.ds, dp, inputs_of(self._all_placehdrs)))

    def explain_feed_error(self, exc: BaseException, values: tuple) -> BaseException | None:
        """For a step whose feed failed with ``exc`` (a value the placeholders cannot take):
        an error of the same type naming this input source, the dataflow, the input and what was
        expected and got, or None when ``values`` (the datapoint fed) show nothing wrong. Only
        called once the step failed, so it costs nothing per step."""
        why = explain_datapoint(self.describe(), self.ds, values, inputs_of(self._all_placehdrs))
        if why is None:
            return None
        return TypeError(why) if isinstance(exc, TypeError) else ValueError(why)

    def feed_source(self) -> StepFeed:
        """``(placeholders, next_feed)`` for a runner that feeds this input by itself (an
        inference runner); unlike :meth:`step_feed`, it does not restart the iteration."""
        return self._all_placehdrs, self.next_feed

    def step_feed(self) -> StepFeed:
        """``(placeholders, next_feed)``: the trainer feeds every step with the next datapoint
        of the dataflow (its iteration starts, with ``reset_state()``, at the first step)."""
        self._iter = None
        self._feed_taken = True
        return self._all_placehdrs, self.next_feed

    def _get_callbacks(self) -> list[Callback]:
        return [_FeedCallback(self)]
