"""Scheduling combinators: when a callback runs, separate from what it does."""

from __future__ import annotations

import time
from typing import Any, Callable

from trainbus.callbacks.base import Callback, ProxyCallback

__all__ = ["PeriodicTrigger", "PeriodicCallback", "EnableCallbackIf"]


def _check_k(owner: str, label: str, k: Any) -> int | None:
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"{owner}: {label} must be a positive integer or None, got {k!r}")
    return k


class PeriodicTrigger(ProxyCallback):
    """Call ``triggerable.trigger()`` every k global steps and/or every k epochs.

    The wrapped callback's other methods (``before_run``/``after_run``, ``trigger_step``, ...)
    run as usual; its own per-epoch trigger is replaced by this schedule.

    :param every_k_steps: trigger when ``global_step % k == 0`` (checked after each step).
    :param every_k_epochs: trigger when ``epoch_num % k == 0`` (checked after each epoch).
    :param before_train: also trigger once in ``before_train``.
    :param every_k_seconds: trigger after a step when at least this many seconds passed since
        the last trigger (or since training started). A trainbus addition.
    """

    def __init__(
        self,
        triggerable: Callback,
        every_k_steps: int | None = None,
        every_k_epochs: int | None = None,
        before_train: bool = False,
        *,
        every_k_seconds: float | None = None,
    ) -> None:
        super().__init__(triggerable)
        self._step_k = _check_k("PeriodicTrigger", "every_k_steps", every_k_steps)
        self._epoch_k = _check_k("PeriodicTrigger", "every_k_epochs", every_k_epochs)
        if every_k_seconds is not None:
            if isinstance(every_k_seconds, bool) or not isinstance(every_k_seconds, (int, float)) or not every_k_seconds > 0:
                raise ValueError(f"PeriodicTrigger: every_k_seconds must be a positive number or None, got {every_k_seconds!r}")
        self._sec_k = every_k_seconds
        self._before_train_flag = bool(before_train)
        if self._step_k is None and self._epoch_k is None and self._sec_k is None and not self._before_train_flag:
            raise ValueError(
                "PeriodicTrigger: every_k_steps, every_k_epochs (and every_k_seconds) cannot all be None "
                "unless before_train=True; say how often to trigger"
            )
        self._last_time = 0.0

    def _extra_hooks(self) -> frozenset[str]:
        extra = set()
        if self._step_k is not None or self._sec_k is not None:
            extra.add("trigger_step")
        if self._epoch_k is not None:
            extra.add("trigger_epoch")
        if self._before_train_flag or self._sec_k is not None:
            extra.add("before_train")
        return frozenset(extra)

    def hooks_used(self) -> frozenset[str]:
        inner = set(self.cb.hooks_used())
        inner.discard("trigger_epoch")  # the wrapped trigger is scheduled by us, not per epoch
        return frozenset(inner | {"setup_graph"} | self._extra_hooks())

    def _before_train(self) -> None:
        self.cb.before_train()
        self._last_time = time.monotonic()
        if self._before_train_flag:
            self.cb.trigger()

    def _trigger_step(self) -> None:
        self.cb.trigger_step()
        if self._step_k is not None and self.global_step % self._step_k == 0:
            self.cb.trigger()
            self._last_time = time.monotonic()
        elif self._sec_k is not None and time.monotonic() - self._last_time >= self._sec_k:
            self.cb.trigger()
            self._last_time = time.monotonic()

    def _trigger_epoch(self) -> None:
        if self._epoch_k is not None and self.epoch_num % self._epoch_k == 0:
            self.cb.trigger()

    def __str__(self) -> str:
        return f"PeriodicTrigger-{self.cb}"


class EnableCallbackIf(ProxyCallback):
    """Run the wrapped callback's ``before/after_epoch``, ``before/after_run``,
    ``trigger_epoch``, ``trigger_step`` and ``trigger`` only when ``pred(self)`` is true.

    Setup, ``before_train`` and ``after_train`` always run. With ``before_run``/``after_run``,
    ``pred`` is evaluated in ``before_run`` only, and ``after_run`` follows that decision.
    """

    def __init__(self, callback: Callback, pred: Callable[[Any], bool]) -> None:
        if not callable(pred):
            raise TypeError(f"EnableCallbackIf: pred must be a callable taking the callback, got {pred!r}")
        super().__init__(callback)
        self._pred = pred
        self._enabled = False

    def _extra_hooks(self) -> frozenset[str]:
        # ``pred`` is evaluated in before_run and after_run follows it: a wrapped callback that
        # only overrides ``_after_run`` still needs this proxy registered for before_run
        if "after_run" in self.cb.hooks_used():
            return frozenset({"before_run"})
        return frozenset()

    def _before_run(self, ctx: Any) -> Any:
        self._enabled = bool(self._pred(self))
        if self._enabled:
            return self.cb._before_run(ctx)
        return None

    def _after_run(self, ctx: Any, run_values: Any) -> None:
        if self._enabled:
            self.cb._after_run(ctx, run_values)

    def _before_epoch(self) -> None:
        if self._pred(self):
            self.cb.before_epoch()

    def _after_epoch(self) -> None:
        if self._pred(self):
            self.cb.after_epoch()

    def _trigger(self) -> None:
        if self._pred(self):
            self.cb.trigger()

    def _trigger_epoch(self) -> None:
        if self._pred(self):
            self.cb.trigger_epoch()

    def _trigger_step(self) -> None:
        if self._pred(self):
            self.cb.trigger_step()

    def __str__(self) -> str:
        return f"EnableCallbackIf-{self.cb}"


class PeriodicCallback(EnableCallbackIf):
    """Enable the wrapped callback's per-step/per-epoch methods only when
    ``global_step % every_k_steps == 0`` or ``epoch_num % every_k_epochs == 0``; with
    ``every_k_epochs`` also at the very last step of training. Can only make a callback
    run less often than it would; use :class:`PeriodicTrigger` to run ``trigger()`` more often.
    """

    def __init__(self, callback: Callback, every_k_steps: int | None = None, every_k_epochs: int | None = None) -> None:
        self._step_k = _check_k("PeriodicCallback", "every_k_steps", every_k_steps)
        self._epoch_k = _check_k("PeriodicCallback", "every_k_epochs", every_k_epochs)
        if self._step_k is None and self._epoch_k is None:
            raise ValueError("PeriodicCallback: every_k_steps and every_k_epochs cannot both be None")
        super().__init__(callback, PeriodicCallback._predicate)

    @staticmethod
    def _predicate(self: PeriodicCallback) -> bool:
        if self._step_k is not None and self.global_step % self._step_k == 0:
            return True
        if self._epoch_k is not None:
            if self.epoch_num % self._epoch_k == 0:
                return True
            tr = self.trainer
            if self.epoch_num == tr.max_epoch and self.local_step == tr.steps_per_epoch - 1:
                return True
        return False

    def __str__(self) -> str:
        return f"PeriodicCallback-{self.cb}"
