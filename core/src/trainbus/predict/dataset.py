"""Predictors that run over every datapoint of a DataFlow."""

from __future__ import annotations

import abc
from typing import Any, Iterator

from trainbus.dataflow import is_dataflow
from trainbus.predict.base import OfflinePredictor
from trainbus.predict.config import PredictConfig

__all__ = ["DatasetPredictorBase", "SimpleDatasetPredictor"]


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
