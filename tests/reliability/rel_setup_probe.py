"""A model a run file names (``rel_setup_probe:WaitingNet``) in the test that signals
``trainbus train`` before the first step: ``build_graph`` writes ``waiting`` and then waits
until a signal ends the process."""

from __future__ import annotations

import os
import time

from tinyrun import LinearNet

WAIT_LIMIT = 600


class WaitingNet(LinearNet):
    def __init__(self, waiting: str, **kw) -> None:
        super().__init__(**kw)
        self.waiting = waiting

    def build_graph(self, x, y):
        cost = super().build_graph(x, y)
        with open(self.waiting, "w", encoding="utf-8") as f:
            f.write("build_graph\n")
        end = time.monotonic() + WAIT_LIMIT
        while time.monotonic() < end:
            time.sleep(0.05)
        raise RuntimeError(f"WaitingNet: nobody signalled the run within {WAIT_LIMIT} s")
