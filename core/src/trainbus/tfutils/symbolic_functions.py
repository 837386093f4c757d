"""Small symbolic helpers: print a tensor's statistics while it flows, RMS, PSNR."""

from __future__ import annotations

import sys
from typing import Any

import tensorflow as tf

tf1 = tf.compat.v1

__all__ = ["print_stat", "rms", "psnr"]


def print_stat(x: Any, message: str | None = None, output_stream: Any = sys.stderr) -> Any:
    """``x`` unchanged, printing when it is evaluated: ``message`` (default: the op's name),
    the shape, the mean, the RMS (floating types) and the values (at most 20 per dimension).

    Use it in the flow: ``x = print_stat(x, "logits")``.

    :param output_stream: where ``tf.print`` writes: ``sys.stderr`` (default), ``sys.stdout``,
        or ``"file://<path>"`` to append to a file.
    """
    if message is None:
        message = x.op.name
    items = [tf.shape(x), tf.reduce_mean(x)]
    if x.dtype.is_floating:
        items.append(rms(x))
    printed = tf.print(message, *items, x, summarize=20, output_stream=output_stream)
    with tf.control_dependencies([printed]):
        return tf.identity(x, name="print_" + x.op.name)


def rms(x: Any, name: str | None = None) -> Any:
    """The root mean square of all elements of ``x``; the op is named ``<x's op name>/rms``
    unless ``name`` is given."""
    if name is None:
        with tf1.name_scope(None):  # the name carries x's scope already
            return tf.sqrt(tf.reduce_mean(tf.square(x)), name=x.op.name + "/rms")
    return tf.sqrt(tf.reduce_mean(tf.square(x)), name=name)


def psnr(prediction: Any, ground_truth: Any, maxp: float | None = None, name: str = "psnr") -> Any:
    """Peak signal-to-noise ratio between two tensors of the same shape:
    ``20 log10(maxp) - 10 log10(MSE)``, or ``-10 log10(MSE)`` when ``maxp`` is None.

    :param maxp: the largest possible value (255 for 8-bit images, 1 for images in [0, 1]).
    """
    def log10(t: Any) -> Any:
        with tf1.name_scope("log10"):
            return tf.math.log(t) / tf.math.log(tf.constant(10, dtype=t.dtype))

    mse = tf.reduce_mean(tf.square(prediction - ground_truth))
    if maxp is None:
        return tf.multiply(log10(mse), -10.0, name=name)
    peak = 20.0 * log10(tf.constant(float(maxp), dtype=mse.dtype))
    return tf.add(peak, tf.multiply(log10(mse), -10.0), name=name)
