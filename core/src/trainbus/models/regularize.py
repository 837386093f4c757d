"""Dropout layer."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainbus.models._common import need_tower_training
from trainbus.models.registry import layer_register

__all__ = ["Dropout"]


@layer_register(use_scope=None)
def Dropout(inputs: Any, rate: float | None = None, noise_shape: Any = None, seed: int | None = None,
            training: bool | None = None, keep_prob: float | None = None) -> Any:
    """Dropout, active only when training (the TowerContext's ``is_training`` unless
    ``training`` is given). The name is optional: ``Dropout(x, rate=0.5)`` or
    ``Dropout('drop', x, rate=0.5)``.

    :param rate: fraction of units dropped (default 0.5).
    :param keep_prob: tensorpack's older form: ``rate = 1 - keep_prob``.
    """
    if keep_prob is not None:
        if rate is not None:
            raise ValueError("Dropout: give rate or keep_prob, not both")
        rate = 1.0 - keep_prob
    if rate is None:
        rate = 0.5
    if isinstance(rate, (int, float)) and not 0.0 <= float(rate) < 1.0:
        raise ValueError(f"Dropout: rate must be in [0, 1), got {rate!r}")
    x = tf.convert_to_tensor(inputs)
    if need_tower_training(training, "Dropout"):
        return tf.nn.dropout(x, rate=rate, noise_shape=noise_shape, seed=seed)
    return tf.identity(x)
