"""What resume tests share: a session initializer that sets ``global_step`` as restoring a
checkpoint of that step would (without writing one)."""

from __future__ import annotations

from typing import Any

from trainbus.tfutils.sessinit import SessionInit


class SetGlobalStep(SessionInit):
    """Restores ``global_step`` to ``step`` like a checkpoint would."""

    def __init__(self, step: int) -> None:
        self.step = step

    def _setup_graph(self) -> None:
        from trainbus.tfutils.common import get_global_step_var

        self._op = get_global_step_var().assign(self.step)

    def _run_init(self, sess: Any) -> None:
        sess.run(self._op)
