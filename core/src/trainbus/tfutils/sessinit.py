"""Session initializers: how variables of a new session get their values.

The base class, ``JustCurrentSession`` and ``ChainInit`` live in the core; the loaders
(``SaverRestore``, ``SaverRestoreRelaxed``, ``DictRestore``, ``SmartInit``) come from an
installed plugin distribution (``trainbus-sessinit``) and resolve here by name.
This module imports no TensorFlow.
"""

from __future__ import annotations

from typing import Any, Iterable

from trainbus.bus import registry as _registry

__all__ = ["SessionInit", "JustCurrentSession", "ChainInit"]


class SessionInit:
    """Base class of utilities that load variables into an (existing) session.

    Subclasses override ``_setup_graph()`` (create ops, before the graph is finalized) and
    ``_run_init(sess)`` (load values).
    """

    def init(self, sess: Any) -> None:
        """Initialize ``sess``: ``_setup_graph()`` then ``_run_init(sess)``."""
        self._setup_graph()
        self._run_init(sess)

    def _setup_graph(self) -> None:
        """Create the ops this initializer needs (the graph is not finalized yet)."""

    def _run_init(self, sess: Any) -> None:
        """Load values into ``sess``."""


class JustCurrentSession(SessionInit):
    """Leave the session as it is (a no-op placeholder)."""


class ChainInit(SessionInit):
    """Run several initializers one after another (e.g. to compose models from several files)."""

    def __init__(self, sess_inits: Iterable[SessionInit]) -> None:
        self.inits = list(sess_inits)
        for i, s in enumerate(self.inits):
            if not isinstance(s, SessionInit):
                raise TypeError(f"ChainInit: item {i} is {s!r} ({type(s).__name__}), not a SessionInit; wrap loadable objects with SmartInit(...)")

    def _setup_graph(self) -> None:
        for i in self.inits:
            i._setup_graph()

    def _run_init(self, sess: Any) -> None:
        for i in self.inits:
            i._run_init(sess)

    def __repr__(self) -> str:
        return f"ChainInit({self.inits!r})"


__getattr__, __dir__ = _registry.make_module_getattr(__name__, (__name__,), globals())
