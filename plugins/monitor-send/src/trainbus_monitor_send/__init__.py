"""``SendMonitorData``: run a shell command with some scalars formatted into it."""

from __future__ import annotations

import string
import subprocess
from typing import Any, Iterable

from trainbus.callbacks.monitor import MonitorBase
from trainbus.utils import logger

__all__ = ["SendMonitorData"]


class SendMonitorData(MonitorBase):
    """Run ``command`` once every scalar in ``names`` has been put at the same global step,
    with the values formatted in (``str.format`` with the names as keys). Useful to build a
    custom statistics monitor, or to get notified.

    :param command: a shell command, e.g. ``"echo {val-error} >> errors.txt"``.
    :param names: the name (str) or names (list of str) of the scalars to send.

    A command that fails (non-zero exit status) is logged as an error and training goes on.

    Example, send the validation error to your phone through pushbullet::

        SendMonitorData('curl -u your_id: https://api.pushbullet.com/v2/pushes '
                        '-d type=note -d title="validation error" '
                        '-d body={validation_error} > /dev/null 2>&1',
                        'validation_error')
    """

    def __init__(self, command: str, names: str | Iterable[str]) -> None:
        if not isinstance(command, str) or not command.strip():
            raise TypeError(f"SendMonitorData(command=...): expected a non-empty shell command string, got {command!r}")
        if isinstance(names, str):
            names = [names]
        names = list(names)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise TypeError(f"SendMonitorData(names=...): expected a scalar name or a list of names, got {names!r}")
        try:
            fields = {f for _, f, _, _ in string.Formatter().parse(command) if f is not None}
        except ValueError as e:
            raise ValueError(f"SendMonitorData(command={command!r}): not a valid format string: {e}; "
                             "write literal braces as {{ and }}") from None
        unknown = sorted(f for f in fields if f.split(".")[0].split("[")[0] not in names)
        if unknown:
            raise ValueError(f"SendMonitorData(command={command!r}): the placeholder(s) {unknown} are not among "
                             f"names={names}; every {{field}} of the command must be one of the names")
        self.command = command
        self.names = names
        self._values: dict[str, Any] = {}
        self._step: int | None = None

    def process_scalar(self, name: str, val: Any) -> None:
        if name not in self.names:
            return
        step = self.trainer.global_step
        if step != self._step:
            self._values = {}  # a new step: what arrived at an earlier one is stale
            self._step = step
        self._values[name] = val
        if len(self._values) == len(self.names):
            values, self._values = self._values, {}
            self._send(values)

    def _send(self, values: dict[str, Any]) -> None:
        cmd = self.command.format(**values)
        try:
            ret = subprocess.run(cmd, shell=True, check=False).returncode
        except OSError as e:
            logger.error(f"SendMonitorData: command '{cmd}' could not be run: {e}")
            return
        if ret != 0:
            logger.error(f"SendMonitorData: command '{cmd}' failed with ret={ret}!")
