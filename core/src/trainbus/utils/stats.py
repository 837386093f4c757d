"""Running statistics (``StatCounter``, ``RatioCounter``, ``Accuracy``, ``BinaryStatistics``, ``OnlineMoments``),
and reading ``stats.json`` (shared by the JSON monitor and resuming)."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

__all__ = ["StatCounter", "BinaryStatistics", "RatioCounter", "Accuracy", "OnlineMoments"]

FILENAME = "stats.json"


class CorruptStatsError(ValueError):
    """``stats.json`` exists but cannot be parsed; ``file`` names it, ``problem`` says what is wrong."""

    def __init__(self, file: str, problem: str) -> None:
        self.file = file
        self.problem = problem
        super().__init__(f"{problem}; move it away (or restore it from a backup) before resuming in this directory")


def load_existing_json(dir: str | None) -> list[dict[str, Any]] | None:
    """The records of ``dir/stats.json``, or None if there is none. Values written as ``"NaN"``,
    ``"Infinity"`` or ``"-Infinity"`` (strict JSON) come back as floats, as does a bare ``NaN``
    of older files."""
    from trainbus.checkpoint import loads_strict

    if dir is None:
        return None
    fname = os.path.join(dir, FILENAME)
    if not os.path.isfile(fname):
        return None
    try:
        with open(fname, "rb") as f:
            stats = loads_strict(f.read().decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CorruptStatsError(fname, f"{fname} is not valid JSON ({e})") from None
    if not isinstance(stats, list):
        raise CorruptStatsError(fname, f"{fname} does not hold a list of records")
    return stats


def load_existing_epoch_number(dir: str | None) -> int | None:
    """The ``epoch_num`` of the last record of ``dir/stats.json``, or None (also when the file
    is damaged: a warning says so; the JSON monitor moves it aside when training starts)."""
    try:
        stats = load_existing_json(dir)
    except CorruptStatsError as e:
        from trainbus.utils import logger

        logger.warning(f"{e.problem}; the epoch to resume from is taken from the checkpoint instead.")
        return None
    try:
        return int(stats[-1]["epoch_num"]) if stats else None
    except (KeyError, TypeError, ValueError):
        return None


class StatCounter:
    """Collects values (numbers, or arrays of one shape) and gives their count, average, sum, max and min.

    With arrays, the statistics are over every element of every value (as ``np.mean`` of the list of values).
    """

    def __init__(self) -> None:
        self.reset()

    def feed(self, v: Any) -> None:
        """Add a value (a number, or an array of the same shape as the others)."""
        self._values.append(v)

    def reset(self) -> None:
        """Forget every value."""
        self._values: list[Any] = []

    def _need_values(self, what: str) -> None:
        if not self._values:
            raise ValueError(f"StatCounter.{what}: no value was fed yet (call feed() first)")

    @property
    def count(self) -> int:
        return len(self._values)

    @property
    def average(self) -> Any:
        self._need_values("average")
        return np.mean(self._values)

    @property
    def sum(self) -> Any:
        self._need_values("sum")
        return np.sum(self._values)

    @property
    def max(self) -> Any:
        self._need_values("max")
        return np.max(self._values) if np.ndim(self._values[0]) else max(self._values)

    @property
    def min(self) -> Any:
        self._need_values("min")
        return np.min(self._values) if np.ndim(self._values[0]) else min(self._values)

    def samples(self) -> list[Any]:
        """Every value fed, in order."""
        return self._values


class RatioCounter:
    """Counts events of interest among all events: ``ratio = count / total`` (0 before any event)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._tot = 0
        self._cnt = 0

    def feed(self, count: int | float, total: int | float = 1) -> None:
        """Add ``count`` events of interest out of ``total`` events."""
        self._tot += total
        self._cnt += count

    @property
    def ratio(self) -> float:
        return 0 if self._tot == 0 else self._cnt * 1.0 / self._tot

    @property
    def total(self) -> int | float:
        """The number of events."""
        return self._tot

    @property
    def count(self) -> int | float:
        """The number of events of interest."""
        return self._cnt


class Accuracy(RatioCounter):
    """A :class:`RatioCounter` of correct answers; ``accuracy`` is its ratio."""

    @property
    def accuracy(self) -> float:
        return self.ratio


class BinaryStatistics:
    """Precision, recall, false positive and false negative rates of binary predictions (1 = positive)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.nr_pos = 0  # labels that are positive
        self.nr_neg = 0
        self.nr_pred_pos = 0  # predictions that are positive
        self.nr_pred_neg = 0
        self.corr_pos = 0  # positive predictions that are right
        self.corr_neg = 0

    def feed(self, pred: np.ndarray, label: np.ndarray) -> None:
        """Add a batch: ``pred`` and ``label`` are arrays of 0/1 of the same shape."""
        pred, label = np.asarray(pred), np.asarray(label)
        if pred.shape != label.shape:
            raise ValueError(f"BinaryStatistics.feed: pred has shape {pred.shape} but label has {label.shape}; "
                             "they must match")
        self.nr_pos += int((label == 1).sum())
        self.nr_neg += int((label == 0).sum())
        self.nr_pred_pos += int((pred == 1).sum())
        self.nr_pred_neg += int((pred == 0).sum())
        self.corr_pos += int(((pred == 1) & (pred == label)).sum())
        self.corr_neg += int(((pred == 0) & (pred == label)).sum())

    @property
    def precision(self) -> float:
        return 0 if self.nr_pred_pos == 0 else self.corr_pos * 1.0 / self.nr_pred_pos

    @property
    def recall(self) -> float:
        return 0 if self.nr_pos == 0 else self.corr_pos * 1.0 / self.nr_pos

    @property
    def false_positive(self) -> float:
        """The share of positive predictions that are wrong (``1 - precision``)."""
        return 0 if self.nr_pred_pos == 0 else 1 - self.precision

    @property
    def false_negative(self) -> float:
        """The share of positive labels that were missed (``1 - recall``)."""
        return 0 if self.nr_pos == 0 else 1 - self.recall


class OnlineMoments:
    """Mean and variance of a stream of numbers or same-shape arrays, without storing them (Welford's method)."""

    def __init__(self) -> None:
        self._mean: Any = 0
        self._M2: Any = 0
        self._n = 0

    def feed(self, x: Any) -> None:
        """Add a value (a number or an array of the same shape as the others)."""
        self._n += 1
        delta = x - self._mean
        self._mean = self._mean + delta * (1.0 / self._n)
        self._M2 = self._M2 + delta * (x - self._mean)

    @property
    def mean(self) -> Any:
        return self._mean

    @property
    def variance(self) -> Any:
        """The unbiased sample variance (divides by ``n - 1``); needs two values or more."""
        if self._n < 2:
            raise ValueError(f"OnlineMoments.variance needs at least 2 values, got {self._n}")
        return self._M2 / (self._n - 1)

    @property
    def std(self) -> Any:
        return np.sqrt(self.variance)
