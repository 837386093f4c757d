"""TensorFlow version compatibility, as tensorpack's ``compat``: ``tfv1`` is the
``tf.compat.v1`` module (``from trainbus import tfv1 as tf`` is how most tensorpack scripts
begin), ``is_tfv2()`` whether TensorFlow runs with 2.x behaviour.

Importing this module imports TensorFlow (``import trainbus`` alone does not).
"""

from __future__ import annotations

from trainbus.utils.lazytf import tf as _tf

__all__ = ["tfv1", "is_tfv2"]

#: the ``tf.compat.v1`` module
tfv1 = _tf().compat.v1


def is_tfv2() -> bool:
    """Whether TensorFlow runs with its 2.x behaviour enabled (``True`` on TF 2.x unless
    ``tf.compat.v1.disable_v2_behavior()`` was called)."""
    try:
        from tensorflow.python import tf2
    except ImportError:  # pragma: no cover - a TensorFlow without the module is 1.x
        return False
    return bool(tf2.enabled())
