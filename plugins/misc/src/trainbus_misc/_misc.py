"""Utility callbacks: SendStat, InjectShell, EstimatedTimeLeft, StartProcOrThread, EarlyStopping."""

from __future__ import annotations

import importlib.util
import math
import multiprocessing.process
import os
import statistics
import string
import subprocess
import threading
import time
from collections import deque
from typing import Any, Sequence

from trainbus.plugin_api import StopTraining
from trainbus.callbacks.base import Callback
from trainbus.utils import logger
from trainbus.utils.timefmt import human_seconds

__all__ = ["SendStat", "InjectShell", "EstimatedTimeLeft", "StartProcOrThread", "EarlyStopping"]


class SendStat(Callback):
    """Run a shell command with the latest values of some statistics formatted in, every
    time it is triggered; e.g. to send the validation error to your phone. The equivalent
    of the ``SendMonitorData`` monitor, as a normal callback.

    A command that fails (non-zero exit status) or a statistic that does not exist yet is
    logged as an error; training goes on.

    :param command: a shell command; ``{name}`` fields are replaced by the statistics' values,
        e.g. ``'echo {validation_error} >> errors.txt'``.
    :param names: the statistic name(s) used in the command.
    """

    def __init__(self, command: str, names: str | Sequence[str]) -> None:
        if not isinstance(command, str) or not command.strip():
            raise TypeError(f"SendStat: command must be a non-empty shell command string, got {command!r}")
        if isinstance(names, str):
            names = [names]
        if not isinstance(names, (list, tuple)) or not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"SendStat: names must be a statistic name or a non-empty list of them, got {names!r}")
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(command) if f is not None}
        except ValueError as e:
            raise ValueError(f"SendStat: the command {command!r} is not a valid format string: {e}") from None
        unknown = sorted(f for f in fields if f not in names)
        if unknown:
            raise ValueError(f"SendStat: the command uses {', '.join('{' + f + '}' for f in unknown)} which "
                             f"{'is' if len(unknown) == 1 else 'are'} not in names={list(names)}; add them to names "
                             "or escape literal braces as {{ }}")
        self._command = command
        self._names = list(names)

    def _trigger(self) -> None:
        mon = self.trainer.monitors
        try:
            stats = {n: mon.get_latest(n) for n in self._names}
        except KeyError as e:
            logger.error(f"SendStat: not running the command: {e.args[0]}")
            return
        cmd = self._command.format(**stats)
        try:
            ret = subprocess.run(cmd, shell=True).returncode
        except OSError as e:
            logger.error(f"SendStat: could not run {cmd!r}: {e}")
            return
        if ret != 0:
            logger.error(f"SendStat: command {cmd!r} failed with exit status {ret}")

    def __str__(self) -> str:
        return f"SendStat({self._names})"


class InjectShell(Callback):
    """Open an interactive shell when triggered, if a file exists: create the file to pause
    training at the next trigger (by default, the end of the epoch) and inspect it. In the
    shell, ``self`` is this callback and ``self.trainer`` the trainer. The shell opens at
    every trigger while the file exists: delete it (also from the shell) to go on without it.

    Example::

        callbacks=[InjectShell('/path/to/pause-training.tmp'), ...]
        # then, in a terminal: touch /path/to/pause-training.tmp

    :param file: the file whose existence opens the shell.
    :param shell: ``'ipython'`` or ``'pdb'``. Without IPython installed, ``'ipython'`` falls
        back to pdb with a warning (``pip install ipython``, or the extra
        ``trainbus-misc[ipython]``: ``pip install --find-links dist 'trainbus-misc[ipython]'`` from
        a trainbus checkout after ``tools/build_wheels.sh``).
    """

    def __init__(self, file: str | os.PathLike = "INJECT_SHELL.tmp", shell: str = "ipython") -> None:
        if not isinstance(file, (str, os.PathLike)) or not os.fspath(file):
            raise TypeError(f"InjectShell: file must be a path, got {file!r}")
        if shell not in ("ipython", "pdb"):
            raise ValueError(f"InjectShell: shell must be 'ipython' or 'pdb', got {shell!r}")
        if shell == "ipython" and importlib.util.find_spec("IPython") is None:
            logger.warning("InjectShell: IPython is not installed, pdb will be used instead. For IPython: "
                           "pip install ipython, or the extra: pip install 'trainbus-misc[ipython]' (from a trainbus "
                           "checkout: tools/build_wheels.sh, then pip install --find-links dist "
                           "'trainbus-misc[ipython]').")
            shell = "pdb"
        self._file = os.fspath(file)
        self._shell = shell

    @property
    def shell(self) -> str:
        """The shell that will be opened: ``'ipython'`` or ``'pdb'``."""
        return self._shell

    def _before_train(self) -> None:
        logger.info(f"InjectShell: create the file '{os.path.abspath(self._file)}' to pause training "
                    f"and open a {self._shell} shell.")

    def _trigger(self) -> None:
        if os.path.isfile(self._file):
            logger.info(f"File {self._file} exists, entering a {self._shell} shell (delete the file to stop "
                        "opening it).")
            self._inject()

    def _inject(self) -> None:
        trainer = self.trainer  # noqa: F841 - available in the shell
        if self._shell == "ipython":
            import IPython

            IPython.embed()
        else:
            import pdb

            pdb.set_trace()
        logger.info("InjectShell: left the shell, training goes on.")


class EstimatedTimeLeft(Callback):
    """Estimate the time left until the end of training from the duration of the last
    epochs; logs it and puts it to the monitors as ``EstimatedTimeLeft`` (seconds).

    The durations of the last epochs are part of the resumable state.

    :param last_k_epochs: use the durations of the last k epochs.
    :param median: use the median of those durations (else the mean).
    """

    STAT_NAME = "EstimatedTimeLeft"

    def __init__(self, last_k_epochs: int = 5, median: bool = True) -> None:
        if isinstance(last_k_epochs, bool) or not isinstance(last_k_epochs, int) or last_k_epochs < 1:
            raise ValueError(f"EstimatedTimeLeft: last_k_epochs must be a positive int, got {last_k_epochs!r}")
        if not isinstance(median, bool):
            raise TypeError(f"EstimatedTimeLeft: median must be True or False, got {median!r}")
        self._k = last_k_epochs
        self._median = median
        self._times: deque[float] = deque(maxlen=last_k_epochs)
        self._last_time = 0.0

    def _before_train(self) -> None:
        self._last_time = time.time()

    def _trigger_epoch(self) -> None:
        now = time.time()
        self._times.append(now - self._last_time)
        self._last_time = now
        per_epoch = statistics.median(self._times) if self._median else statistics.fmean(self._times)
        left = max(0, self.trainer.max_epoch - self.epoch_num) * per_epoch
        self.trainer.monitors.put_scalar(self.STAT_NAME, float(left))
        if left > 0:
            logger.info(f"Estimated Time Left: {human_seconds(left)}")

    def estimate(self) -> float | None:
        """The current estimate in seconds (None before the first epoch ended)."""
        if not self._times:
            return None
        per_epoch = statistics.median(self._times) if self._median else statistics.fmean(self._times)
        return max(0, self.trainer.max_epoch - self.epoch_num) * per_epoch

    def _state_dict(self) -> dict:
        return {"epoch_durations": list(self._times)}

    def _load_state_dict(self, state: dict) -> None:
        self._times = deque((float(t) for t in state.get("epoch_durations", [])), maxlen=self._k)


class StartProcOrThread(Callback):
    """Start processes or threads before training, and stop them after it.

    :param startable: an object with ``start()`` (a ``multiprocessing.Process``, a
        ``threading.Thread``, ...) or a list of them.
    :param stop_at_last: after training (also after an error), terminate the processes and
        call ``stop()`` on stoppable threads (objects with a ``stop()`` method); plain
        threads and other objects are left alone.
    """

    def __init__(self, startable: Any, stop_at_last: bool = True) -> None:
        if not isinstance(startable, (list, tuple)):
            startable = [startable]
        if not startable:
            raise ValueError("StartProcOrThread: startable is empty; give a process/thread or a list of them")
        for k in startable:
            if not callable(getattr(k, "start", None)):
                raise TypeError(f"StartProcOrThread: {k!r} has no start() method; give processes or threads")
        if not isinstance(stop_at_last, bool):
            raise TypeError(f"StartProcOrThread: stop_at_last must be True or False, got {stop_at_last!r}")
        self._procs_threads = list(startable)
        self._stop_at_last = stop_at_last

    def _before_train(self) -> None:
        for k in self._procs_threads:
            logger.info(f"Starting {getattr(k, 'name', k)} ...")
            k.start()

    def _after_train(self) -> None:
        if not self._stop_at_last:
            return
        for k in self._procs_threads:
            if isinstance(k, multiprocessing.process.BaseProcess):
                if k.pid is None:  # never started
                    continue
                if k.is_alive():
                    logger.info(f"Terminating {k.name} ...")
                    k.terminate()
                k.join(timeout=5)
                if k.is_alive():
                    logger.warning(f"{k.name} did not exit after terminate(); killing it")
                    k.kill()
                    k.join(timeout=5)
            elif callable(getattr(k, "stop", None)):
                logger.info(f"Stopping {getattr(k, 'name', k)} ...")
                k.stop()
                if isinstance(k, threading.Thread) and k.is_alive() and k is not threading.current_thread():
                    k.join(timeout=5)
                    if k.is_alive():
                        logger.warning(f"{k.name} is still running 5 s after stop()")


class EarlyStopping(Callback):
    """Stop training when a statistic stops improving.

    At each trigger, the latest value of ``monitor_stat`` (put to the monitors by a callback
    earlier in the list, e.g. ``InferenceRunner``) is compared with the best so far; after
    ``patience`` new values in a row that do not improve on it by more than ``min_delta``,
    training stops through ``StopTraining``. A trigger where the statistic has no new value
    does not count.

    With ``restore_best``, the values of the trainable and model variables are copied (in
    memory) whenever the statistic improves, and assigned back after training, so the
    session ends (and any later ``after_train`` sees) the best weights.

    The best value and the patience counter are part of the resumable state (the in-memory
    copy of the weights is not: after resuming, only a new best is restored).

    :param monitor_stat: the name of the statistic.
    :param patience: how many non-improving values to tolerate.
    :param min_delta: the smallest change that counts as an improvement.
    :param mode: ``'min'`` (lower is better) or ``'max'``.
    :param restore_best: end training with the weights of the best trigger.
    """

    def __init__(self, monitor_stat: str, patience: int = 5, min_delta: float = 0.0, mode: str = "min",
                 restore_best: bool = False) -> None:
        if not isinstance(monitor_stat, str) or not monitor_stat:
            raise TypeError(f"EarlyStopping: monitor_stat must be the name of a statistic, got {monitor_stat!r}")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ValueError(f"EarlyStopping: patience must be an int >= 1 (triggers without improvement), "
                             f"got {patience!r}")
        if isinstance(min_delta, bool) or not isinstance(min_delta, (int, float)) or not math.isfinite(min_delta) \
                or min_delta < 0:
            raise ValueError(f"EarlyStopping: min_delta must be a finite number >= 0, got {min_delta!r}")
        if mode not in ("min", "max"):
            raise ValueError(f"EarlyStopping: mode must be 'min' or 'max', got {mode!r}")
        if not isinstance(restore_best, bool):
            raise TypeError(f"EarlyStopping: restore_best must be True or False, got {restore_best!r}")
        self.monitor_stat = monitor_stat
        self.patience = patience
        self.min_delta = float(min_delta)
        self.mode = mode
        self.restore_best = restore_best
        self.best: float | None = None
        self.best_step: int | None = None
        self.wait = 0
        self._last_seen_step: int | None = None
        self._warned_missing = False
        self._snapshot: list[Any] | None = None
        self.stopped_epoch: int | None = None

    def _setup_graph(self) -> None:
        if not self.restore_best:
            return
        import tensorflow as tf

        tf1 = tf.compat.v1
        seen = set()
        self._vars = []
        for v in tf1.trainable_variables() + tf1.get_collection(tf1.GraphKeys.MODEL_VARIABLES):
            if v.name not in seen:
                seen.add(v.name)
                self._vars.append(v)
        self._phs = [tf1.placeholder(v.dtype.base_dtype, shape=v.shape, name=f"best_{i}") for i, v in
                     enumerate(self._vars)]
        self._restore_op = tf.group(*[tf1.assign(v, p) for v, p in zip(self._vars, self._phs)], name="restore_best")

    def _improved(self, value: float) -> bool:
        if self.best is None:
            return True
        if self.mode == "min":
            return value < self.best - self.min_delta
        return value > self.best + self.min_delta

    def _trigger(self) -> None:
        try:
            step, value = self.trainer.monitors.get_history(self.monitor_stat)[-1]
        except (KeyError, IndexError):
            if not self._warned_missing:
                logger.warning(f"EarlyStopping: no statistic {self.monitor_stat!r} yet; put the callback that "
                               "produces it (e.g. InferenceRunner) before EarlyStopping in the callbacks.")
                self._warned_missing = True
            return
        if step == self._last_seen_step:
            return  # no new value since the last trigger
        self._last_seen_step = step
        value = float(value)
        if self._improved(value):
            self.best, self.best_step, self.wait = value, step, 0
            if self.restore_best:
                self._snapshot = self.trainer.sess.run(self._vars)
            return
        self.wait += 1
        logger.info(f"EarlyStopping: {self.monitor_stat}={value:.6g} did not improve on {self.best:.6g} "
                    f"(step {self.best_step}) for {self.wait}/{self.patience} trigger(s).")
        if self.wait >= self.patience:
            self.stopped_epoch = self.epoch_num
            raise StopTraining(f"EarlyStopping: {self.monitor_stat} has not improved for {self.patience} trigger(s); "
                               f"best {self.best:.6g} at step {self.best_step}")

    def _after_train(self) -> None:
        if not self.restore_best:
            return
        if self._snapshot is None:
            if self.best is not None:
                logger.warning("EarlyStopping: the best weights were seen before resuming and are not in memory; "
                               "the current weights are kept.")
            return
        self.trainer.sess.run(self._restore_op, feed_dict=dict(zip(self._phs, self._snapshot)))
        logger.info(f"EarlyStopping: restored the weights of the best {self.monitor_stat}={self.best:.6g} "
                    f"(step {self.best_step}).")

    def _state_key_args(self) -> tuple:
        return (self.monitor_stat,)

    def _state_dict(self) -> dict:
        return {"best": self.best, "best_step": self.best_step, "wait": self.wait,
                "last_seen_step": self._last_seen_step}

    def _load_state_dict(self, state: dict) -> None:
        self.best = state.get("best")
        self.best_step = state.get("best_step")
        self.wait = int(state.get("wait", 0))
        self._last_seen_step = state.get("last_seen_step")

    def __str__(self) -> str:
        return f"EarlyStopping({self.monitor_stat!r})"
