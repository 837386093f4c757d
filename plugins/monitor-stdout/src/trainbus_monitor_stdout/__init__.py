"""``ScalarPrinter``: print scalars to the trainbus log (terminal and ``log.log``)."""

from __future__ import annotations

import re
from typing import Any, Iterable

from trainbus.callbacks.monitor import MonitorBase
from trainbus.utils import logger

__all__ = ["ScalarPrinter"]


def _compile(label: str, patterns: Iterable[str | re.Pattern] | None) -> list[re.Pattern] | None:
    if patterns is None:
        return None
    if isinstance(patterns, (str, bytes, re.Pattern)):
        raise TypeError(f"ScalarPrinter({label}=...): expected a list of regular expressions, got the single "
                        f"{patterns!r}; wrap it in a list: {label}=[{patterns!r}]")
    out = []
    for p in patterns:
        if isinstance(p, re.Pattern):
            out.append(p)
            continue
        if not isinstance(p, str):
            raise TypeError(f"ScalarPrinter({label}=...): {p!r} ({type(p).__name__}) is not a regular expression string")
        try:
            out.append(re.compile(p))
        except re.error as e:
            raise ValueError(f"ScalarPrinter({label}=...): {p!r} is not a valid regular expression: {e}") from None
    return out


class ScalarPrinter(MonitorBase):
    """Print the scalars put since the last print, sorted by name, as ``name: value``.

    :param enable_step: print after every step that put scalars (the last step of an epoch is
        printed together with the epoch when ``enable_epoch`` is on).
    :param enable_epoch: print at the end of every epoch.
    :param whitelist: regular expressions; only names matching one of them are printed
        (default: all names).
    :param blacklist: regular expressions; names matching one of them are not printed
        (default: none).

    A name matches a regular expression when ``re.search`` finds it anywhere in the name,
    as in tensorpack: ``"cost"`` matches ``"val-cost"``; anchor it (``"^cost$"``) to match
    only the whole name. An invalid expression is rejected here, at construction.
    """

    def __init__(self, enable_step: bool = False, enable_epoch: bool = True,
                 whitelist: Iterable[str] | None = None, blacklist: Iterable[str] | None = None) -> None:
        self._whitelist = _compile("whitelist", whitelist)
        self._blacklist = _compile("blacklist", blacklist) or []
        self._enable_step = bool(enable_step)
        self._enable_epoch = bool(enable_epoch)
        self._dic: dict[str, float] = {}

    def _hooks_turned_off(self) -> list[str]:
        # nothing to do per step: costs nothing per step
        return [hook for hook, on in (("trigger_step", self._enable_step), ("trigger_epoch", self._enable_epoch))
                if not on]

    def _matches(self, name: str) -> bool:
        if self._whitelist is not None and not any(r.search(name) for r in self._whitelist):
            return False
        return not any(r.search(name) for r in self._blacklist)

    def process_scalar(self, name: str, val: Any) -> None:
        self._dic[name] = float(val)

    def _before_train(self) -> None:
        self._trigger()  # what was put while setting up

    def _trigger_step(self) -> None:
        last = self.trainer.local_step == self.trainer.steps_per_epoch - 1
        if not last or not self._enable_epoch:
            self._trigger()

    def _trigger_epoch(self) -> None:
        self._trigger()

    def _trigger(self) -> None:
        for k in sorted(self._dic):
            if self._matches(k):
                logger.info(f"{k}: {self._dic[k]:.5g}")
        self._dic = {}
