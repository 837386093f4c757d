"""HorovodTrainer: real 2-rank runs under ``horovodrun --gloo``, plus in-process checks."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

# these tests start real processes on local ports (see the root conftest.py)
pytestmark = pytest.mark.cluster

HERE = Path(__file__).resolve().parent
WORKER = HERE / "hvd_worker.py"
HOROVODRUN = Path(sys.executable).with_name("horovodrun")
# the bound proves that nothing hangs (a rank waiting forever on a dead peer would hit it)
LIMIT = 90.0


def launch(out: Path, scenario: str):
    """Run the worker on 2 ranks; returns (returncode, output, seconds). Asserts that no
    process of the job is left afterwards.

    horovodrun and its ranks are children of the test zygote (tests/_support/zygote.py):
    horovodrun imports TensorFlow in a forked child to check how horovod was built, and each
    rank imports it again; forked from a process that already has it, the job starts in about
    a second instead of 15 s of CPU. horovodrun starts each rank through the zygote's
    launcher, which hands the rank's command, environment and pipes to the zygote."""
    import zygote  # tests/_support

    out.mkdir(parents=True, exist_ok=True)
    z = zygote.zygote()
    cmd = [sys.executable, str(HOROVODRUN), "--gloo", "-np", "2", "-H", "localhost:2", *z.launcher(), str(WORKER),
           str(out), scenario]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
    t0 = time.monotonic()
    with open(out / f"job-{scenario}.log", "wb") as log:
        proc = z.popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        proc.wait(timeout=LIMIT + 30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"horovodrun did not finish in time:\n{(out / f'job-{scenario}.log').read_text(errors='replace')[-4000:]}")
    output = (out / f"job-{scenario}.log").read_bytes()
    took = time.monotonic() - t0
    leftovers = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        try:
            if str(out) in " ".join(p.info["cmdline"] or []):
                leftovers.append(p)
        except psutil.Error:
            pass
    for p in leftovers:
        p.kill()
    assert not leftovers, f"processes left running after horovodrun exited: {[p.info for p in leftovers]}"
    return proc.returncode, output.decode(errors="replace"), took


def load(out: Path, name: str):
    with np.load(out / name) as f:
        return {k: f[k] for k in f.files}


@pytest.mark.slow
def test_two_ranks_start_from_rank0_and_stay_equal(tmp_path):
    out = tmp_path / "normal"
    rc, log, took = launch(out, "normal")
    assert rc == 0, log[-4000:]
    assert took < LIMIT
    s0, s1 = load(out, "start_rank0.npz"), load(out, "start_rank1.npz")
    e0, e1 = load(out, "end_rank0.npz"), load(out, "end_rank1.npz")
    # each rank drew its own random W; after the broadcast both hold rank 0's
    np.testing.assert_array_equal(s0["W"], s1["W"])
    # b was restored by session_init on rank 0 only, and reached rank 1 by the broadcast
    np.testing.assert_array_equal(s1["b"], np.full([3], 0.25, "float32"))
    # different data on each rank, all-reduced gradients: identical weights after training
    np.testing.assert_array_equal(e0["W"], e1["W"])
    np.testing.assert_array_equal(e0["b"], e1["b"])
    assert np.abs(e0["W"] - s0["W"]).max() > 1e-3
    # chief-only callbacks, logs and checkpoints: rank 0 only
    assert (out / "chief_rank0.txt").read_text() == "epoch 2\n"
    assert not (out / "chief_rank1.txt").exists()
    info0, info1 = (json.loads((out / f"info_rank{r}.json").read_text()) for r in (0, 1))
    assert (info0["is_chief"], info0["rank"], info0["size"]) == (True, 0, 2)
    assert (info1["is_chief"], info1["rank"], info1["size"]) == (False, 1, 2)
    assert (out / "log" / "log.log").exists()
    used = json.loads((out / "info_rank0.json").read_text()).get("optional", [])
    if "ModelSaver" in used:
        assert (out / "log" / "checkpoint").exists()
    if "JSONWriter" in used:
        stats = json.loads((out / "log" / "stats.json").read_text())
        assert [r["epoch_marker"] for r in stats] == [1.0, 2.0]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["log"]
    assert "[1]<stdout>:" in log and "This is not a chief worker, 'session_init' was ignored" in log


@pytest.mark.slow
def test_one_rank_raising_ends_every_rank(tmp_path):
    out = tmp_path / "fail"
    rc, log, took = launch(out, "fail")
    assert rc != 0
    assert "rank 1 fails on purpose" in log
    assert took < LIMIT
    # rank 0 was blocked in the all-reduce of the next step; Horovod's shutdown ended it
    assert "[0]<stdout>:" in log and "Horovod has been shut down" in log
    assert "Training has finished!" not in log


@pytest.mark.slow
def test_ranks_with_different_variables_fail_fast_naming_it(tmp_path):
    out = tmp_path / "mismatch"
    rc, log, took = launch(out, "mismatch")
    assert rc != 0
    assert took < LIMIT
    assert "VariableMismatchError" in log
    assert "variable 'extra_bias' ([3]|float32) exists on rank 1 but not on rank 0" in log
    assert not (out / "start_rank0.npz").exists()  # stopped before training


@pytest.mark.slow
def test_a_signal_to_one_rank_names_the_chiefs_final_checkpoint(tmp_path):
    """SIGTERM to rank 1 after step 3: every rank stops after the same step and prints one line;
    the chief's names the final checkpoint it wrote at that step (as a single-process run's
    does); rank 1, which runs no saver, does not claim that no checkpoint was written."""
    out = tmp_path / "signal"
    rc, log, took = launch(out, "signal1")
    assert rc != 0, log[-4000:]
    assert took < LIMIT
    info0 = json.loads((out / "info_rank0.json").read_text())
    assert "ModelSaver" in info0["optional"], "the trainbus-saver plugin is needed for this test"
    lines = {r: [ln.split(":trainbus: ", 1)[1] for ln in log.splitlines()
                 if ln.startswith(f"[{r}]<stderr>:trainbus: training interrupted")] for r in (0, 1)}
    assert len(lines[0]) == 1 and len(lines[1]) == 1, log[-4000:]
    line0, line1 = lines[0][0], lines[1][0]
    m = re.match(r"training interrupted by SIGTERM received by rank 1 at epoch (\d+), global step (\d+);", line0)
    assert m, line0
    epoch, step = int(m.group(1)), int(m.group(2))
    assert step >= 3
    ckpt = out / "log" / f"model-{step}"
    assert line0.endswith(f"; final checkpoint {ckpt}"), line0
    assert (out / "log" / f"model-{step}.index").is_file()
    assert f'model_checkpoint_path: "model-{step}"' in (out / "log" / "checkpoint").read_text()
    assert line1 == f"training interrupted by SIGTERM at epoch {epoch}, global step {step}", line1


# ---------------------------------------------------------------- in-process (size 1)


def test_describe_mismatch_names_each_difference():
    from trainbus_trainers_horovod.trainer import describe_mismatch

    r0 = ["W|[4, 3]|float32", "b|[3]|float32", "lr|[]|float32"]
    r1 = ["W|[4, 4]|float32", "b|[3]|float32", "extra|[2]|float32"]
    msg = describe_mismatch([r0, r0, r1])
    assert "rank 1" not in msg
    assert "variable 'lr' ([]|float32) exists on rank 0 but not on rank 2" in msg
    assert "variable 'extra' ([2]|float32) exists on rank 2 but not on rank 0" in msg
    assert "variable 'W' is [4, 3]|float32 on rank 0 but [4, 4]|float32 on rank 2" in msg


def test_bad_compression_is_rejected_at_construction():
    import trainbus.train

    with pytest.raises(TypeError, match="compression must be hvd.Compression.none or hvd.Compression.fp16"):
        trainbus.train.HorovodTrainer(compression="fp16")


def test_single_rank_matches_simple_trainer(logdir):
    import horovod.tensorflow as hvd

    import trainbus.train
    from trainbus.callbacks import Callback
    from trainbus.testing import train_tiny

    class Grab(Callback):
        _chief_only = False

        def _setup_graph(self):
            import tensorflow as tf

            self.w = [v for v in tf.compat.v1.global_variables() if v.op.name == "W"][0].read_value()

        def _after_train(self):
            self.value = self.trainer.sess.run(self.w)

    ref = Grab()
    train_tiny([ref], max_epoch=1, steps_per_epoch=3)
    g = Grab()
    tr = train_tiny([g], max_epoch=1, steps_per_epoch=3,
                    trainer=trainbus.train.HorovodTrainer(compression=hvd.Compression.fp16))
    assert tr.is_chief and tr.rank == 0 and tr.size == 1
    np.testing.assert_allclose(g.value, ref.value, rtol=1e-6)
