"""TensorFlow's objects and Python's full garbage collections.

``import tensorflow`` leaves about a million objects for Python's cycle collector to track (its
modules, op and kernel registries, Keras). A *full* collection (of the oldest generation) walks
every one of them: about 0.2 s on the development machine, whatever it finds. When one happens
depends only on how many objects the process allocated since the last one, so it falls on
whichever code crosses the threshold: during ``import tensorflow`` in an environment with more
packages for Keras to import, or during a training's setup, or at some step.

trainbus therefore moves the objects that exist once TensorFlow is imported into the collector's
permanent generation (``gc.freeze()``), once per process: they live as long as the process, and
later full collections walk only what was made after. This happens when trainbus is imported
after TensorFlow, else when the first ``TrainConfig`` or trainer is made. It does not happen
when the collector is off (``gc.disable()``) or with ``TRAINBUS_GC_FREEZE=0``. An object alive
at that moment that later becomes part of unreachable cycles (a graph built before trainbus was
imported, then dropped) is never collected; a full collection right after ``import tensorflow``
finds no garbage or a handful of objects.
"""

from __future__ import annotations

import gc
import os
import sys

__all__ = ["freeze_tensorflow_objects"]

_decided = False


def freeze_tensorflow_objects() -> bool:
    """Freeze the objects that exist now, the first time this is called after TensorFlow was
    imported (and the collector is on, and ``TRAINBUS_GC_FREEZE`` does not say ``0``). Returns
    whether it froze them now."""
    global _decided
    if _decided or "tensorflow" not in sys.modules:
        return False
    _decided = True
    if os.environ.get("TRAINBUS_GC_FREEZE", "").strip().lower() in ("0", "false", "no", "off"):
        return False
    if not gc.isenabled():
        return False
    gc.freeze()
    return True
