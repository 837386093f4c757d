"""Session creators (``tf.compat.v1.train.SessionCreator`` implementations)."""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from trainbus.tfutils.common import get_default_sess_config

tf1 = tf.compat.v1

__all__ = ["NewSessionCreator", "ReuseSessionCreator", "SessionCreatorAdapter"]
# also here, outside tensorpack's names: CountingSession


class NewSessionCreator(tf1.train.SessionCreator):
    """Create a new session and initialize global and local variables and tables.

    :param target: same as in ``tf.compat.v1.Session``.
    :param config: a ``ConfigProto``; defaults to ``tfutils.get_default_sess_config()``.
    """

    def __init__(self, target: str = "", config: Any = None) -> None:
        self.target = target
        self.config = config if config is not None else get_default_sess_config()

    def create_session(self) -> Any:
        sess = CountingSession(target=self.target, config=self.config)
        with sess.graph.as_default():
            sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer(), tf1.tables_initializer()])
        sess.runs_after_init = sess.runs
        return sess


class CountingSession(tf1.Session):
    """The ``tf.compat.v1.Session`` that :class:`NewSessionCreator` makes, counting in ``runs``
    the requests that may run ops: every ``run``, ``partial_run_setup``, ``make_callable`` and
    callable made from options brings the session's graph up to date first, and that step is
    counted. A callable made earlier runs uncounted, but none exists before the first count.

    The trainer uses it to know the global step without reading it: right after the
    initialization (``runs_after_init``), and for as long as nothing else asked to run, it is
    the value the initializer assigned."""

    #: requests that may have run ops since the session was made
    runs = 0
    #: ``runs`` once the creator initialized the variables (None: made by someone else)
    runs_after_init: int | None = None

    def _extend_graph(self) -> None:
        self.runs += 1
        super()._extend_graph()


class ReuseSessionCreator(tf1.train.SessionCreator):
    """Return an existing session."""

    def __init__(self, sess: Any) -> None:
        self.sess = sess

    def create_session(self) -> Any:
        return self.sess


class SessionCreatorAdapter(tf1.train.SessionCreator):
    """Apply ``func`` to the session another creator made (e.g. to wrap it for debugging)."""

    def __init__(self, session_creator: Any, func: Callable[[Any], Any]) -> None:
        self._creator = session_creator
        self._func = func

    def create_session(self) -> Any:
        return self._func(self._creator.create_session())
