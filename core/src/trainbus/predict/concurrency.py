"""Asynchronous prediction: worker threads that batch queued datapoints for online predictors."""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf

from trainbus.predict.base import AsyncPredictorBase, OnlinePredictor
from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["MultiThreadAsyncPredictor"]

_STOP = object()


class _PredictorWorkerThread(threading.Thread):
    """Take up to ``batch_size`` queued datapoints (waiting only for the first), stack each
    component into a batch, run the predictor once, and resolve each datapoint's future with
    its row of every output."""

    def __init__(self, tasks: queue.Queue, predictor: OnlinePredictor, idx: int, batch_size: int) -> None:
        super().__init__(name=f"PredictorWorkerThread-{idx}", daemon=True)
        self.tasks = tasks
        self.predictor = predictor
        self.idx = idx
        self.batch_size = batch_size
        self.sess: Any = None
        self._stopped = threading.Event()

    def run(self) -> None:
        if self.sess is not None:
            with self.sess.as_default():
                self._loop()
        else:
            self._loop()

    def _loop(self) -> None:
        while not self._stopped.is_set():
            batch = self._fetch_batch()
            if batch is None:
                return
            inputs, futures = batch
            if not futures:
                continue
            try:
                outputs = self.predictor(*inputs)
            except tf.errors.CancelledError:
                for f in futures:
                    f.cancel()
                logger.warning(f"{self.name}: the prediction was cancelled (session closed?); worker stops")
                return
            except BaseException as e:  # noqa: BLE001 - handed to whoever waits on the futures
                for f in futures:
                    f.set_exception(e)
                continue
            for row, f in enumerate(futures):
                f.set_result([out[row] for out in outputs])

    def _fetch_batch(self) -> tuple[list[np.ndarray], list[Future]] | None:
        item = self.tasks.get()
        if item is _STOP:
            self.tasks.put(_STOP)  # every worker sees it
            return None
        dps, futures = [item[0]], [item[1]]
        while len(futures) < self.batch_size:
            try:
                item = self.tasks.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                self.tasks.put(_STOP)  # leave the stop for the next round (and for the other workers)
                break
            dps.append(item[0])
            futures.append(item[1])
        ncomp = len(dps[0])
        for dp, f in zip(dps, futures):
            if len(dp) != ncomp:
                err = ValueError(f"MultiThreadAsyncPredictor: datapoints of one batch have {ncomp} and {len(dp)} "
                                 "components; every datapoint needs one value per input")
                for g in futures:
                    g.set_exception(err)
                return [], []
        return [np.asarray([dp[k] for dp in dps]) for k in range(ncomp)], futures

    def stop(self) -> None:
        self._stopped.set()


class MultiThreadAsyncPredictor(AsyncPredictorBase):
    """Run several :class:`OnlinePredictor` in threads, one thread each, over one task queue;
    each thread batches up to ``batch_size`` queued datapoints into one run.

    A datapoint is unbatched (one value per input, without the batch dimension); its future
    resolves to the list of its outputs (each output's row for that datapoint).

    Predictors without a session use the default session of the thread that calls
    :meth:`start`.

    :param predictors: a non-empty list of :class:`OnlinePredictor` (without ``return_input``).
    :param batch_size: the largest batch a thread runs at once.
    """

    def __init__(self, predictors: Sequence[OnlinePredictor], batch_size: int = 5) -> None:
        predictors = list(predictors)
        if not predictors:
            raise ValueError("MultiThreadAsyncPredictor needs at least one predictor")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"MultiThreadAsyncPredictor: batch_size must be an int >= 1, got {batch_size!r}")
        self._need_default_sess = False
        for p in predictors:
            if not isinstance(p, OnlinePredictor):
                raise TypeError(f"MultiThreadAsyncPredictor: every predictor must be an OnlinePredictor, got "
                                f"{type(p).__name__} {p!r}")
            if p.return_input:
                raise ValueError(f"MultiThreadAsyncPredictor does not support predictors with return_input=True "
                                 f"({p!r}); the futures give the outputs, keep the inputs yourself")
            if p.sess is None:
                self._need_default_sess = True
        self.predictors = predictors
        self.batch_size = batch_size
        self.input_queue: queue.Queue = queue.Queue(maxsize=len(predictors) * 100)
        self.threads = [_PredictorWorkerThread(self.input_queue, p, i, batch_size) for i, p in enumerate(predictors)]
        self._started = False

    def start(self) -> None:
        """Start the worker threads (call under the default session if a predictor has none)."""
        if self._started:
            raise RuntimeError("MultiThreadAsyncPredictor.start() was already called")
        sess = tf1.get_default_session()
        if self._need_default_sess and sess is None:
            raise RuntimeError("MultiThreadAsyncPredictor: some predictors have no session; call start() under a "
                               "default session (with sess.as_default(): predictor.start())")
        for t in self.threads:
            t.sess = sess
            t.start()
        self._started = True

    def put_task(self, dp: Sequence[Any], callback: Callable[[Future], Any] | None = None) -> Future:
        """Queue one unbatched datapoint.

        :param dp: one value per input, without the batch dimension.
        :param callback: called with the ``Future`` when it is done, from a worker thread.
        :returns: a ``concurrent.futures.Future`` of the list of outputs for ``dp``.
        """
        f: Future = Future()
        if callback is not None:
            f.add_done_callback(callback)
        self.input_queue.put((list(dp), f))
        return f

    def stop(self, timeout: float | None = 10.0) -> None:
        """Let the workers finish the queued tasks, then end the threads."""
        if not self._started:
            return
        self.input_queue.put(_STOP)
        for t in self.threads:
            t.join(timeout)
