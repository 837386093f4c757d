"""Inference during training for trainbus: runners and inferencers."""

from __future__ import annotations

from trainbus_inference._inferencer import BinaryClassificationStats, ClassificationError, Inferencer, ScalarStats
from trainbus_inference._runner import DataParallelInferenceRunner, InferenceRunner, InferenceRunnerBase

__all__ = ["Inferencer", "ScalarStats", "ClassificationError", "BinaryClassificationStats", "InferenceRunnerBase",
           "InferenceRunner", "DataParallelInferenceRunner"]
