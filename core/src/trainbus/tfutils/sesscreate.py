"""Session creators (``tf.compat.v1.train.SessionCreator`` implementations)."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

import tensorflow as tf

from trainbus.tfutils.common import get_default_sess_config

tf1 = tf.compat.v1

__all__ = ["NewSessionCreator", "ReuseSessionCreator", "SessionCreatorAdapter"]
# also here, outside tensorpack's names: CountingSession, INIT_WITH_VARIABLES, not_counted

#: the graph collection of initializer ops that :class:`NewSessionCreator` runs together with the
#: variables' initializers (in the same ``Session.run``), for state that is in no variable
#: collection (``QueueInput``'s statistic). Whoever adds an op must still run it where
#: ``ran_with_variables`` of the session does not name it: other session creators do not run it.
INIT_WITH_VARIABLES = "trainbus_init_with_variables"


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
            extra = sess.graph.get_collection(INIT_WITH_VARIABLES)
            sess.run([tf1.global_variables_initializer(), tf1.local_variables_initializer(), tf1.tables_initializer(),
                      *extra])
        sess.ran_with_variables = frozenset(op.name for op in extra)
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
    #: the names of the ops of ``INIT_WITH_VARIABLES`` the creator ran with the variables' initializers
    ran_with_variables: frozenset = frozenset()
    #: per thread: whether its requests are left out of ``runs`` (:func:`not_counted`)
    _quiet = threading.local()

    def _extend_graph(self) -> None:
        if getattr(self._quiet, "sess", None) is not self:
            self.runs += 1
        super()._extend_graph()


@contextlib.contextmanager
def not_counted(sess: Any) -> Iterator[None]:
    """The requests this thread makes of ``sess`` meanwhile are left out of its ``runs`` (a
    :class:`CountingSession`'s; any other session is left alone). Only for requests whose ops
    cannot change any variable, such as an input queue's enqueue of fed placeholders: the
    trainer then still knows the global step without reading it."""
    if not isinstance(sess, CountingSession):
        yield
        return
    quiet = CountingSession._quiet
    before = getattr(quiet, "sess", None)
    quiet.sess = sess
    try:
        yield
    finally:
        quiet.sess = before


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
