"""Seeds: ``TrainConfig(seed=N)`` (and ``[train] seed = N``) make two trainings with
single-process input bitwise identical on CPU (the weights of the final checkpoint and every
value of ``stats.json``), while another seed gives other weights. Each training runs in its
own process, as two runs of a user's script do."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import zygote  # tests/_support

HERE = pathlib.Path(__file__).resolve().parent / "runfiles"

pytestmark = pytest.mark.timeout(400)

SCRIPT = r'''
import sys
import numpy as np
import tensorflow as tf
from trainbus import TrainConfig, launch_train_with_config
from trainbus.callbacks import ModelSaver, JSONWriter
from trainbus.dataflow import BatchData, DataFromList
from trainbus.input_source import FeedInput
from trainbus.models import FullyConnected
from trainbus.tfutils.summary import add_moving_summary
from trainbus.train import ModelDesc, SimpleTrainer
from trainbus.utils import logger

tf1 = tf.compat.v1
logdir, seed = sys.argv[1], int(sys.argv[2])


class Net(ModelDesc):
    def inputs(self):
        return [tf.TensorSpec([None, 3], tf.float32, "x"), tf.TensorSpec([None], tf.float32, "y")]

    def build_graph(self, x, y):
        h = FullyConnected("hidden", x, 8, activation=tf.nn.tanh)   # random (variance-scaling) init
        h = tf1.nn.dropout(h, rate=0.2)                              # a random op every step
        pred = tf.squeeze(FullyConnected("out", h, 1), 1)
        cost = tf.reduce_mean(tf.square(pred - y), name="cost")
        add_moving_summary(cost)
        return cost

    def optimizer(self):
        return tf1.train.AdamOptimizer(0.01)


points = [[np.float32([i / 10, (i % 7) / 7, (i % 3) / 3]), np.float32(i % 5)] for i in range(48)]
df = BatchData(DataFromList(points, shuffle=True), 8)   # shuffled by the DataFlow RNG
logger.set_logger_dir(logdir, action="k")
config = TrainConfig(model=Net(), data=FeedInput(df), callbacks=[ModelSaver()], monitors=[JSONWriter()],
                     steps_per_epoch=6, max_epoch=3, seed=seed)
launch_train_with_config(config, SimpleTrainer())
'''


def _train(tmp: pathlib.Path, name: str, seed: int, fresh: bool = False) -> pathlib.Path:
    """One training in a process of its own: a new interpreter when ``fresh``, else forked from the
    worker's zygote (tests/_support/zygote.py; its children share the zygote's str hash seed)."""
    logdir = tmp / name
    script = tmp / "seeded.py"
    script.write_text(SCRIPT)
    cmd = [sys.executable, str(script), str(logdir), str(seed)]
    if fresh:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    else:
        r = zygote.run(cmd, timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"Seeded Python, NumPy, the DataFlow RNGs and TensorFlow's graph with {seed}" in r.stdout
    return logdir


def _weights(logdir: pathlib.Path) -> dict[str, np.ndarray]:
    import tensorflow as tf

    reader = tf.train.load_checkpoint(str(logdir / "model-18"))
    return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map() if k.startswith(("hidden", "out"))}


def _scalars(logdir: pathlib.Path) -> list[dict]:
    return json.loads((logdir / "stats.json").read_text())


def test_same_seed_same_weights_and_stats_other_seed_differs(tmp_path):
    a = _train(tmp_path, "a", 7, fresh=True)  # another hash seed than b's: nothing may depend on it
    b = _train(tmp_path, "b", 7)
    c = _train(tmp_path, "c", 8)
    wa, wb, wc = _weights(a), _weights(b), _weights(c)
    assert sorted(wa) == sorted(wb) and len(wa) == 4 + 8  # kernels, biases and their Adam slots
    for k in wa:
        assert wa[k].tobytes() == wb[k].tobytes(), k  # bit for bit
    assert any(wa[k].tobytes() != wc[k].tobytes() for k in wa)
    sa, sb = _scalars(a), _scalars(b)
    assert len(sa) >= 3 and sa == sb  # every epoch, step and value the same
    assert sa != _scalars(c)


def test_seed_is_checked(tmp_path):
    from trainbus import TrainConfig

    for bad in (-1, 2 ** 31, 1.5, True, "7"):
        with pytest.raises(ValueError, match=r"TrainConfig: seed must be an integer from 0 to 2\*\*31 - 1"):
            TrainConfig(seed=bad)
    # in a run file: one line with the file's line, before anything starts
    run = tmp_path / "run.toml"
    run.write_text('[model]\nclass = "tinyrun:LinearNet"\n\n[data]\nfunction = "tinyrun:make_data"\n\n'
                   '[train]\nmax_epoch = 1\nseed = "x"\n')
    env = dict(os.environ, PYTHONPATH=str(HERE))
    r = zygote.run([sys.executable, "-m", "trainbus", "train", str(run), "--dry-run"], env=env, timeout=300)
    assert r.returncode == 2
    assert f"{run}:9: train.seed: seed must be an integer from 0 to 2**31 - 1, got 'x'" in r.stderr
