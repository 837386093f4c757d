"""Inferencers: what to fetch from an inference tower, and how to turn results into statistics."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from trainbus.callbacks.base import Callback

__all__ = ["Inferencer", "ScalarStats", "ClassificationError", "BinaryClassificationStats"]


def _tensor_name(name: str) -> str:
    """``"wrong"`` -> ``"wrong:0"``; ``"wrong:1"`` stays."""
    if ":" in name and name.rsplit(":", 1)[1].isdigit():
        return name
    return name + ":0"


def _as_name_list(names: Any, who: str, arg: str) -> list[str]:
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, (list, tuple)) or not names:
        raise ValueError(f"{who}: {arg} must be a tensor name or a non-empty list of tensor names, got {names!r}")
    for n in names:
        if not isinstance(n, str) or not n:
            raise TypeError(f"{who}: every entry of {arg} must be a non-empty string (a tensor name), got {n!r}")
    return list(names)


class Inferencer(Callback):
    """Base class of inferencers: callbacks that an ``InferenceRunner`` drives.

    A runner calls, for each round of inference: ``before_inference()``; ``on_fetches(results)``
    once per batch, with the values of the tensors named by ``get_fetches()``; and
    ``after_inference()``, whose dict of scalars the runner puts to the monitors.
    Subclasses implement ``_get_fetches``, ``_on_fetches`` and usually ``_before_inference`` /
    ``_after_inference``. The runner also forwards ``setup_graph``, ``before_train`` and
    ``after_train`` to its inferencers.
    """

    def before_inference(self) -> None:
        """Called before a new round of inference starts."""
        self._before_inference()

    def _before_inference(self) -> None:
        """Reset the accumulated statistics here."""

    def after_inference(self) -> dict[str, float] | None:
        """Called after a round of inference ends; returns a dict of scalar statistics (or
        None), which the runner puts to the monitors."""
        ret = self._after_inference()
        if ret is None:
            return None
        if not isinstance(ret, dict):
            raise TypeError(f"{self}: _after_inference() must return a dict of name -> scalar or None, got {ret!r}")
        return ret

    def _after_inference(self) -> dict[str, float] | None:
        return None

    def get_fetches(self) -> list[str]:
        """The tensor names (never op names: ``"x"`` becomes ``"x:0"``) this inferencer needs."""
        ret = self._get_fetches()
        if isinstance(ret, str):
            ret = [ret]
        out = []
        for r in ret:
            if not isinstance(r, str):
                raise TypeError(f"{self}: _get_fetches() must return tensor names (str), got {r!r}")
            out.append(_tensor_name(r))
        return out

    def _get_fetches(self) -> Sequence[str]:
        raise TypeError(f"{type(self).__name__} must implement _get_fetches() returning a list of tensor names")

    def on_fetches(self, results: list[Any]) -> None:
        """Called after each batch was run through the tower.

        :param results: the values of ``get_fetches()``, in the same order and length.
        """
        self._on_fetches(results)

    def _on_fetches(self, results: list[Any]) -> None:
        raise TypeError(f"{type(self).__name__} must implement _on_fetches(results)")


class ScalarStats(Inferencer):
    """The mean of some scalar tensors over all batches of the inference input.

    Logged as ``{prefix}_{name}`` (just ``name`` when ``prefix`` is empty). The mean of a
    per-batch accuracy is not the accuracy over the dataset when batches differ in size:
    see :class:`ClassificationError`.

    :param names: a tensor name or a list of them; the tensors must be scalars.
    :param prefix: prefix of the logged names.
    """

    def __init__(self, names: str | Sequence[str], prefix: str = "validation") -> None:
        self.names = _as_name_list(names, "ScalarStats", "names")
        if not isinstance(prefix, str):
            raise TypeError(f"ScalarStats: prefix must be a string, got {prefix!r}")
        self.prefix = prefix
        self._sums = np.zeros(len(self.names), dtype="float64")
        self._count = 0

    def _get_fetches(self) -> list[str]:
        return self.names

    def _before_inference(self) -> None:
        self._sums = np.zeros(len(self.names), dtype="float64")
        self._count = 0

    def _on_fetches(self, results: list[Any]) -> None:
        for i, (name, v) in enumerate(zip(self.names, results)):
            arr = np.asarray(v)
            if arr.size != 1:
                raise ValueError(f"ScalarStats: tensor {name!r} must be a scalar, but it has shape {arr.shape}; "
                                 "reduce it in the graph (e.g. tf.reduce_mean) or use another Inferencer")
            self._sums[i] += float(arr.reshape(()))
        self._count += 1

    def _after_inference(self) -> dict[str, float]:
        if self._count == 0:
            return {}
        ret = {}
        for name, s in zip(self.names, self._sums):
            key = name[:-2] if name.endswith(":0") else name
            ret[f"{self.prefix}_{key}" if self.prefix else key] = float(s / self._count)
        return ret

    def __str__(self) -> str:
        return f"ScalarStats({self.names})"


class ClassificationError(Inferencer):
    """The true classification error over the whole inference input.

    ``wrong_tensor_name`` names a vector with one 0/1 entry per sample of the batch (1 =
    misclassified, e.g. ``tf.cast(tf.logical_not(tf.nn.in_top_k(logits, label, 1)), tf.float32)``).
    The error is ``sum(wrong) / number of samples``, so a smaller last batch counts as much as
    its samples, unlike the mean of per-batch error rates. Given a "correct" vector instead,
    the result is the accuracy.

    :param wrong_tensor_name: name of the 0/1 vector tensor.
    :param summary_name: the name to log the error with.
    """

    def __init__(self, wrong_tensor_name: str = "incorrect_vector", summary_name: str = "validation_error") -> None:
        _as_name_list(wrong_tensor_name, "ClassificationError", "wrong_tensor_name")
        if not isinstance(wrong_tensor_name, str):
            raise TypeError(f"ClassificationError: wrong_tensor_name must be one tensor name, got {wrong_tensor_name!r}")
        if not isinstance(summary_name, str) or not summary_name:
            raise ValueError(f"ClassificationError: summary_name must be a non-empty string, got {summary_name!r}")
        self.wrong_tensor_name = wrong_tensor_name
        self.summary_name = summary_name
        self._wrong = 0.0
        self._total = 0

    def _get_fetches(self) -> list[str]:
        return [self.wrong_tensor_name]

    def _before_inference(self) -> None:
        self._wrong = 0.0
        self._total = 0

    def _on_fetches(self, results: list[Any]) -> None:
        vec = np.asarray(results[0])
        if vec.ndim != 1:
            raise ValueError(
                f"ClassificationError: {self.wrong_tensor_name!r} must be a vector with one entry per sample, "
                f"got shape {vec.shape}; for a per-batch scalar use ScalarStats instead")
        self._wrong += float(vec.sum())
        self._total += int(vec.shape[0])

    def _after_inference(self) -> dict[str, float]:
        if self._total == 0:
            return {}
        return {self.summary_name: self._wrong / self._total}

    def __str__(self) -> str:
        return f"ClassificationError({self.wrong_tensor_name!r})"


class BinaryClassificationStats(Inferencer):
    """Precision and recall of a binary classifier over the whole inference input.

    Logged as ``{prefix}_precision`` and ``{prefix}_recall``. A ratio whose denominator is 0
    (nothing predicted positive, or no positive label) is logged as 0.

    :param pred_tensor_name: name of the 0/1 prediction tensor.
    :param label_tensor_name: name of the 0/1 label tensor (same shape).
    :param prefix: prefix of the logged names.
    """

    def __init__(self, pred_tensor_name: str, label_tensor_name: str, prefix: str = "val") -> None:
        for arg, v in (("pred_tensor_name", pred_tensor_name), ("label_tensor_name", label_tensor_name)):
            if not isinstance(v, str) or not v:
                raise TypeError(f"BinaryClassificationStats: {arg} must be a tensor name, got {v!r}")
        if not isinstance(prefix, str):
            raise TypeError(f"BinaryClassificationStats: prefix must be a string, got {prefix!r}")
        self.pred_tensor_name = pred_tensor_name
        self.label_tensor_name = label_tensor_name
        self.prefix = prefix
        self._tp = self._pred_pos = self._label_pos = 0

    def _get_fetches(self) -> list[str]:
        return [self.pred_tensor_name, self.label_tensor_name]

    def _before_inference(self) -> None:
        self._tp = self._pred_pos = self._label_pos = 0

    def _on_fetches(self, results: list[Any]) -> None:
        pred, label = (np.asarray(r) for r in results)
        if pred.shape != label.shape:
            raise ValueError(f"BinaryClassificationStats: prediction {self.pred_tensor_name!r} has shape {pred.shape} "
                             f"but label {self.label_tensor_name!r} has shape {label.shape}")
        for arr, name in ((pred, self.pred_tensor_name), (label, self.label_tensor_name)):
            if arr.size and not np.isin(arr, (0, 1)).all():
                raise ValueError(f"BinaryClassificationStats: {name!r} must contain only 0 and 1")
        pred = pred.astype(bool)
        label = label.astype(bool)
        self._tp += int(np.logical_and(pred, label).sum())
        self._pred_pos += int(pred.sum())
        self._label_pos += int(label.sum())

    @property
    def precision(self) -> float:
        return self._tp / self._pred_pos if self._pred_pos else 0.0

    @property
    def recall(self) -> float:
        return self._tp / self._label_pos if self._label_pos else 0.0

    def _after_inference(self) -> dict[str, float]:
        p = f"{self.prefix}_" if self.prefix else ""
        return {p + "precision": self.precision, p + "recall": self.recall}
