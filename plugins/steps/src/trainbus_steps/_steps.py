"""Callbacks that work along with every step: ProgressBar, TensorPrinter, SessionRunTimeout."""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Sequence, TextIO

from trainbus.callbacks.base import Callback
from trainbus.utils import logger

__all__ = ["ProgressBar", "TensorPrinter", "SessionRunTimeout"]

#: ``tty`` (live bar) or ``plain`` (periodic lines) forces the ProgressBar's mode.
ENV_MODE = "TRAINBUS_PROGRESS_BAR"
#: Seconds between two plain progress lines at most (default 60).
ENV_INTERVAL = "TRAINBUS_PROGRESS_INTERVAL"


def _names(names: Any, who: str, allow_empty: bool) -> list[str]:
    if isinstance(names, str):
        names = [names]
    if not isinstance(names, (list, tuple)):
        raise TypeError(f"{who}: names must be a list of tensor names, got {names!r}")
    if not names and not allow_empty:
        raise ValueError(f"{who}: names must name at least one tensor")
    for n in names:
        if not isinstance(n, str) or not n:
            raise TypeError(f"{who}: every name must be a non-empty string (a tensor name), got {n!r}")
    return list(names)


def _short(name: str) -> str:
    """Display name of a tensor: without ``:0`` and tower prefixes."""
    if name.endswith(":0"):
        name = name[:-2]
    return name


def _fmt(v: Any) -> str:
    try:
        import numpy as np

        arr = np.asarray(v)
        if arr.size == 1:
            return f"{float(arr.reshape(())):.4g}"
        return np.array2string(arr, precision=4, threshold=8)
    except (TypeError, ValueError):
        return str(v)


class ProgressBar(Callback):
    """A tqdm progress bar over each epoch's steps, showing the latest values of ``names``
    (fetched in the same ``Session.run`` as the step).

    On a terminal it is a live bar. When the output is not a terminal (a log file, a pipe, a
    CI console) it prints a plain line at every 10% of the epoch, and at least every
    ``interval_secs`` seconds, instead of a stream of carriage returns.

    One of ``DEFAULT_CALLBACKS()``.

    :param names: names of the tensors to show on the bar.
    :param interactive: keyword-only; True for the live bar, False for plain lines, None
        (default) to decide by ``stream.isatty()``; the environment variable
        ``TRAINBUS_PROGRESS_BAR=tty|plain`` decides when this is None.
    :param stream: keyword-only; where to write (default: ``sys.stdout`` when training starts).
    :param interval_secs: keyword-only; the longest time between two plain lines (default
        ``TRAINBUS_PROGRESS_INTERVAL`` or 60).
    """

    def __init__(self, names: Sequence[str] = (), *, interactive: bool | None = None, stream: TextIO | None = None,
                 interval_secs: float | None = None) -> None:
        self._names = _names(names, "ProgressBar", allow_empty=True)
        if interactive is not None and not isinstance(interactive, bool):
            raise TypeError(f"ProgressBar: interactive must be True, False or None, got {interactive!r}")
        if stream is not None and not hasattr(stream, "write"):
            raise TypeError(f"ProgressBar: stream must be a text stream with write(), got {stream!r}")
        if interval_secs is None:
            env = os.environ.get(ENV_INTERVAL, "")
            try:
                interval_secs = float(env) if env else 60.0
            except ValueError:
                raise ValueError(f"ProgressBar: {ENV_INTERVAL}={env!r} is not a number of seconds") from None
        if isinstance(interval_secs, bool) or not isinstance(interval_secs, (int, float)) or interval_secs <= 0:
            raise ValueError(f"ProgressBar: interval_secs must be a positive number of seconds, got {interval_secs!r}")
        self._interactive_arg = interactive
        self._stream_arg = stream
        self._interval = float(interval_secs)
        self._tags = [_short(n) for n in self._names]
        self._values: Any = None
        self._bar: Any = None
        self._plain_state: dict[str, Any] | None = None

    def hooks_used(self) -> frozenset[str]:
        used = super().hooks_used()
        if not self._names:  # nothing to fetch: stay off the per-step fetch path
            used = used - {"before_run", "after_run"}
        return used

    # ------------------------------------------------------------------ mode
    def _stream(self) -> TextIO:
        return self._stream_arg if self._stream_arg is not None else sys.stdout

    def _is_interactive(self) -> bool:
        if self._interactive_arg is not None:
            return self._interactive_arg
        env = os.environ.get(ENV_MODE, "").strip().lower()
        if env in ("tty", "1", "true", "yes"):
            return True
        if env in ("plain", "0", "false", "no"):
            return False
        if env:
            logger.warning(f"ProgressBar: ignoring {ENV_MODE}={env!r} (expected 'tty' or 'plain')")
        isatty = getattr(self._stream(), "isatty", None)
        try:
            return bool(isatty()) if isatty is not None else False
        except (ValueError, OSError):  # closed or detached stream
            return False

    # ------------------------------------------------------------------ hooks
    def _setup_graph(self) -> None:
        if self._names:
            self._fetches = self.get_tensors_maybe_in_tower(self._names)

    def _before_train(self) -> None:
        self._live = self._is_interactive()

    def _before_run(self, ctx: Any) -> Any:
        return self._fetches

    def _after_run(self, ctx: Any, run_values: Any) -> None:
        self._values = run_values.results

    def _postfix(self) -> dict[str, str]:
        if self._values is None:
            return {}
        return {t: _fmt(v) for t, v in zip(self._tags, self._values)}

    def _before_epoch(self) -> None:
        total = self.trainer.steps_per_epoch
        desc = f"Epoch {self.epoch_num}"
        if self._live:
            import tqdm

            self._bar = tqdm.tqdm(total=total, desc=desc, file=self._stream(), ascii=True, dynamic_ncols=True,
                                  leave=True, smoothing=0.5, mininterval=0.1)
        else:
            now = time.perf_counter()
            self._plain_state = {"total": total, "desc": desc, "start": now, "last": now, "next_tenth": 1,
                                 "printed": 0}

    def _trigger_step(self) -> None:
        if self._bar is not None:
            if self._values is not None:
                self._bar.set_postfix(self._postfix(), refresh=False)
            self._bar.update(1)
            return
        st = self._plain_state
        if st is None:
            return
        n = self.local_step + 1
        now = time.perf_counter()
        total = st["total"]
        if n * 10 >= st["next_tenth"] * total or now - st["last"] >= self._interval:
            self._print_line(n, now)
            st["next_tenth"] = n * 10 // total + 1

    def _print_line(self, n: int, now: float) -> None:
        import tqdm

        st = self._plain_state
        post = ", ".join(f"{k}={v}" for k, v in self._postfix().items())
        line = tqdm.tqdm.format_meter(n, st["total"], now - st["start"], prefix=st["desc"], ascii=True,
                                      postfix=post or None)
        stream = self._stream()
        stream.write(line + "\n")
        stream.flush()
        st["last"] = now
        st["printed"] = n

    def _after_epoch(self) -> None:
        self._close()

    def _after_train(self) -> None:
        self._close()

    def _close(self) -> None:
        if self._bar is not None:
            if self._values is not None:
                self._bar.set_postfix(self._postfix(), refresh=False)
            self._bar.close()
            self._bar = None
        st = self._plain_state
        if st is not None:
            done = self.local_step + 1
            if 0 < done != st["printed"]:
                self._print_line(done, time.perf_counter())
            self._plain_state = None

    def __str__(self) -> str:
        return "ProgressBar"


class TensorPrinter(Callback):
    """Log the values of some tensors at every step (fetched with the step).

    :param names: names of the tensors to print.
    """

    def __init__(self, names: Sequence[str]) -> None:
        self._names = _names(names, "TensorPrinter", allow_empty=False)

    def _setup_graph(self) -> None:
        self._fetches = self.get_tensors_maybe_in_tower(self._names)

    def _before_run(self, ctx: Any) -> Any:
        return self._fetches

    def _after_run(self, ctx: Any, run_values: Any) -> None:
        for name, v in zip(self._names, run_values.results):
            logger.info(f"{name}: {v}")


class SessionRunTimeout(Callback):
    """Give every training step (``hooked_sess.run``) a timeout: a slower step raises
    ``tf.errors.DeadlineExceededError``, which ends training with that error.

    :param timeout_in_ms: the timeout in milliseconds.
    """

    def __init__(self, timeout_in_ms: int) -> None:
        if isinstance(timeout_in_ms, bool) or not isinstance(timeout_in_ms, int) or timeout_in_ms <= 0:
            raise ValueError(f"SessionRunTimeout: timeout_in_ms must be a positive int of milliseconds, "
                             f"got {timeout_in_ms!r}")
        self._timeout = int(timeout_in_ms)

    def _setup_graph(self) -> None:
        import tensorflow as tf

        tf1 = tf.compat.v1
        self._args = tf1.train.SessionRunArgs(fetches=[], options=tf1.RunOptions(timeout_in_ms=self._timeout))

    def _before_run(self, ctx: Any) -> Any:
        return self._args

    def __str__(self) -> str:
        return f"SessionRunTimeout({self._timeout} ms)"
