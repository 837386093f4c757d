"""Predictor base classes and the predictors that run one tower in one session."""

from __future__ import annotations

import abc
import threading
from typing import Any, Sequence

import tensorflow as tf

from trainbus.tfutils.common import get_op_tensor_name

tf1 = tf.compat.v1

__all__ = ["PredictorBase", "AsyncPredictorBase", "OnlinePredictor", "OfflinePredictor"]


class PredictorBase(abc.ABC):
    """Base class of predictors: ``predictor(x1, x2, ...)`` runs the model on one input per
    input tensor and returns the list of outputs.

    :attr return_input: when true, a call returns ``(inputs, outputs)`` instead of ``outputs``.
    """

    return_input: bool = False

    def __call__(self, *dp: Any) -> Any:
        """Predict on ``dp``, one value per input (``predictor(images, labels)``).

        :returns: the list of output values (or ``(dp, outputs)`` with ``return_input``).
        """
        output = self._do_call(dp)
        return (dp, output) if self.return_input else output

    @abc.abstractmethod
    def _do_call(self, dp: Sequence[Any]) -> Any:
        """Return the outputs for the inputs ``dp`` (as many as the predictor has inputs)."""


class AsyncPredictorBase(PredictorBase):
    """Base class of asynchronous predictors: ``put_task`` queues a datapoint and returns a
    ``concurrent.futures.Future``; calling the predictor waits for that future."""

    @abc.abstractmethod
    def put_task(self, dp: Sequence[Any], callback: Any = None) -> Any:
        """Queue ``dp`` for prediction.

        :param dp: the inputs, one per input tensor (batched or not, as the implementation says).
        :param callback: called with the ``Future`` once it is done (from a worker thread; make it
            thread-safe).
        :returns: a ``concurrent.futures.Future`` of the outputs.
        """

    @abc.abstractmethod
    def start(self) -> None:
        """Start the workers."""

    def _do_call(self, dp: Sequence[Any]) -> Any:
        return self.put_task(dp).result()


def _normalize(t: Any) -> Any:
    """A tensor name gets its output index (``"x"`` -> ``"x:0"``); tensors stay as they are."""
    if isinstance(t, str):
        return get_op_tensor_name(t)[1]
    return t


class OnlinePredictor(PredictorBase):
    """Run given tensors of an existing graph in an existing session: feed ``input_tensors``,
    fetch ``output_tensors`` through one prepared callable (``Session.make_callable``).

    :param input_tensors: the tensors to feed (``tf.Tensor`` or names), in call order.
    :param output_tensors: the tensors to fetch (``tf.Tensor`` or names).
    :param return_input: see :attr:`PredictorBase.return_input`.
    :param sess: the session; ``None`` takes the default session at the first call (the default
        session is per thread) and keeps it.
    """

    #: whether the prepared callable accepts ``options=``/``run_metadata=`` (``Session.make_callable``)
    ACCEPT_OPTIONS = False

    def __init__(self, input_tensors: Sequence[Any], output_tensors: Sequence[Any], return_input: bool = False,
                 sess: Any = None) -> None:
        self.return_input = bool(return_input)
        self.input_tensors = [_normalize(t) for t in input_tensors]
        self.output_tensors = [_normalize(t) for t in output_tensors]
        self.sess = sess
        self._lock = threading.Lock()
        self._callable: Any = None
        if sess is not None:
            self._callable = self._make_callable(sess)

    def _make_callable(self, sess: Any) -> Any:
        return sess.make_callable(self.output_tensors, feed_list=self.input_tensors,
                                  accept_options=self.ACCEPT_OPTIONS)

    def _do_call(self, dp: Sequence[Any]) -> Any:
        if len(dp) != len(self.input_tensors):
            names = [getattr(t, "name", t) for t in self.input_tensors]
            raise ValueError(f"{type(self).__name__} takes {len(self.input_tensors)} inputs {names}, "
                             f"got {len(dp)}; call it with one value per input")
        fn = self._callable
        if fn is None:
            with self._lock:
                if self._callable is None:
                    if self.sess is None:
                        sess = tf1.get_default_session()
                        if sess is None:
                            raise RuntimeError(f"{type(self).__name__} has no session: pass sess=, or call it "
                                               "under a default session (with sess.as_default(): ...)")
                        self.sess = sess
                    self._callable = self._make_callable(self.sess)
                fn = self._callable
        return fn(*dp)


class OfflinePredictor(OnlinePredictor):
    """Build the tower of a :class:`~trainbus.predict.PredictConfig` (no name prefix) in its own
    graph, create a session, load the variables, and predict.

    Example::

        predictor = OfflinePredictor(PredictConfig(model=MyModel(), session_init=SmartInit(ckpt),
                                                   input_names=["image"], output_names=["prob"]))
        prob, = predictor(images)

    :attr graph: the graph the tower was built in.
    """

    def __init__(self, config: Any) -> None:
        from trainbus.predict.config import PredictConfig

        if not isinstance(config, PredictConfig):
            raise TypeError(f"{type(self).__name__} needs a PredictConfig, got {type(config).__name__} {config!r}")
        self.config = config
        self.graph, ins, outs = config.build_inference_graph()
        sess = config._create_session(self.graph)
        super().__init__(ins, outs, config.return_input, sess)
