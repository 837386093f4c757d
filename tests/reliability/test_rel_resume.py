"""Guarantee 3: a run killed with SIGKILL and resumed by AutoResumeTrainConfig ends with the
same weights and the same callback states as an uninterrupted run."""

from __future__ import annotations

import json
import random
import signal
import time

import numpy as np
import pytest

pytestmark = pytest.mark.timeout(200)

ARGS = ["--saver", "--monitors", "--stateful", "--resume", "--epochs", "6", "--spe", "8", "--step-sleep", "0.02",
        "--max-to-keep", "3"]


def _final(ckpt_dir):
    import tensorflow as tf

    latest = tf.train.latest_checkpoint(str(ckpt_dir))
    reader = tf.train.load_checkpoint(latest)
    weights = {n: reader.get_tensor(n) for n in ("W", "b", "learning_rate", "momentum_like", "global_step")}
    states = json.loads(open(latest + ".trainbus.json").read())
    return latest, weights, states


def test_killed_and_resumed_equals_uninterrupted(script, tmp_path):
    """Three runs at once: the reference, a victim checkpointing in its log dir, and a victim
    with ``checkpoint_dir=`` elsewhere (ModelSaver and AutoResumeTrainConfig). Each victim is
    SIGKILLed in epoch 3 or 4 and resumed; all end with the same weights and states."""
    from relutil import wait_for

    ref = script(*ARGS, name="reference")
    victims = []
    for custom in (False, True):
        extra = ["--ckpt-dir", str(tmp_path / "ckpts")] if custom else []
        v = script(*ARGS, *extra, name="victim")
        victims.append((v, extra, tmp_path / "ckpts" if custom else v.logdir))
    rng = random.Random(7)
    for v, extra, ckpt_dir in victims:
        # kill after the checkpoint of epoch 2 (global step 16) exists
        wait_for(lambda: (ckpt_dir / "model-16.index").exists(), 120, "the epoch-2 checkpoint", v.proc)
        time.sleep(rng.uniform(0.0, 0.3))
        v.signal(signal.SIGKILL)
        v.finish()
        assert v.proc.returncode == -signal.SIGKILL
    resumed = [(script(*ARGS, *extra, "--logdir", str(v.logdir), name="resumed"), v, ckpt_dir)
               for v, extra, ckpt_dir in victims]
    rc, out, err = ref.finish(timeout=150)
    assert rc == 0, err[-3000:]
    ref_path, ref_w, ref_states = _final(ref.logdir)
    assert ref_path.rsplit("/", 1)[1] == "model-48"
    assert {"StatMonitorParamSetter", "MinSaver", "EarlyStopping"} <= set(ref_states), sorted(ref_states)
    for r, v, ckpt_dir in resumed:
        rc, out, err = r.finish(timeout=150)
        assert rc == 0, err[-3000:]
        assert "Setting starting_epoch to " in out and "Restoring checkpoint from" in out
        got_path, got_w, got_states = _final(ckpt_dir)
        assert got_path.rsplit("/", 1)[1] == "model-48"
        for name in ref_w:  # W, b, the scheduled learning rate, the monitored param, global_step
            np.testing.assert_array_equal(got_w[name], ref_w[name], err_msg=name)
        for key in ("StatMonitorParamSetter", "MinSaver", "EarlyStopping"):
            assert got_states[key] == ref_states[key], key
        # the resumed run's statistics hold every epoch once
        stats = json.loads((v.logdir / "stats.json").read_text())
        assert [r["epoch_num"] for r in stats if "wsum" in r] == [1, 2, 3, 4, 5, 6]
