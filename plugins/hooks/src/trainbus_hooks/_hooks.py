"""HookToCallback, CallbackToHook and TFLocalCLIDebugHook."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from trainbus.callbacks.base import Callback

tf1 = tf.compat.v1

__all__ = ["HookToCallback", "CallbackToHook", "TFLocalCLIDebugHook"]


class HookToCallback(Callback):
    """Run a ``tf.compat.v1.train.SessionRunHook`` as a callback, unchanged:

    * ``hook.begin()`` in ``setup_graph`` (at the root name scope, the graph not yet final);
    * ``hook.after_create_session(sess, coord)`` in ``before_train``, with ``coord=None``;
    * ``hook.before_run`` / ``hook.after_run`` along with every training step (in the step's
      ``Session.run``); ``run_context.request_stop()`` stops training after the step;
    * ``hook.end(sess)`` in ``after_train``.

    :param hook: the ``SessionRunHook``.
    """

    _chief_only = False

    def __init__(self, hook: Any) -> None:
        if not isinstance(hook, tf1.train.SessionRunHook):
            raise TypeError(f"HookToCallback needs a tf.compat.v1.train.SessionRunHook, got {hook!r} of type "
                            f"{type(hook).__name__}")
        self._hook = hook

    @property
    def hook(self) -> Any:
        """The wrapped ``SessionRunHook``."""
        return self._hook

    def _setup_graph(self) -> None:
        with tf1.name_scope(None):
            self._hook.begin()

    def _before_train(self) -> None:
        sess = tf1.get_default_session() or self.trainer.sess
        self._hook.after_create_session(sess, None)

    def _before_run(self, ctx: Any) -> Any:
        return self._hook.before_run(ctx)

    def _after_run(self, ctx: Any, run_values: Any) -> None:
        self._hook.after_run(ctx, run_values)

    def _after_train(self) -> None:
        self._hook.end(self.trainer.sess)

    def __str__(self) -> str:
        return f"HookToCallback({type(self._hook).__name__})"


class CallbackToHook(tf1.train.SessionRunHook):
    """A ``SessionRunHook`` that forwards ``before_run`` / ``after_run`` to a callback.

    Hooks can do less than callbacks, so only these two calls are converted; the callback
    must already be set up (``setup_graph``) if it resolves tensor names. Its ``after_run``
    receives the plain ``SessionRunValues`` of its own request.

    :param cb: the :class:`~trainbus.callbacks.Callback`.
    """

    def __init__(self, cb: Callback) -> None:
        if not isinstance(cb, Callback):
            raise TypeError(f"CallbackToHook needs a trainbus Callback, got {cb!r} of type {type(cb).__name__}")
        self._cb = cb

    @property
    def callback(self) -> Callback:
        return self._cb

    def before_run(self, run_context: Any) -> Any:
        # trainbus's Callback.before_run returns (requester, SessionRunArgs) or None
        ret = self._cb.before_run(run_context)
        if ret is None:
            return None
        return ret[1]

    def after_run(self, run_context: Any, run_values: Any) -> None:
        self._cb.after_run(run_context, run_values)


class TFLocalCLIDebugHook(HookToCallback):
    """TensorFlow's ``LocalCLIDebugHook`` (tfdbg's interactive terminal debugger) as a
    callback. It takes over the terminal at the first step.

    :param args, kwargs: the arguments of ``tensorflow.python.debug.LocalCLIDebugHook``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from tensorflow.python import debug as tf_debug

        super().__init__(tf_debug.LocalCLIDebugHook(*args, **kwargs))

    def add_tensor_filter(self, *args: Any, **kwargs: Any) -> None:
        """``LocalCLIDebugHook.add_tensor_filter(filter_name, tensor_filter)``: register a
        tensor filter usable with ``run -f <filter_name>`` in the debugger."""
        self._hook.add_tensor_filter(*args, **kwargs)

    def __str__(self) -> str:
        return "TFLocalCLIDebugHook"
