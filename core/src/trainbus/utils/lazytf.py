"""TensorFlow imported on first use, for modules that must import without it."""

from __future__ import annotations

import functools
import os
from typing import Any

__all__ = ["tf", "tf1"]


@functools.lru_cache(maxsize=None)
def tf() -> Any:
    """The ``tensorflow`` module, imported on the first call (TensorFlow's C++ start-up
    messages are kept quiet unless ``TF_CPP_MIN_LOG_LEVEL`` says otherwise)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow

    return tensorflow


@functools.lru_cache(maxsize=None)
def tf1() -> Any:
    """``tensorflow.compat.v1``, imported on the first call."""
    return tf().compat.v1
