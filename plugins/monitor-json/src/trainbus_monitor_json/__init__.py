"""``JSONWriter``: every scalar of the run in ``stats.json``, grouped by global step.

The file is rewritten atomically (temporary file, fsync, rename) at the end of every epoch and
when training ends, so a process killed at any moment leaves a valid file that holds every
finished epoch. A run that starts where the history ends (resumed or not) appends to it.

The file is strict JSON, readable by every parser: a NaN or infinite value is written as the
string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` and read back as a float.
"""

from __future__ import annotations

import os
import shutil
from datetime import datetime
from typing import Any

from trainbus import checkpoint as _ckpt
from trainbus.callbacks.monitor import MonitorBase
from trainbus.utils import logger
from trainbus.utils import stats as _stats
from trainbus.utils.fs import atomic_write_text

__all__ = ["JSONWriter"]



class JSONWriter(MonitorBase):
    """Write all scalars to ``stats.json`` under ``logger.get_logger_dir()``: a list of dicts,
    one per global step at which scalars were put, each with ``epoch_num`` and ``global_step``.

    If the file exists when training starts, the run appends to it when its records before
    ``starting_epoch`` end with the epoch just before: a new run started at a later epoch keeps
    the earlier history, with or without a restored checkpoint. Records of epochs from
    ``starting_epoch`` on (and, when a checkpoint was restored, of steps after its
    ``global_step``) are dropped first, and the earlier history becomes available through
    ``trainer.monitors.get_history``. Otherwise (e.g. a run from epoch 1 in a used directory)
    a warning says so and the old file is kept as a time-stamped backup.

    The log directory is the one in force when training starts (as in tensorpack), not when the
    writer is made. A ``stats.json`` there that does not parse is moved aside (one warning names
    both files) and the run writes a fresh one; a write that fails (full or read-only disk) is one
    error line, the previous file stays and the next epoch tries again.

    Without a logger directory the writer warns and does nothing, as in tensorpack.
    """

    FILENAME = _stats.FILENAME
    """The name of the json file. Do not change it: resuming looks for this name."""

    def __init__(self) -> None:
        self._dir: str | None = None  # bound when training starts (setup_graph)
        self._fname: str | None = None
        self._reset()

    def _reset(self) -> None:
        self._stats: list[dict[str, Any]] = []
        self._pending: dict[str, Any] = {}
        self._pending_step: int | None = None
        self._pending_epoch: int | None = None
        self._dirty = False

    @property
    def enabled(self) -> bool:
        """Whether there is a logger directory to write to (the one of the running training once
        it started, else the one set now)."""
        return (self._dir or logger.get_logger_dir()) is not None

    def _setup_graph(self) -> None:
        self._dir = logger.get_logger_dir()
        self._reset()
        if self._dir is None:
            logger.warning("JSONWriter: the logger directory was not set (logger.set_logger_dir); JSONWriter is ignored.")
            self._fname = None
            return
        self._fname = os.path.join(self._dir, self.FILENAME)

    # ------------------------------------------------------------------ reading
    @staticmethod
    def load_existing_json(dir: str | None = None) -> list[dict[str, Any]] | None:
        """The records of ``stats.json`` under ``dir`` (default: ``logger.get_logger_dir()``),
        or None if there is no such file. A file that is not a JSON list raises
        ``trainbus.utils.stats.CorruptStatsError`` naming it."""
        return _stats.load_existing_json(dir if dir is not None else logger.get_logger_dir())

    @staticmethod
    def load_existing_epoch_number(dir: str | None = None) -> int | None:
        """The ``epoch_num`` of the last record of ``stats.json`` under ``dir`` (default:
        ``logger.get_logger_dir()``), or None if there is none."""
        return _stats.load_existing_epoch_number(dir if dir is not None else logger.get_logger_dir())

    # ------------------------------------------------------------------ hooks
    def _before_train(self) -> None:
        self._remove_stale_temporaries()
        try:
            existing = _stats.load_existing_json(self._dir)
        except _stats.CorruptStatsError as e:
            aside = os.path.join(self._dir, self.FILENAME + ".damaged-" + datetime.now().strftime("%m%d-%H%M%S"))
            try:
                os.replace(self._fname, aside)
            except OSError as err:
                _ckpt.report_write_failure("JSONWriter", self._fname, err, "it cannot be moved aside; this run's "
                                           "statistics go on in memory and are written when the disk allows")
            else:
                logger.warning(f"JSONWriter: {e.problem}; it is kept as {aside} and this run writes a fresh "
                               f"{self.FILENAME}.")
            return
        if existing is None:
            return
        trainer = self.trainer
        start, gs = trainer.starting_epoch, trainer.global_step
        # the earlier records that precede this run: epochs before starting_epoch and, when a
        # checkpoint was restored, steps up to its global_step
        kept = [r for r in existing if _precedes(r, start, gs)]
        dropped = len(existing) - len(kept)
        last_epoch = _record_epoch(kept[-1]) if kept else None
        if kept and last_epoch is not None and last_epoch + 1 == start:
            logger.info(f"Found the history of an earlier run in {self._fname} (up to epoch {last_epoch}); "
                        "JSONWriter appends to it.")
            if dropped:
                later = f"epochs >= starting_epoch={start}" + (f" or steps after the restored global_step {gs}"
                                                                 if gs > 0 else "")
                logger.info(f"JSONWriter: dropped {dropped} record(s) of {later}.")
                self._dirty = True
            self._stats = kept + self._stats
            monitors = getattr(trainer, "monitors", None)
            if monitors is not None and hasattr(monitors, "load_history"):
                monitors.load_history(kept)
            if self._dirty:
                self._write()
            return
        backup = os.path.join(self._dir, self.FILENAME + "." + datetime.now().strftime("%m%d-%H%M%S"))
        if last_epoch is None:
            why = (f"none of its records is before starting_epoch={start}"
                   + (f" and at or before the restored global_step {gs}" if gs > 0 else ""))
        else:
            why = f"its last epoch before this run is {last_epoch}, not the one before starting_epoch={start}"
        logger.warning(f"JSONWriter: {self._fname} holds another run's history ({why}); it is moved to {backup} "
                       "and a new history starts. To continue it, set starting_epoch to the epoch after its last "
                       "one (JSONWriter.load_existing_epoch_number() + 1; restore the checkpoint too to resume "
                       "training), or use AutoResumeTrainConfig.")
        shutil.move(self._fname, backup)

    def process_scalar(self, name: str, val: Any) -> None:
        trainer = self.trainer
        step = trainer.global_step
        if self._pending and step != self._pending_step:
            self._flush_pending()
        if not self._pending:
            self._pending_step = step
            self._pending_epoch = trainer.epoch_num
        self._pending[name] = val

    def _trigger(self) -> None:
        self._flush_pending()
        if self._dirty:
            self._write()

    def _after_train(self) -> None:
        self._trigger()

    # ------------------------------------------------------------------ internals
    def _remove_stale_temporaries(self) -> None:
        """Temporary files of writes interrupted by a killed process (``stats.json`` itself is
        never torn: the rename had not happened)."""
        prefix = "." + self.FILENAME + "."
        try:
            names = os.listdir(self._dir)
        except OSError:
            return
        for n in names:
            if n.startswith(prefix) and n.endswith(".tmp"):
                try:
                    os.unlink(os.path.join(self._dir, n))
                except OSError:
                    pass

    def _flush_pending(self) -> None:
        if not self._pending:
            return
        rec = dict(self._pending)
        rec["epoch_num"] = self._pending_epoch
        rec["global_step"] = self._pending_step
        self._stats.append(rec)
        self._pending = {}
        self._dirty = True

    def _write(self) -> None:
        try:
            atomic_write_text(self._fname, _ckpt.dumps_strict(self._stats))
        except OSError as e:
            # the file on disk keeps its previous (valid) content; the records stay in memory
            # and are written with the next trigger
            _ckpt.report_write_failure("JSONWriter", self._fname, e, "the previous file stays; its records are kept "
                                       "in memory and written at the next epoch")
            return
        _ckpt.write_succeeded("JSONWriter", self._fname)
        self._dirty = False

    def __str__(self) -> str:
        return "JSONWriter" if self.enabled else "JSONWriter(disabled: no logger directory)"


def _precedes(rec: Any, starting_epoch: int, global_step: int) -> bool:
    """Whether a record of the existing file comes before a run starting at ``starting_epoch``
    with ``global_step`` (0 unless a checkpoint was restored). Records without an epoch or step
    cannot be placed and are kept."""
    if not isinstance(rec, dict):
        return True
    epoch = _record_epoch(rec)
    if epoch is not None and epoch >= starting_epoch:
        return False
    step = _record_step(rec)
    return not (global_step > 0 and step is not None and step > global_step)


def _record_step(rec: dict) -> int | None:
    try:
        return int(rec["global_step"])
    except (KeyError, TypeError, ValueError):
        return None


def _record_epoch(rec: Any) -> int | None:
    try:
        return int(rec["epoch_num"])
    except (KeyError, TypeError, ValueError):
        return None
