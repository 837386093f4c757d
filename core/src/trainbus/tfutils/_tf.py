"""Lazy access to TensorFlow (kept for old imports; see :mod:`trainbus.utils.lazytf`)."""

from trainbus.utils.lazytf import tf, tf1

__all__ = ["tf", "tf1"]
