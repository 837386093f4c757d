"""The trainbus event bus: every hook a trainer fires, and the contribution hooks.

A run fires the loop hooks in this sequence::

    setup_graph                      # once, before the graph is finalized
    before_train                     # once, session created and initialized
    for epoch_num in range(starting_epoch, max_epoch + 1):
        before_epoch
        for local_step in range(steps_per_epoch):
            before_run               # inside each hooked_sess.run(), collects extra fetches
            after_run                # same call, receives those fetches' values
            trigger_step             # after the step (run_step) returned
        after_epoch
        trigger_epoch
    after_train                      # always, also after an error or StopTraining

At every hook, the callbacks of a trainer are called in the order they were given
(callbacks, then monitors); see ``docs/ordering.md``. The monitor hooks fire whenever
``trainer.monitors.put_*`` is called.

Rules for implementers: arguments are passed by keyword, an implementation may accept any
subset of them, and arguments are only ever added, never renamed or removed.

This module imports no TensorFlow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    from trainbus.bus.protocols import TrainerView as Trainer

#: Project name of the bus: markers must use it.
PROJECT = "trainbus"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: The hooks of the training loop, in firing order.
LOOP_HOOKS = (
    "setup_graph",
    "before_train",
    "before_epoch",
    "before_run",
    "after_run",
    "trigger_step",
    "after_epoch",
    "trigger_epoch",
    "after_train",
)
#: The hooks that ``trainer.monitors.put_*`` fires.
MONITOR_HOOKS = ("process_scalar", "process_image", "process_summary", "process_event")
#: Hooks through which installed plugins contribute defaults.
CONTRIBUTION_HOOKS = ("default_callbacks", "default_monitors", "sessinit_for")


class TrainLoopSpec:
    """Hooks of the training loop."""

    @hookspec
    def setup_graph(self, trainer: Trainer) -> None:
        """Once, after the trainer built its main graph and before the graph is finalized.

        Create every op and tensor you need here; the graph is read-only afterwards.
        :class:`~trainbus.callbacks.Callback` forwards it to ``_setup_graph()`` under the
        callback's name scope, after setting ``self.trainer`` and ``self.graph``.

        :param trainer: the trainer; ``trainer.towers`` and ``trainer.train_op`` exist.

        .. versionadded:: 0.1
        """

    @hookspec
    def before_train(self, trainer: Trainer) -> None:
        """Once, right before the first step: the graph is finalized, the session created and
        initialized by the ``session_init``; ``trainer.global_step`` holds the restored step.

        :param trainer: the trainer; ``trainer.sess`` and ``trainer.hooked_sess`` exist.

        .. versionadded:: 0.1
        """

    @hookspec
    def before_epoch(self, trainer: Trainer) -> None:
        """Right before each epoch's first step; ``trainer.epoch_num`` is the new epoch.

        Keep it fast: it runs inside the epoch timer.

        .. versionadded:: 0.1
        """

    @hookspec
    def before_run(self, trainer: Trainer, run_context: Any) -> Any:
        """Inside every ``trainer.hooked_sess.run()``, before the session runs.

        :param run_context: a ``tf.compat.v1.train.SessionRunContext`` for the call; call
            ``run_context.request_stop()`` to end training after this step.
        :return: ``None``, or a pair ``(requester, tf.compat.v1.train.SessionRunArgs)``: the
            extra fetches, feeds and run options to run *in the same* ``Session.run`` as the
            step. ``requester`` is the object whose values ``after_run`` looks up
            (:class:`~trainbus.callbacks.Callback` returns ``self``).

        .. versionadded:: 0.1
        """

    @hookspec
    def after_run(self, trainer: Trainer, run_context: Any, run_values: Any) -> None:
        """Inside every ``trainer.hooked_sess.run()``, after the session returned.

        :param run_context: the same ``SessionRunContext`` as in :func:`before_run`.
        :param run_values: a mapping from each ``requester`` returned by ``before_run`` to its
            ``tf.compat.v1.train.SessionRunValues``; requesters that asked for nothing are
            absent (``Callback`` then sees ``results=None``).

        .. versionadded:: 0.1
        """

    @hookspec
    def trigger_step(self, trainer: Trainer) -> None:
        """After each ``trainer.run_step()`` returned; ``trainer.local_step`` is the step that
        just finished and ``trainer.global_step`` counts it. Keep it light.

        .. versionadded:: 0.1
        """

    @hookspec
    def after_epoch(self, trainer: Trainer) -> None:
        """Right after each epoch's last step, inside the epoch timer. Keep it fast.

        .. versionadded:: 0.1
        """

    @hookspec
    def trigger_epoch(self, trainer: Trainer) -> None:
        """After each epoch, after :func:`after_epoch`; ``trainer.epoch_num`` is the epoch that
        just ended. :class:`~trainbus.callbacks.Callback` calls ``_trigger_epoch()``, which calls
        ``trigger()`` by default. Raise ``trainbus.train.StopTraining`` to stop training.

        .. versionadded:: 0.1
        """

    @hookspec
    def after_train(self, trainer: Trainer) -> None:
        """Once, when training ends: normally, by ``StopTraining``, by an error or by an
        interrupt. Every implementation is called even if an earlier one raised.

        .. versionadded:: 0.1
        """


class MonitorSpec:
    """Hooks through which ``trainer.monitors.put_*`` reaches monitor backends."""

    @hookspec
    def process_scalar(self, trainer: Trainer, name: str, val: float) -> None:
        """One scalar statistic, at step ``trainer.global_step``.

        :param name: the statistic's name (tower prefixes and ``-summary`` suffixes removed).
        :param val: a Python number.

        .. versionadded:: 0.1
        """

    @hookspec
    def process_image(self, trainer: Trainer, name: str, val: Any) -> None:
        """Images: ``val`` is a 4D NHWC ``numpy`` array in [0, 255] (3 channels are RGB).

        .. versionadded:: 0.1
        """

    @hookspec
    def process_summary(self, trainer: Trainer, summary: Any) -> None:
        """A ``tf.compat.v1.Summary`` protobuf (``put_scalar`` also produces one).

        .. versionadded:: 0.1
        """

    @hookspec
    def process_event(self, trainer: Trainer, evt: Any) -> None:
        """A ``tf.compat.v1.Event`` with ``step`` and ``wall_time`` already filled.

        .. versionadded:: 0.1
        """


class ContributionSpec:
    """Hooks through which installed plugins supply the defaults of a run.

    They are implemented by the ambient plugins of group ``trainbus.plugins`` and called by
    :func:`trainbus.train.DEFAULT_CALLBACKS` / :func:`trainbus.train.DEFAULT_MONITORS`.
    """

    @hookspec
    def default_callbacks(self) -> list[tuple[int, Any]]:
        """Return ``[(slot, factory), ...]``: callbacks this plugin adds to
        ``DEFAULT_CALLBACKS()``. Slots order the result (tensorpack's order uses 10
        ``MovingAverageSummary``, 20 ``ProgressBar``, 30 ``MergeAllSummaries``, 40
        ``RunUpdateOps``); ``factory()`` returns a new callback.

        .. versionadded:: 0.1
        """

    @hookspec
    def default_monitors(self) -> list[tuple[int, Any]]:
        """Return ``[(slot, factory), ...]`` for ``DEFAULT_MONITORS()`` (10 ``TFEventWriter``,
        20 ``JSONWriter``, 30 ``ScalarPrinter``).

        .. versionadded:: 0.1
        """


class SessInitSpec:
    """Hooks through which plugins teach ``SmartInit`` to load more kinds of objects."""

    @hookspec(firstresult=True)
    def sessinit_for(self, obj: Any, ignore_mismatch: bool) -> Any:
        """Return a ``SessionInit`` that loads ``obj``, or ``None`` if this plugin cannot.

        ``SmartInit(obj)`` calls it on the ambient plugins (group ``trainbus.plugins``); the
        first non-``None`` answer wins (plugins are asked in entry-point-name order).

        :param obj: what the user passed to ``SmartInit`` (a path, a dict, ...).
        :param ignore_mismatch: warn instead of raising on shape mismatches.

        .. versionadded:: 0.1
        """


ALL_SPECS = (TrainLoopSpec, MonitorSpec, ContributionSpec, SessInitSpec)
