"""SendStat, InjectShell, EstimatedTimeLeft, StartProcOrThread and EarlyStopping in real runs."""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import textwrap
import threading
import time

import numpy as np
import psutil
import pytest
import zygote  # tests/_support

import trainbus
from trainbus.callbacks import Callback, CallbackFactory
from trainbus.testing import RecordingMonitor, train_tiny

cbs = trainbus.callbacks


def put_sequence(name, values):
    """A callback that puts values[epoch_num - 1] as the scalar ``name`` at each trigger."""
    return CallbackFactory(trigger=lambda cb: cb.trainer.monitors.put_scalar(name, values[cb.epoch_num - 1]))


# ---------------------------------------------------------------------------------- SendStat
def test_send_stat_runs_command_with_stats(logdir, tmp_path, tb_log):
    out = tmp_path / "sent.txt"
    send = cbs.SendStat(f"echo {{val-error}} {{acc}} >> {out}", ["val-error", "acc"])
    failing = cbs.SendStat("exit 3 # {acc}", "acc")
    missing = cbs.SendStat("echo {nosuch}", "nosuch")
    tr = train_tiny(callbacks=[put_sequence("val-error", [0.5, 0.25, 0.125]), put_sequence("acc", [1, 2, 3]),
                               send, failing, missing], max_epoch=3)
    assert tr.epoch_num == 3 and tr.global_step == 24  # failures did not stop training
    assert out.read_text().split("\n") == ["0.5 1", "0.25 2", "0.125 3", ""]
    errors = [r.getMessage() for r in tb_log if r.levelno == logging.ERROR]
    assert sum("exit status 3" in e for e in errors) == 3
    assert sum("nosuch" in e for e in errors) == 3


def test_send_stat_validates_at_construction():
    with pytest.raises(ValueError, match=r"\{other\}.*not in names"):
        cbs.SendStat("echo {val} {other}", ["val"])
    with pytest.raises(ValueError, match="names"):
        cbs.SendStat("echo hi", [])
    with pytest.raises(TypeError, match="command"):
        cbs.SendStat(None, "a")
    cbs.SendStat("echo {{literal}} {a}", "a")


# ---------------------------------------------------------------------------------- InjectShell
SHELL_SCRIPT = textwrap.dedent("""
    import sys
    import trainbus
    from trainbus.testing import train_tiny
    tr = train_tiny(callbacks=[trainbus.callbacks.InjectShell(sys.argv[1], shell="pdb")], max_epoch=3)
    print("FINISHED AT", tr.global_step)
""")


def test_inject_shell_pdb_driven_through_stdin(tmp_path):
    flag = tmp_path / "pause.tmp"
    flag.write_text("")
    commands = "\n".join([
        "p ('GS', self.trainer.global_step, type(self).__name__)",
        "p ('EPOCH', trainer.epoch_num)",
        "c",
        f"import os; os.remove({str(flag)!r})",   # delete the file from the shell
        "p ('GS', self.trainer.global_step, type(self).__name__)",
        "c",
    ]) + "\n"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    # forked from the worker's zygote (tests/_support/zygote.py): pdb reads the commands from its stdin
    p = zygote.run([sys.executable, "-c", SHELL_SCRIPT, str(flag)], input=commands, env=env, cwd=tmp_path, timeout=120)
    out = p.stdout
    assert p.returncode == 0, p.stderr[-2000:] + out[-2000:]
    assert "('GS', 8, 'InjectShell')" in out     # after epoch 1
    assert "('EPOCH', 1)" in out
    assert "('GS', 16, 'InjectShell')" in out    # after epoch 2, the file still existed
    assert "('GS', 24" not in out                # deleted: no shell after epoch 3
    assert "FINISHED AT 24" in out
    assert out.count("(Pdb)") >= 5


def test_inject_shell_arguments(logdir, tmp_path):
    with pytest.raises(ValueError, match="'ipython' or 'pdb'"):
        cbs.InjectShell(shell="bash")
    sh = cbs.InjectShell(tmp_path / "absent.tmp", shell="pdb")
    assert sh.shell == "pdb"
    tr = train_tiny(callbacks=[sh], max_epoch=1)  # no file: no shell, training runs through
    assert tr.global_step == 8
    import importlib.util

    default = cbs.InjectShell()
    assert default.shell == ("ipython" if importlib.util.find_spec("IPython") else "pdb")


# ---------------------------------------------------------------------------------- EstimatedTimeLeft
class SleepPerStep(Callback):
    def __init__(self, secs):
        self.secs = secs

    def _trigger_step(self):
        time.sleep(self.secs)


def test_estimated_time_left_values_and_state(logdir, tb_log):
    mon = RecordingMonitor()
    etl = cbs.EstimatedTimeLeft(last_k_epochs=2)
    tr = train_tiny(callbacks=[SleepPerStep(0.02), etl], monitors=[mon], max_epoch=4)
    est = [v for n, v, _ in mon.scalars if n == "EstimatedTimeLeft"]
    assert len(est) == 4
    durations = tr.callback_states()["EstimatedTimeLeft"]["epoch_durations"]
    assert len(durations) == 2 and all(0.16 <= d < 5 for d in durations)  # 8 steps x 20 ms at least
    # epochs left x typical epoch duration (each epoch >= 8 x 20 ms)
    assert 3 * 0.16 <= est[0] < 15 and 2 * 0.16 <= est[1] < 10 and 0.16 <= est[2] < 5
    assert est[2] == pytest.approx(est[1] / 2, rel=0.6)
    assert est[-1] == 0.0
    logged = [r.getMessage() for r in tb_log if r.getMessage().startswith("Estimated Time Left")]
    assert len(logged) == 3
    fresh = cbs.EstimatedTimeLeft(last_k_epochs=2, median=False)
    fresh._load_state_dict({"epoch_durations": [1.0, 2.0, 6.0]})
    assert fresh._state_dict() == {"epoch_durations": [2.0, 6.0]}
    with pytest.raises(ValueError, match="last_k_epochs"):
        cbs.EstimatedTimeLeft(0)


# ---------------------------------------------------------------------------------- StartProcOrThread
class StoppableThread(threading.Thread):
    def __init__(self):
        super().__init__(name="stoppable-worker", daemon=True)
        self._evt = threading.Event()

    def run(self):
        while not self._evt.wait(0.01):
            pass

    def stop(self):
        self._evt.set()


def _children():
    return {c.pid for c in psutil.Process().children(recursive=True) if c.is_running()
            and c.status() != psutil.STATUS_ZOMBIE}


def _start_objects():
    th = StoppableThread()
    proc = multiprocessing.get_context("spawn").Process(target=time.sleep, args=(600,), name="sleeper", daemon=True)
    plain_evt = threading.Event()
    plain = threading.Thread(target=plain_evt.wait, name="plain-thread", daemon=True)
    return th, proc, plain, plain_evt


@pytest.mark.parametrize("fail", [False, True])
def test_start_proc_or_thread_lifecycle(logdir, fail):
    th, proc, plain, plain_evt = _start_objects()
    seen = {}

    def check_started(cb):
        seen["thread"] = th.is_alive()
        seen["proc"] = proc.is_alive()
        seen["plain"] = plain.is_alive()

    def boom(cb):
        if fail:
            raise RuntimeError("boom in trigger")

    callbacks = [cbs.StartProcOrThread([th, proc, plain]), CallbackFactory(before_train=check_started, trigger=boom)]
    if fail:
        with pytest.raises(RuntimeError, match="boom"):
            train_tiny(callbacks=callbacks, max_epoch=2)
    else:
        train_tiny(callbacks=callbacks, max_epoch=2)
    assert seen == {"thread": True, "proc": True, "plain": True}
    assert not th.is_alive() and th not in threading.enumerate()
    assert not proc.is_alive() and proc.exitcode is not None and proc.exitcode < 0  # terminated
    assert proc.pid not in _children()
    assert plain.is_alive()  # a plain thread is left alone, as documented
    plain_evt.set()
    plain.join(5)


def test_start_proc_or_thread_no_stop_and_validation(logdir):
    th = StoppableThread()
    train_tiny(callbacks=[cbs.StartProcOrThread(th, stop_at_last=False)], max_epoch=1)
    assert th.is_alive()
    th.stop()
    th.join(5)
    with pytest.raises(TypeError, match="start"):
        cbs.StartProcOrThread([object()])
    with pytest.raises(ValueError, match="empty"):
        cbs.StartProcOrThread([])


# ---------------------------------------------------------------------------------- EarlyStopping
def test_early_stopping_stops_after_patience(logdir):
    es = cbs.EarlyStopping("val_loss", patience=2)
    tr = train_tiny(callbacks=[put_sequence("val_loss", [5, 4, 4.5, 4.2, 1, 1, 1, 1, 1, 1]), es], max_epoch=10)
    assert tr.epoch_num == 4 and tr.global_step == 32
    assert es.best == 4 and es.best_step == 16 and es.wait == 2 and es.stopped_epoch == 4


def test_early_stopping_mode_max_and_min_delta(logdir):
    es = cbs.EarlyStopping("acc", patience=2, mode="max", min_delta=0.05)
    tr = train_tiny(callbacks=[put_sequence("acc", [0.5, 0.6, 0.63, 0.64, 0.9, 0.9]), es], max_epoch=6)
    # 0.63 and 0.64 do not beat 0.6 by more than 0.05
    assert tr.epoch_num == 4 and es.best == 0.6


def test_early_stopping_ignores_triggers_without_new_value(logdir, tb_log):
    es = cbs.EarlyStopping("rare", patience=1)
    put_every_other = CallbackFactory(trigger=lambda cb: cb.epoch_num % 2 == 1 and cb.trainer.monitors.put_scalar(
        "rare", float(cb.epoch_num)))
    tr = train_tiny(callbacks=[put_every_other, es], max_epoch=6)
    # values 1 (epoch 1), 3 (epoch 3): stop at epoch 3; epoch 2 had no new value and did not count
    assert tr.epoch_num == 3
    missing = cbs.EarlyStopping("never_put", patience=1)
    tr = train_tiny(callbacks=[missing], max_epoch=3)
    assert tr.epoch_num == 3 and tr.global_step == 24
    assert sum("no statistic 'never_put'" in r.getMessage() for r in tb_log) == 1


def test_early_stopping_restore_best_weights_in_after_train(logdir):
    weights = {}

    def record(cb):
        variables = {v.op.name: v for v in cb.graph.get_collection("variables")}
        weights[cb.epoch_num] = cb.trainer.sess.run(variables["W"])

    def after(cb):
        variables = {v.op.name: v for v in cb.graph.get_collection("variables")}
        weights["after_train"] = cb.trainer.sess.run(variables["W"])  # the session is still usable

    es = cbs.EarlyStopping("val", patience=2, restore_best=True)
    tr = train_tiny(callbacks=[put_sequence("val", [3.0, 1.0, 2.0, 2.0, 0.0]), CallbackFactory(trigger=record), es,
                               CallbackFactory(after_train=after)], max_epoch=5)
    assert tr.epoch_num == 4
    assert not np.allclose(weights[2], weights[4])
    np.testing.assert_array_equal(weights["after_train"], weights[2])


def test_early_stopping_state_is_resumable(logdir):
    es = cbs.EarlyStopping("val", patience=3)
    tr = train_tiny(callbacks=[put_sequence("val", [2.0, 1.0, 1.5]), es], max_epoch=3)
    state = tr.callback_states()["EarlyStopping(val)"]
    assert state["best"] == 1.0 and state["wait"] == 1 and state["best_step"] == 16
    resumed = cbs.EarlyStopping("val", patience=3)
    resumed._load_state_dict(state)
    assert (resumed.best, resumed.wait, resumed.best_step) == (1.0, 1, 16)
    # one more non-improving value after resume was enough to reach patience 3 (1 + 2)
    tr2 = train_tiny(callbacks=[put_sequence("val", [1.2, 1.1, 0.1, 0.1]), resumed], max_epoch=4)
    assert tr2.epoch_num == 2 and resumed.wait == 3


def test_early_stopping_validates_arguments():
    with pytest.raises(ValueError, match="patience"):
        cbs.EarlyStopping("v", patience=0)
    with pytest.raises(ValueError, match="min_delta"):
        cbs.EarlyStopping("v", min_delta=-1)
    with pytest.raises(ValueError, match="mode"):
        cbs.EarlyStopping("v", mode="lower")
    with pytest.raises(TypeError, match="monitor_stat"):
        cbs.EarlyStopping("")
    with pytest.raises(TypeError, match="restore_best"):
        cbs.EarlyStopping("v", restore_best="yes")
