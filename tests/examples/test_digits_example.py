"""The main job: the digits convnet trains to under 5% validation error and writes every artifact;
run again on the same directory, it resumes where it stopped."""

import json
import os
import sys

import tensorflow as tf
import zygote  # tests/_support

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "examples", "digits_convnet.py")


def run(logdir, max_epoch):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    # forked from the worker's zygote (tests/_support/zygote.py): a process of its own, TensorFlow imported
    out = zygote.run([sys.executable, SCRIPT, "--logdir", str(logdir), "--max-epoch", str(max_epoch)], timeout=300,
                     env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def test_digits_convnet_trains_writes_artifacts_and_resumes(tmp_path):
    logdir = tmp_path / "digits"
    stdout = run(logdir, 6)
    last = [line for line in stdout.splitlines() if line.startswith("validation error:")][-1]
    best = float(last.split("best ")[1].split()[0])
    assert best < 0.05, last
    assert "Epoch 6" in stdout and "val-error" in stdout  # progress and printed validation error
    names = os.listdir(logdir)
    assert "log.log" in names and "stats.json" in names and "checkpoint" in names
    assert any(n.startswith("events.out.tfevents") for n in names)
    assert "min-val-error.tfmodel.index" in names
    stats = json.loads((logdir / "stats.json").read_text())
    assert [r["epoch_num"] for r in stats if "val-error" in r] == [1, 2, 3, 4, 5, 6]
    ckpt = tf.train.latest_checkpoint(str(logdir))
    assert ckpt.endswith(f"model-{stats[-1]['global_step']}")
    assert "conv0/W" in dict(tf.train.list_variables(ckpt))

    stdout = run(logdir, 8)  # resume: epochs 7 and 8 only
    assert "Epoch 7" in stdout and "Start Epoch 1 " not in stdout
    stats = json.loads((logdir / "stats.json").read_text())
    assert [r["epoch_num"] for r in stats if "val-error" in r] == [1, 2, 3, 4, 5, 6, 7, 8]
