"""A predictor that reads its inputs from an InputSource instead of feeds."""

from __future__ import annotations

from typing import Any, Sequence

import tensorflow as tf

from trainbus.callbacks.base import Callback
from trainbus.callbacks.run_values import RunValuesByRequester
from trainbus.predict.base import PredictorBase
from trainbus.predict.config import PredictConfig, _tensors
from trainbus.tfutils.tower import PredictTowerContext

tf1 = tf.compat.v1

__all__ = ["FeedfreePredictor"]


class _InputDriver:
    """Runs an InputSource's callbacks around a plain session, as a trainer would: it is the
    ``trainer`` the callbacks see (``graph``, ``sess``, ``hooked_sess``)."""

    def __init__(self, graph: Any, callbacks: Sequence[Callback], feed: Any = None) -> None:
        """``feed``: the input source's :meth:`~trainbus.input_source.InputSource.step_feed`."""
        self.graph = graph
        self.callbacks = list(callbacks)
        self.sess: Any = None
        self.hooked_sess = self
        self._feed_keys: tuple = tuple(feed[0]) if feed else ()
        self._feed_next: Any = feed[1] if feed else None
        self._run_cbs: list[Callback] = []

    def setup_graph(self) -> None:
        for cb in self.callbacks:
            cb.setup_graph(self)
        self._run_cbs = [cb for cb in self.callbacks if {"before_run", "after_run"} & cb.hooks_used()]

    def before_train(self, sess: Any) -> None:
        self.sess = sess
        with sess.as_default():
            for cb in self.callbacks:
                cb.before_train()

    def run(self, fetches: list[Any]) -> Any:
        feed: dict = {}
        if self._feed_next is not None:
            feed.update(zip(self._feed_keys, self._feed_next()))
        ctx = tf1.train.SessionRunContext(tf1.train.SessionRunArgs(fetches, None), self.sess)
        requests = []
        for cb in self._run_cbs:
            r = cb.before_run(ctx)
            if r is not None:
                requests.append(r)
                if r[1].feed_dict:
                    feed.update(r[1].feed_dict)
        out = self.sess.run([fetches, [args.fetches for _, args in requests]], feed_dict=feed or None)
        values = RunValuesByRequester.pack(requests, out[1], None, None)
        for cb in self._run_cbs:
            cb.after_run(ctx, values)
        return out[0]

    def after_train(self) -> None:
        errors = []
        for cb in self.callbacks:
            try:
                cb._after_train()
            except Exception as e:  # noqa: BLE001 - stop every input, re-raise the first error
                errors.append(e)
        if errors:
            raise errors[0]


class FeedfreePredictor(PredictorBase):
    """Predict with inputs from an :class:`~trainbus.input_source.InputSource` (e.g.
    ``QueueInput(dataflow)``, ``StagingInput(...)``, ``TFDatasetInput(dataset)``) instead of feeds.
    Call it with no arguments: ``pred()`` returns the output values of the next input.

    The InputSource's callbacks (enqueue threads, iterator initializers, staging) run as in
    training; :meth:`close` stops them and closes the session.

    :param config: a :class:`~trainbus.predict.PredictConfig`; ``return_input`` is not supported
        (add the inputs' names to ``output_names`` instead).
    :param input_source: an InputSource not set up yet, matching ``config.input_signature``.
    """

    def __init__(self, config: PredictConfig, input_source: Any) -> None:
        from trainbus.input_source import InputSource

        if not isinstance(config, PredictConfig):
            raise TypeError(f"FeedfreePredictor needs a PredictConfig, got {type(config).__name__} {config!r}")
        if not isinstance(input_source, InputSource):
            raise TypeError(f"FeedfreePredictor: input_source must be an InputSource (e.g. QueueInput(dataflow)), "
                            f"got {type(input_source).__name__} {input_source!r}")
        if config.return_input:
            raise ValueError("FeedfreePredictor does not support return_input=True: add the input names to "
                             "output_names to fetch the inputs")
        if input_source.setup_done():
            raise ValueError(f"FeedfreePredictor: the InputSource {input_source} is already set up; give the "
                             "predictor its own InputSource")
        self._config = config
        self._input_source = input_source
        self.graph = config._maybe_create_graph()
        with self.graph.as_default():
            callbacks = input_source.setup(config.input_signature)
            with PredictTowerContext(""):
                self._input_tensors = input_source.get_input_tensors()
                config.tower_func(*self._input_tensors)
            self._tower_handle = config.tower_func.towers[-1]
            self._output_tensors = _tensors(self._tower_handle, config.output_names, "output_names")
            self._driver = _InputDriver(self.graph, callbacks, feed=input_source.step_feed())
            self._driver.setup_graph()
            self._sess = config._create_session(self.graph)
        self._driver.before_train(self._sess)
        self._closed = False

    @property
    def sess(self) -> Any:
        """The session the predictor runs in."""
        return self._sess

    def __call__(self, *args: Any) -> Any:
        """The output values (list, in the order of ``output_names``) for the next input."""
        if args:
            raise TypeError(f"FeedfreePredictor takes its inputs from {self._input_source}; call it with no "
                            f"arguments, got {len(args)}")
        if self._closed:
            raise RuntimeError("FeedfreePredictor was closed")
        self._raise_input_failure()
        try:
            return self._driver.run(self._output_tensors)
        except (tf.errors.OutOfRangeError, tf.errors.CancelledError):
            self._raise_input_failure()   # a failed input thread closes its queue: report why
            raise

    def _raise_input_failure(self) -> None:
        failure = self._input_source.failure()
        if failure is not None:
            raise RuntimeError(f"FeedfreePredictor: the input {self._input_source} failed: "
                               f"{type(failure).__name__}: {failure}") from failure

    def _do_call(self, dp: Sequence[Any]) -> Any:
        raise TypeError("FeedfreePredictor is called without inputs: pred()")

    def close(self) -> None:
        """Stop the input's threads and close the session."""
        if self._closed:
            return
        self._closed = True
        try:
            self._driver.after_train()
        finally:
            self._sess.close()

    def __enter__(self) -> FeedfreePredictor:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
