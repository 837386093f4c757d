"""The MLP 784-256-256-10 the benchmarks train (softmax cross-entropy), built with plain
TensorFlow calls so that trainbus, tensorpack and a bare loop build the same graph."""

from __future__ import annotations

from typing import Any

#: (fan-in, fan-out) of each layer
LAYERS = ((784, 256), (256, 256), (256, 10))


def mlp_cost(tf: Any, x: Any, y: Any) -> Any:
    """The cost tensor ("cost") of the MLP on inputs ``x`` (batch x 784) and labels ``y``;
    variables ``W0..W2``, ``b0..b2``."""
    tf1 = tf.compat.v1
    h = x
    for i, (a, b) in enumerate(LAYERS):
        w = tf1.get_variable(f"W{i}", [a, b], initializer=tf1.glorot_uniform_initializer())
        bias = tf1.get_variable(f"b{i}", [b], initializer=tf1.zeros_initializer())
        h = tf.matmul(h, w) + bias
        if i < len(LAYERS) - 1:
            h = tf.nn.relu(h)
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=h), name="cost")
