"""Predictors that run over every datapoint of a DataFlow."""

from __future__ import annotations

import abc
import multiprocessing
import os
import pickle
import queue
import threading
import traceback
from typing import Any, Iterator

from trainbus.dataflow import is_dataflow
from trainbus.predict.base import OfflinePredictor
from trainbus.predict.config import PredictConfig
from trainbus.utils import logger

__all__ = ["DatasetPredictorBase", "SimpleDatasetPredictor", "MultiProcessDatasetPredictor"]


class DatasetPredictorBase(abc.ABC):
    """Base class of predictors that run over a DataFlow.

    :param config: a :class:`~trainbus.predict.PredictConfig`.
    :param dataset: the DataFlow; each datapoint holds one value per input of ``config.input_names``.
    """

    def __init__(self, config: PredictConfig, dataset: Any) -> None:
        if not isinstance(config, PredictConfig):
            raise TypeError(f"{type(self).__name__}: config must be a PredictConfig, got "
                            f"{type(config).__name__} {config!r}")
        if not is_dataflow(dataset):
            raise TypeError(f"{type(self).__name__}: dataset must be a DataFlow (with __iter__ and reset_state), "
                            f"got {type(dataset).__name__} {dataset!r}")
        self.config = config
        self.dataset = dataset

    @abc.abstractmethod
    def get_result(self) -> Iterator[Any]:
        """Yield the outputs of each datapoint of the DataFlow, in order."""

    def get_all_result(self) -> list[Any]:
        """The outputs of every datapoint, as a list."""
        return list(self.get_result())


class SimpleDatasetPredictor(DatasetPredictorBase):
    """Build one :class:`~trainbus.predict.OfflinePredictor` and run it on each datapoint of the
    DataFlow in turn (a progress bar shows when the DataFlow has a length).

    Example::

        pred = SimpleDatasetPredictor(PredictConfig(model=MyModel(), session_init=SmartInit(ckpt),
                                                    input_names=["image"], output_names=["prob"]),
                                      BatchData(test_data, 64))
        for prob, in pred.get_result():
            ...
    """

    def __init__(self, config: PredictConfig, dataset: Any) -> None:
        super().__init__(config, dataset)
        self.predictor = OfflinePredictor(config)

    def get_result(self) -> Iterator[Any]:
        """Reset the DataFlow, then yield ``predictor(*dp)`` for each datapoint ``dp``."""
        self.dataset.reset_state()
        try:
            total = len(self.dataset)
        except (TypeError, NotImplementedError, ValueError):
            total = 0
        bar = _progress(total)
        try:
            for dp in self.dataset:
                yield self.predictor(*dp)
                if bar is not None:
                    bar.update()
        finally:
            if bar is not None:
                bar.close()


def _progress(total: int) -> Any:
    if total <= 0:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is optional
        return None
    return tqdm(total=total, desc="predict", leave=False, disable=None)


_gpu_env_lock = threading.Lock()


def _worker_main(idx: int, config: PredictConfig, tasks: Any, results: Any) -> None:
    """A worker process: build an OfflinePredictor, then predict ``(task id, dp)`` from
    ``tasks`` into ``results`` as ``(task id, outputs)`` until a ``None`` task id."""
    try:
        predictor = OfflinePredictor(config)
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises it
        results.put((_ERROR, (idx, None, traceback.format_exc())))
        return
    results.put((_READY, idx))
    while True:
        tid, dp = tasks.get()
        if tid is None:
            results.put((_DONE, idx))
            return
        try:
            out = predictor(*dp)
        except BaseException:  # noqa: BLE001
            results.put((_ERROR, (idx, tid, traceback.format_exc())))
            return
        results.put((tid, out))


_READY, _DONE, _ERROR = "__ready__", "__done__", "__error__"


class MultiProcessDatasetPredictor(DatasetPredictorBase):
    """Predict over a DataFlow with ``nr_proc`` worker processes, each with its own
    :class:`~trainbus.predict.OfflinePredictor` (on its own GPU, or on the CPU).

    Workers are started with the ``spawn`` method (a fresh Python that imports TensorFlow: forking
    a process that runs TensorFlow is unsafe), so ``config`` must be picklable: its model class or
    tower function must be importable by module and name (not defined inside a function), and so
    must the session initializer. The datapoints and outputs travel through pipes (pickled).

    :param config: a :class:`~trainbus.predict.PredictConfig`.
    :param dataset: the DataFlow, read in the calling process.
    :param nr_proc: the number of worker processes.
    :param use_gpu: give each worker one GPU (from ``CUDA_VISIBLE_DEVICES``, or the visible GPUs),
        so ``nr_proc`` cannot exceed their number; with False every worker sees no GPU.
    :param ordered: yield the results in the order of the datapoints (else as they come).
    """

    def __init__(self, config: PredictConfig, dataset: Any, nr_proc: int, use_gpu: bool = True,
                 ordered: bool = True) -> None:
        super().__init__(config, dataset)
        if isinstance(nr_proc, bool) or not isinstance(nr_proc, int) or nr_proc < 1:
            raise ValueError(f"MultiProcessDatasetPredictor: nr_proc must be an int >= 1, got {nr_proc!r}")
        if config.return_input:
            logger.warning("MultiProcessDatasetPredictor with return_input=True sends every input back from the "
                           "workers, which is slow")
        try:
            pickle.dumps(config)
        except Exception as e:  # noqa: BLE001 - the message says what to change
            raise TypeError(f"MultiProcessDatasetPredictor: the PredictConfig cannot be sent to worker processes "
                            f"({type(e).__name__}: {e}); define its model class / tower function at module level "
                            "and use a picklable session_init") from None
        if use_gpu:
            env = os.environ.get("CUDA_VISIBLE_DEVICES")
            if env is not None:
                gpus = [g for g in env.split(",") if g.strip() and g.strip() != "-1"]
            else:
                import tensorflow as tf

                gpus = [str(i) for i in range(len(tf.config.list_physical_devices("GPU")))]
            if len(gpus) < nr_proc:
                raise ValueError(f"MultiProcessDatasetPredictor: nr_proc={nr_proc} with use_gpu=True needs {nr_proc} "
                                 f"GPUs, but {len(gpus)} are available; pass use_gpu=False to predict on the CPU")
        else:
            gpus = ["-1"] * nr_proc
        self.nr_proc = nr_proc
        self.ordered = bool(ordered)
        ctx = multiprocessing.get_context("spawn")
        self._tasks = ctx.Queue(maxsize=nr_proc * 4)
        self._results = ctx.Queue()
        self.workers = []
        for i in range(nr_proc):
            p = ctx.Process(target=_worker_main, args=(i, config, self._tasks, self._results),
                            name=f"MultiProcessPredictWorker-{i}", daemon=True)
            self.workers.append(p)
            with _gpu_env_lock:
                old = os.environ.get("CUDA_VISIBLE_DEVICES")
                os.environ["CUDA_VISIBLE_DEVICES"] = gpus[i]
                try:
                    p.start()
                finally:
                    if old is None:
                        del os.environ["CUDA_VISIBLE_DEVICES"]
                    else:
                        os.environ["CUDA_VISIBLE_DEVICES"] = old
            logger.info(f"Worker {i} predicts on {'the CPU' if gpus[i] == '-1' else 'GPU ' + gpus[i]}")
        self._running = False
        self._closed = False

    def _get(self, finished: Any) -> Any:
        """The next message from the workers, or None once ``finished()``; raises when a worker
        died without a word."""
        while True:
            if finished():
                return None
            try:
                return self._results.get(timeout=0.1)
            except queue.Empty:
                dead = [p for p in self.workers if p.exitcode is not None]
                if dead:
                    self.close()
                    raise RuntimeError(f"MultiProcessDatasetPredictor: worker {dead[0].name} exited with code "
                                       f"{dead[0].exitcode} without reporting") from None

    def _raise_worker_error(self, info: tuple) -> None:
        idx, tid, tb = info
        self.close()
        what = "building the predictor" if tid is None else f"predicting datapoint {tid}"
        raise RuntimeError(f"MultiProcessDatasetPredictor: worker {idx} failed while {what}:\n{tb}")

    def get_result(self) -> Iterator[Any]:
        """Reset the DataFlow, send every datapoint to the workers and yield the outputs
        (in the DataFlow's order when ``ordered``)."""
        if self._closed:
            raise RuntimeError("MultiProcessDatasetPredictor was closed")
        if self._running:
            raise RuntimeError("MultiProcessDatasetPredictor.get_result(): the previous round is not finished")
        self._running = True
        self.dataset.reset_state()
        total: list[int] = []
        feed_error: list[BaseException] = []

        def feed() -> None:
            n = 0
            try:
                for dp in self.dataset:
                    self._tasks.put((n, dp))
                    n += 1
            except BaseException as e:  # noqa: BLE001 - re-raised by the consumer
                feed_error.append(e)
            total.append(n)

        feeder = threading.Thread(target=feed, name="MultiProcessDatasetPredictor-feed", daemon=True)
        feeder.start()
        try:
            received, next_id, pending = 0, 0, {}

            def finished() -> bool:
                return bool(feed_error) or (bool(total) and received == total[0])

            while True:
                msg = self._get(finished)
                if msg is None:
                    break
                tag, value = msg
                if tag == _READY:
                    continue
                if tag == _ERROR:
                    self._raise_worker_error(value)
                received += 1
                if not self.ordered:
                    yield value
                    continue
                pending[tag] = value
                while next_id in pending:
                    yield pending.pop(next_id)
                    next_id += 1
            feeder.join()
            if feed_error:
                raise feed_error[0]
        finally:
            self._running = False

    def close(self) -> None:
        """Stop the worker processes."""
        if self._closed:
            return
        self._closed = True
        alive = [p for p in self.workers if p.is_alive()]
        for _ in alive:
            try:
                self._tasks.put((None, None), timeout=1.0)
            except queue.Full:
                break
        for p in alive:
            p.join(timeout=10)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
