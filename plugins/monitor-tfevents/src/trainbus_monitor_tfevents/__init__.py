"""``TFEventWriter``: summaries and events to TensorBoard event files."""

from __future__ import annotations

import itertools
import os
from typing import Any

from trainbus import checkpoint as _ckpt
from trainbus.callbacks.monitor import MonitorBase
from trainbus.utils import logger

__all__ = ["TFEventWriter"]

_file_counter = itertools.count()


class TFEventWriter(MonitorBase):
    """Write summaries (``put_scalar``, ``put_image``, ``put_summary``) and events
    (``put_event``) to a TensorFlow event file, readable by TensorBoard. The event file is
    created when the writer is set up; the graph (the whole graph, once it is finalized) is
    written in a thread started when the first step is prepared and about to run
    (``trainer.loop.on_first_step_ready``), so that the training does not wait for it: it
    overlaps TensorFlow's run of the step (started earlier, it would hold the graph's lock and
    Python's while the step is being prepared). The file is flushed at the end of every epoch,
    once the graph is in it; a training that ends before its first step writes the graph as it
    ends. A resumed run
    (one that starts from a restored ``global_step``) writes a restart marker first, so that
    TensorBoard shows one curve per tag, without the steps the interrupted run wrote after its
    last checkpoint.

    :param logdir: the directory of the event files; ``logger.get_logger_dir()`` by default.
        Without either, the writer warns and does nothing (as in tensorpack).
    :param max_queue: how many events to queue before writing them (as in
        ``tf.compat.v1.summary.FileWriter``).
    :param flush_secs: how often, in seconds, queued events are written (same).
    :param split_files: start a new event file at every epoch (trigger) instead of appending to
        one file: useful on filesystems where appending is expensive. Every file has a unique
        name, so no event is lost however short the epoch.
    """

    def __init__(self, logdir: str | os.PathLike | None = None, max_queue: int = 10, flush_secs: float = 120,
                 split_files: bool = False) -> None:
        for label, v in (("max_queue", max_queue), ("flush_secs", flush_secs)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                raise ValueError(f"TFEventWriter({label}={v!r}): must be a positive number")
        self._given = None if logdir is None else os.path.normpath(os.fspath(logdir))
        if self._given is not None and os.path.exists(self._given) and not os.path.isdir(self._given):
            raise ValueError(f"TFEventWriter(logdir={self._given!r}): the path exists and is not a directory")
        self._bound: str | None = None  # the directory, chosen when training starts
        self._max_queue = int(max_queue)
        self._flush_secs = flush_secs
        self._split_files = bool(split_files)
        self._writer: Any = None
        #: the graph's write (``trainer.loop.beside_steps``), from before_train until waited for
        self._graph: Any = None

    @property
    def _logdir(self) -> str | None:
        if self._bound is not None:
            return self._bound
        if self._given is not None:
            return self._given
        d = logger.get_logger_dir()
        return None if d is None else os.path.normpath(d)

    @property
    def enabled(self) -> bool:
        """False when there is neither a ``logdir`` nor a logger directory (the log directory is
        the one in force when training starts)."""
        return self._logdir is not None

    @property
    def logdir(self) -> str | None:
        return self._logdir

    def _new_writer(self) -> Any:
        from trainbus import plugin_api as _tf

        tf1 = _tf.tf1()
        # the file name holds the time in seconds; the suffix keeps two files opened in the
        # same second apart (otherwise the second would truncate the first)
        suffix = f".{os.getpid()}.{next(_file_counter):06d}"
        return tf1.summary.FileWriter(self._logdir, max_queue=self._max_queue, flush_secs=self._flush_secs,
                                     filename_suffix=suffix)

    def _setup_graph(self) -> None:
        self._bound = None
        self._bound = self._logdir
        if self._bound is None:
            logger.warning("TFEventWriter: the logger directory was not set (logger.set_logger_dir) and no logdir "
                           "was given; TFEventWriter is ignored.")
            return
        os.makedirs(self._logdir, exist_ok=True)
        with self.graph.as_default():
            self._writer = self._new_writer()

    def _graph_written(self) -> None:
        """Wait for the thread writing the graph (or write it now, when no step ran); a failure
        is a warning (training goes on)."""
        work, self._graph = self._graph, None
        error = work.wait() if work is not None else None
        if error is not None:
            logger.warning(f"TFEventWriter: writing the graph to {self._writer.get_logdir()} failed "
                           f"({type(error).__name__}: {error}); TensorBoard will show no graph for this run.")

    def _before_train(self) -> None:
        """The graph is finalized by now: it is written from when the first step is prepared
        (``trainer.loop.beside_steps``). A run that starts from a restored ``global_step`` (a resumed run)
        marks the restart in its event file: TensorBoard then drops the earlier files' events
        after that step (written by the interrupted run after its checkpoint), so each tag
        shows one curve without overlapping steps."""
        if self._writer is None:
            return
        writer = self._writer
        self._graph = self.trainer.loop.beside_steps(lambda: writer.add_graph(self.graph), name="TFEventWriter-graph")
        gs = self.trainer.global_step
        if gs <= 0:
            return
        from tensorflow.core.util.event_pb2 import SessionLog

        self._writer.add_session_log(SessionLog(status=SessionLog.START, msg=f"resumed after global_step {gs}"),
                                     global_step=gs + 1)
        self._writer.flush()

    def process_summary(self, summary: Any) -> None:
        self._writer.add_summary(summary, self.trainer.global_step)

    def process_event(self, evt: Any) -> None:
        self._writer.add_event(evt)

    def _flush(self) -> bool:
        self._graph_written()
        try:
            self._writer.flush()
        except Exception as e:  # noqa: BLE001 - a full or read-only disk must not stop training
            _ckpt.report_write_failure("TFEventWriter", self._writer.get_logdir(), e,
                                       "events of this epoch may be lost; training goes on")
            return False
        _ckpt.write_succeeded("TFEventWriter", self._writer.get_logdir())
        return True

    def _trigger(self) -> None:
        self._flush()
        if self._split_files:
            self._writer.close()
            with self.graph.as_default():
                self._writer = self._new_writer()

    def _after_train(self) -> None:
        if self._writer is not None:
            if self._flush():
                try:
                    self._writer.close()
                except Exception as e:  # noqa: BLE001
                    _ckpt.report_write_failure("TFEventWriter", self._writer.get_logdir(), e, "training has ended")

    def __str__(self) -> str:
        return "TFEventWriter" if self.enabled else "TFEventWriter(disabled: no logdir)"
