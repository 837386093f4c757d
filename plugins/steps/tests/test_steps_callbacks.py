"""ProgressBar, TensorPrinter and SessionRunTimeout in real training runs."""

from __future__ import annotations

import io
import os
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest
import tensorflow as tf
import zygote  # tests/_support

import trainbus
from trainbus.testing import train_tiny

cbs = trainbus.callbacks


def test_progress_bar_live_on_terminal_shows_tensor_values(logdir):
    out = io.StringIO()
    pb = cbs.ProgressBar(["cost"], interactive=True, stream=out)
    assert {"before_run", "after_run", "trigger_step"} <= pb.hooks_used()
    train_tiny(callbacks=[pb], max_epoch=2)
    text = out.getvalue()
    assert text.count("\r") >= 2  # a live bar redraws in place
    assert "Epoch 1" in text and "Epoch 2" in text
    assert "8/8" in text
    assert "cost=" in text


def test_progress_bar_plain_lines_when_not_a_terminal(logdir):
    out = io.StringIO()
    assert not out.isatty()
    pb = cbs.ProgressBar(["cost"], stream=out)  # auto: a StringIO is not a terminal
    train_tiny(callbacks=[pb], max_epoch=2, steps_per_epoch=20)
    text = out.getvalue()
    assert "\r" not in text
    lines = [ln for ln in text.splitlines() if ln]
    ep1 = [ln for ln in lines if ln.startswith("Epoch 1")]
    ep2 = [ln for ln in lines if ln.startswith("Epoch 2")]
    assert len(ep1) == len(ep2) == 10  # one line per 10% of the epoch
    assert "20/20" in ep1[-1] and "2/20" in ep1[0]
    assert all("cost=" in ln for ln in lines)


def test_progress_bar_plain_interval_and_env_forcing(logdir, monkeypatch):
    monkeypatch.setenv("TRAINBUS_PROGRESS_BAR", "tty")
    out = io.StringIO()
    train_tiny(callbacks=[cbs.ProgressBar(stream=out)], max_epoch=1)
    assert "\r" in out.getvalue()  # forced live although not a terminal

    monkeypatch.setenv("TRAINBUS_PROGRESS_BAR", "plain")

    class Slow(cbs.Callback):
        def _trigger_step(self):
            time.sleep(0.03)

    out = io.StringIO()
    # 100 steps of >= 30 ms; a line at least every 0.1 s besides the 10% marks
    train_tiny(callbacks=[Slow(), cbs.ProgressBar(stream=out, interval_secs=0.1)], max_epoch=1, steps_per_epoch=100)
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    assert len(lines) > 15
    assert "100/100" in lines[-1]


def test_progress_bar_without_names_is_not_on_the_fetch_path():
    pb = cbs.ProgressBar()
    used = pb.hooks_used()
    assert "before_run" not in used and "after_run" not in used
    assert {"before_epoch", "trigger_step", "after_epoch"} <= used
    with pytest.raises(TypeError, match="non-empty string"):
        cbs.ProgressBar([3])
    with pytest.raises(ValueError, match="interval_secs"):
        cbs.ProgressBar(interval_secs=0)


SCRIPT = textwrap.dedent("""
    import os, sys
    import trainbus
    from trainbus.testing import train_tiny
    train_tiny(callbacks=[trainbus.callbacks.ProgressBar(["cost"])], max_epoch=2, steps_per_epoch=100)
    print("=====FORCED=====")
    sys.stdout.flush()
    os.environ["TRAINBUS_PROGRESS_BAR"] = "tty"
    train_tiny(callbacks=[trainbus.callbacks.ProgressBar(["cost"])], max_epoch=1, steps_per_epoch=100)
    print("DONE")
""")


def test_progress_bar_subprocess_stdout_pipe(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env.pop("TRAINBUS_PROGRESS_BAR", None)
    # forked from the worker's zygote (tests/_support/zygote.py); stdout read as bytes, so that the
    # live bar's "\r" is not turned into a newline
    p = zygote.zygote().popen([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env)
    p.stdout = p.stdout.detach()
    stdout, stderr = p.communicate(timeout=120)
    out = stdout.decode()
    assert p.returncode == 0, stderr[-2000:]
    assert "DONE" in out
    auto, forced = out.split("=====FORCED=====")
    # stdout is a pipe: plain lines, no carriage-return storm
    assert auto.count("\r") == 0
    bar_lines = [ln for ln in auto.splitlines() if ln.startswith("Epoch ") and "/100" in ln]
    assert 18 <= len(bar_lines) <= 24  # ~10 per epoch
    assert any("100/100" in ln and "cost=" in ln for ln in bar_lines)
    # forced live bar through the environment
    assert forced.count("\r") >= 2


def test_progress_bar_in_default_callbacks():
    from trainbus.train import DEFAULT_CALLBACKS

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        defaults = DEFAULT_CALLBACKS()
    names = [type(c).__name__ for c in defaults]
    assert names.count("ProgressBar") == 1
    slot = {"MovingAverageSummary": 10, "ProgressBar": 20, "MergeAllSummaries": 30, "RunUpdateOps": 40}
    present = [slot[n] for n in names if n in slot]
    assert present == sorted(present)
    from trainbus_steps import ProgressBar

    assert isinstance(defaults[names.index("ProgressBar")], ProgressBar)


def test_tensor_printer_logs_every_step(logdir, tb_log):
    train_tiny(callbacks=[cbs.TensorPrinter(["cost", "accuracy"])], max_epoch=2)
    cost_lines = [r.getMessage() for r in tb_log if r.getMessage().startswith("cost: ")]
    acc_lines = [r.getMessage() for r in tb_log if r.getMessage().startswith("accuracy: ")]
    assert len(cost_lines) == len(acc_lines) == 16
    first = float(cost_lines[0].split(": ")[1])
    assert first == pytest.approx(np.log(3), rel=1e-5)  # zero weights: uniform softmax over 3 classes
    with pytest.raises(ValueError, match="at least one"):
        cbs.TensorPrinter([])


def _slow_model(sleep_s):
    TinyModel = trainbus.testing.TinyModel

    class SlowModel(TinyModel):
        def build_graph(self, x, y):
            cost = super().build_graph(x, y)

            def nap():
                time.sleep(sleep_s)
                return np.float32(0.0)

            return tf.add(cost, tf.numpy_function(nap, [], tf.float32), name="slow_cost")

    return SlowModel()


def test_session_run_timeout_raises_deadline_exceeded(logdir):
    t0 = time.perf_counter()
    with pytest.raises(tf.errors.DeadlineExceededError):
        train_tiny(callbacks=[cbs.SessionRunTimeout(100)], model=_slow_model(0.6), max_epoch=1)
    assert time.perf_counter() - t0 < 30


def test_session_run_timeout_lets_fast_steps_pass(logdir):
    tr = train_tiny(callbacks=[cbs.SessionRunTimeout(5000)], model=_slow_model(0.001), max_epoch=1)
    assert tr.global_step == 8
    with pytest.raises(ValueError, match="positive int"):
        cbs.SessionRunTimeout(0)
    with pytest.raises(ValueError, match="positive int"):
        cbs.SessionRunTimeout(1.5)
