"""Images for monitors: PNG encoding through Pillow, wrapped into TF summaries."""

from __future__ import annotations

import io
from typing import Any

import numpy as np


def encode_png(img: np.ndarray) -> bytes:
    """PNG bytes of an HW, HWC (1, 3 or 4 channels) array in [0, 255]."""
    from PIL import Image

    arr = np.clip(np.asarray(img), 0, 255).astype(np.uint8)
    if arr.ndim == 3 and arr.shape[-1] == 1:
        arr = arr[:, :, 0]
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="PNG")
    return buf.getvalue()


def image_summary(name: str, imgs: np.ndarray) -> Any:
    """A ``tf.compat.v1.Summary`` with one image value per image of the NHWC batch."""
    from trainbus.utils import lazytf as _tf

    tf1 = _tf.tf1()
    s = tf1.Summary()
    n = imgs.shape[0]
    for i in range(n):
        h, w, c = imgs[i].shape
        tag = name if n == 1 else f"{name}/{i}"
        s.value.add(tag=tag, image=tf1.Summary.Image(height=h, width=w, colorspace=c, encoded_image_string=encode_png(imgs[i])))
    return s
