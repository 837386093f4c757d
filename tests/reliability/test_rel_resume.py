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

ARGS = ["--saver", "--monitors", "--stateful", "--resume", "--epochs", "6", "--spe", "8", "--step-sleep", "0.05",
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
    ref = script(*ARGS, name="reference")
    victims = []
    for custom in (False, True):
        extra = ["--ckpt-dir", str(tmp_path / "ckpts")] if custom else []
        v = script(*ARGS, *extra, name="victim")
        victims.append((v, extra, tmp_path / "ckpts" if custom else v.logdir))
    rng = random.Random(7)
    # watch both victims at once and kill each right after its epoch-2 checkpoint (global
    # step 16) appears, so a fast machine cannot let a victim finish while the other is killed
    pending = [(v, ckpt_dir, rng.uniform(0.0, 0.3)) for v, _, ckpt_dir in victims]
    deadline = time.monotonic() + 120
    while pending:
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for the epoch-2 checkpoints")
        for item in list(pending):
            v, ckpt_dir, delay = item
            if (ckpt_dir / "model-16.index").exists():
                time.sleep(delay)
                v.signal(signal.SIGKILL)
                v.finish()
                assert v.proc.returncode == -signal.SIGKILL, "the victim finished before it could be killed"
                pending.remove(item)
            elif v.proc.poll() is not None:
                out, err = v.proc.communicate()
                raise AssertionError(f"a victim ended (rc={v.proc.returncode}) before its epoch-2 checkpoint\n"
                                     f"--- stderr\n{err[-3000:]}\n--- stdout\n{out[-3000:]}")
        time.sleep(0.02)
    resumed = [(script(*ARGS, *extra, "--logdir", str(v.logdir), name="resumed"), v, ckpt_dir)
               for v, extra, ckpt_dir in victims]
    rc, out, err = ref.finish(timeout=150)
    assert rc == 0, err[-3000:]
    ref_path, ref_w, ref_states = _final(ref.logdir)
    assert ref_path.rsplit("/", 1)[1] == "model-48"
    # state keys are "<class>(<identifying arguments>)"
    keys = [k for k in ref_states if k.split("(")[0] in ("StatMonitorParamSetter", "MinSaver", "EarlyStopping")]
    assert len(keys) == 3, sorted(ref_states)
    for r, v, ckpt_dir in resumed:
        rc, out, err = r.finish(timeout=150)
        assert rc == 0, err[-3000:]
        assert "Setting starting_epoch to " in out and "Restoring checkpoint from" in out
        got_path, got_w, got_states = _final(ckpt_dir)
        assert got_path.rsplit("/", 1)[1] == "model-48"
        for name in ref_w:  # W, b, the scheduled learning rate, the monitored param, global_step
            np.testing.assert_array_equal(got_w[name], ref_w[name], err_msg=name)
        for key in keys:
            assert got_states[key] == ref_states[key], key
        # the resumed run's statistics hold every epoch once
        stats = json.loads((v.logdir / "stats.json").read_text())
        assert [r["epoch_num"] for r in stats if "wsum" in r] == [1, 2, 3, 4, 5, 6]
