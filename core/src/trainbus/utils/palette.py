"""``PALETTE_RGB``: 79 distinct colours for drawing boxes, masks and class labels.

A ``(79, 3)`` float32 array of RGB values in [0, 255] (the shape and dtype tensorpack's palette has). The colours
are generated here: hues advance by the golden ratio (so neighbouring entries differ strongly) through three
saturation/brightness levels. Index it with a class id modulo ``len(PALETTE_RGB)``.
"""

from __future__ import annotations

import colorsys

import numpy as np

__all__ = ["PALETTE_RGB"]

_NUM_COLORS = 79
_GOLDEN = 0.6180339887498949


def _generate(n: int) -> np.ndarray:
    levels = [(0.85, 0.95), (0.6, 0.75), (1.0, 0.6)]  # (saturation, value)
    out = np.empty((n, 3), dtype=np.float32)
    hue = 0.07
    for i in range(n):
        s, v = levels[i % len(levels)]
        out[i] = colorsys.hsv_to_rgb(hue, s, v)
        hue = (hue + _GOLDEN) % 1.0
    return np.round(out * 255.0).astype(np.float32)


PALETTE_RGB: np.ndarray = _generate(_NUM_COLORS)
