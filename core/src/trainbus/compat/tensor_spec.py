"""``TensorSpec`` at tensorpack's path (``tensorpack.compat.tensor_spec``): TensorFlow's own."""

from __future__ import annotations

from trainbus.utils.lazytf import tf as _tf

__all__ = ["TensorSpec"]

TensorSpec = _tf().TensorSpec
