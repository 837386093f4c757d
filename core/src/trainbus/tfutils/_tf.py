"""Lazy access to TensorFlow for the event core (which must import without it)."""

from __future__ import annotations

import functools
import os
from typing import Any


@functools.lru_cache(maxsize=None)
def tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow

    return tensorflow


@functools.lru_cache(maxsize=None)
def tf1() -> Any:
    return tf().compat.v1
