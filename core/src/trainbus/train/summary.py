"""The end-of-run summary of ``launch_train_with_config`` (and so of ``trainbus train``): wall
time, epochs and steps done, why the run stopped, each scalar's last and best value (in the
direction a ``MinSaver``/``MaxSaver``/``EarlyStopping`` of the run says, else both) with the
epoch and step of the best, the checkpoints kept and the log directory.

It reads what the run already holds (the monitors' scalar history, the callbacks' options,
the files of the checkpoint directory); it runs once, after training, never per step.
"""

from __future__ import annotations

import math
import os
import time
from typing import Any, Iterable

__all__ = ["RunSummary", "directions_of", "finished_message"]


def directions_of(callbacks: Iterable[Any]) -> dict[str, str]:
    """``{scalar: "min"|"max"}`` from the callbacks that say which way a scalar is better:
    those with a ``monitor_stat`` and ``reverse`` (``MinSaver``/``MaxSaver``) or ``mode``
    (``EarlyStopping``: "min"/"max")."""
    out: dict[str, str] = {}
    for cb in callbacks:
        x: Any = cb
        for _ in range(16):  # the callback and those it wraps (PeriodicTrigger: .cb)
            stat = getattr(x, "monitor_stat", None)
            if isinstance(stat, str):
                mode = getattr(x, "mode", None)
                if mode in ("min", "max"):
                    out.setdefault(stat, mode)
                elif isinstance(getattr(x, "reverse", None), bool):
                    out.setdefault(stat, "max" if x.reverse else "min")
            inner = getattr(x, "cb", None)
            if inner is None or inner is x:
                break
            x = inner
    return out


def finished_message(logdir: str | None, last_epoch: int, max_epoch: int, how: str) -> str:
    """The line for a run that already reached its ``max_epoch``; ``how`` says how to train more."""
    where = f"the run in {logdir}" if logdir else "the run"
    return (f"{where} already finished: it trained up to epoch {last_epoch} and max_epoch is {max_epoch}; nothing to "
            f"do. To train more epochs: {how}")


class RunSummary:
    """Collects what the summary needs while a run is launched; :meth:`text` after training."""

    def __init__(self, config: Any, trainer: Any) -> None:
        self.config = config
        self.trainer = trainer
        self.start = time.perf_counter()
        self.first_epoch = int(getattr(config, "starting_epoch", 1) or 1)
        self.stopped_because: str | None = None
        self._listen()

    def _listen(self) -> None:
        """Note the trainer's line saying why the loop ended early (a callback's StopTraining,
        the input running out); called once per log line, never per step."""
        import logging

        def note(record: logging.LogRecord) -> bool:
            msg = record.getMessage() if record.levelno == logging.INFO else ""
            if msg.startswith("Training was stopped by "):
                self.stopped_because = msg[len("Training was stopped by "):].rstrip(".")
            return True

        self._log = logging.getLogger("trainbus")
        self._note = note
        self._log.addFilter(note)

    def close(self) -> None:
        """Stop listening to the log (idempotent)."""
        log = getattr(self, "_log", None)
        if log is not None:
            log.removeFilter(self._note)
            self._log = None

    def _steps(self) -> tuple[int, int, int]:
        """(global step now, steps done in this run, steps per epoch)."""
        loop = getattr(self.trainer, "loop", None)
        spe = int(getattr(loop, "steps_per_epoch", 0) or getattr(self.config, "steps_per_epoch", 0) or 0)
        gstep = int(getattr(loop, "global_step", 0) or 0)
        first_step = (self.first_epoch - 1) * spe
        return gstep, max(0, gstep - first_step), spe

    def stop_reason(self, error: BaseException | None) -> str:
        if error is not None:
            return f"{type(error).__name__}: {error}".rstrip(": ")
        loop = getattr(self.trainer, "loop", None)
        reason = getattr(self.trainer, "stop_reason", None)
        max_epoch = getattr(self.config, "max_epoch", None)
        epoch = getattr(loop, "epoch_num", None)
        gstep, _, spe = self._steps()
        if reason:
            return f"stopped: {reason}"
        if spe and max_epoch is not None and gstep >= max_epoch * spe:
            return f"reached max_epoch = {max_epoch}"
        if self.stopped_because:
            return f"stopped in epoch {epoch} by {self.stopped_because}"
        return f"stopped in epoch {epoch} before max_epoch = {max_epoch} (a callback raised StopTraining, or the " \
               "input ran out of data; see the log above)"

    def _checkpoints(self, logdir: str | None) -> list[str]:
        from trainbus.show import find_checkpoints

        dirs: list[str] = []
        for cb in [*getattr(self.config, "callbacks", []), *getattr(self.config, "extra_callbacks", [])]:
            d = getattr(cb, "checkpoint_dir", None)
            if isinstance(d, str) and os.path.abspath(d) not in dirs:
                dirs.append(os.path.abspath(d))
        if logdir and os.path.abspath(logdir) not in dirs:
            dirs.append(os.path.abspath(logdir))
        out: list[str] = []
        for d in dirs:
            if not os.path.isdir(d):
                continue
            for c in find_checkpoints(d):
                where = c.prefix if d != os.path.abspath(logdir or "") else c.name
                out.append(where + ("" if c.readable else f" (NOT READABLE: {c.problem})"))
        return out

    def text(self, error: BaseException | None = None) -> str:
        """The summary lines."""
        from trainbus.show import _fmt, best_values
        from trainbus.utils import logger

        self.close()
        wall = time.perf_counter() - self.start
        gstep, done, spe = self._steps()
        loop = getattr(self.trainer, "loop", None)
        last_epoch = getattr(loop, "epoch_num", None) or self.first_epoch - 1
        full_epochs = (gstep // spe - (self.first_epoch - 1)) if spe else 0
        lines = [f"Run summary: {max(0, full_epochs)} epoch(s) (epoch {self.first_epoch} to {last_epoch}) and {done} "
                 f"step(s) in {_human(wall)}, global step {gstep}; {self.stop_reason(error)}"]
        monitors = getattr(self.trainer, "monitors", None)
        history: dict[str, list[tuple[int, Any]]] = dict(getattr(monitors, "_history", {}) or {})
        if history:
            rows = []
            names = []
            for name, points in history.items():
                epochs: dict[int, dict[str, Any]] = {}
                for step, v in points:
                    if isinstance(v, bool) or not isinstance(v, (int, float)):
                        continue
                    ep = (int(step) - 1) // spe + 1 if spe and step > 0 else 0
                    epochs[ep] = {"epoch_num": ep, "global_step": int(step), name: float(v)}
                if epochs:
                    names.append(name)
                    rows.append((name, [epochs[e] for e in sorted(epochs)]))
            directions = directions_of([*getattr(self.config, "callbacks", []),
                                        *getattr(self.config, "extra_callbacks", [])])
            w = max(len(n) for n in names) if names else 0
            if names:
                lines.append("  scalar" + " " * max(0, w - 6) + "  last (epoch)          best")
            for name, epochs in rows:
                last = epochs[-1]
                bests = best_values(epochs, [name], directions)
                best_text = "; ".join(f"{b.mode} {_fmt(b.value)} at epoch {b.epoch} (step {b.step})" for b in bests)
                last_text = f"{_fmt(last[name])} ({last['epoch_num']})"
                lines.append(f"  {name:<{w}}  {last_text:<20}  {best_text}")
        logdir = logger.get_logger_dir()
        ckpts = self._checkpoints(logdir)
        lines.append(f"  checkpoints kept: {', '.join(ckpts) if ckpts else 'none'}")
        lines.append(f"  log directory: {logdir if logdir else 'none (logger.set_logger_dir was not called)'}"
                     + (f"; look at it with: trainbus show {logdir}" if logdir else ""))
        return "\n".join(lines)


def _human(seconds: float) -> str:
    from trainbus.utils.timefmt import human_seconds

    return human_seconds(seconds, 1) if math.isfinite(seconds) else "?"