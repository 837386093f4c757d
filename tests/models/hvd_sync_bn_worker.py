"""One Horovod rank of the SyncBN test: normalizes its half of a fixed batch with
BatchNorm(sync_statistics='horovod') and writes the output and moving mean to OUT/rank<r>.npz."""

from __future__ import annotations

import sys

import horovod.tensorflow as hvd
import numpy as np
import tensorflow as tf

from trainbus.models import BatchNorm
from trainbus.tfutils import TowerContext

tf1 = tf.compat.v1
tf1.disable_eager_execution()


def main(out_dir: str) -> None:
    hvd.init()
    batch = (np.random.RandomState(0).randn(8, 2, 2, 3) * 2 + 1).astype("float32")
    half = batch[hvd.rank() * 4:(hvd.rank() + 1) * 4]
    with tf.Graph().as_default():
        with TowerContext("", is_training=True):
            y = BatchNorm("bn", tf.constant(half), sync_statistics="horovod", momentum=0.5)
        assert tf1.get_collection(tf1.GraphKeys.UPDATE_OPS) == []
        mean_var = [v for v in tf1.global_variables() if v.op.name == "bn/mean/EMA"][0]
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            out = sess.run(y)
            moving_mean = sess.run(mean_var)
    np.savez(f"{out_dir}/rank{hvd.rank()}.npz", out=out, moving_mean=moving_mean, size=hvd.size())


if __name__ == "__main__":
    main(sys.argv[1])
