"""A triggerable a run file names (``rel_interrupt_probe:Ready``) in the interrupt tests of
``trainbus train``: writes a file after the first step, then sleeps a little every step."""

from __future__ import annotations

import os
import time

from trainbus.callbacks.base import Callback


class Ready(Callback):
    """``trigger()`` (every step, under ``PeriodicTrigger(every_k_steps=1)``): write ``path``
    once, sleep ``sleep`` seconds."""

    def __init__(self, path: str, sleep: float = 0.02) -> None:
        self.path = path
        self.sleep = sleep

    def _trigger(self) -> None:
        if not os.path.exists(self.path):
            with open(self.path, "w", encoding="utf-8") as f:
                f.write(f"{self.global_step}\n")
        time.sleep(self.sleep)
