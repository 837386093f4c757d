"""``CSVWriter``: one row per epoch with the latest value of every scalar."""

from __future__ import annotations

import csv
import io
import os
import shutil
from datetime import datetime
from typing import Any

from trainbus import checkpoint as _ckpt
from trainbus.callbacks.monitor import MonitorBase
from trainbus.utils import logger
from trainbus.utils.fs import atomic_write_text

__all__ = ["CSVWriter"]

_KEYS = ("epoch_num", "global_step")


class CSVWriter(MonitorBase):
    """Write a CSV file with one row per epoch: ``epoch_num``, ``global_step`` and the last
    value of every scalar put during that epoch. A stat that appears later adds a column; the
    file is then rewritten, atomically, with the union of the columns (cells of rows that did
    not have a stat are empty). Readable with ``csv.DictReader``, spreadsheets, pandas.

    :param filename: the file, relative to ``logger.get_logger_dir()`` unless absolute.

    A resumed run (an existing file whose last epoch is the one before ``starting_epoch``)
    appends to it, dropping rows of steps later than the restored ``global_step``; otherwise the
    old file is kept as a time-stamped backup. Without a logger directory and with a relative
    ``filename`` the writer warns and does nothing. A relative ``filename`` is taken in the log
    directory in force when training starts. A write that fails (full or read-only disk) is one
    error line; the previous file stays and the next epoch tries again.
    """

    def __init__(self, filename: str | os.PathLike = "stats.csv") -> None:
        filename = os.fspath(filename)
        if not isinstance(filename, str) or not filename or filename.endswith(os.sep):
            raise ValueError(f"CSVWriter(filename={filename!r}): expected a file name such as 'stats.csv'")
        self._given = filename
        if os.path.isabs(filename) and os.path.isdir(filename):
            raise ValueError(f"CSVWriter(filename={filename!r}): {filename} is a directory")
        self._bound: str | None = None  # the file, chosen when training starts
        self._reset()

    def _reset(self) -> None:
        self._columns: list[str] = list(_KEYS)
        self._rows: list[dict[str, Any]] = []
        self._current: dict[str, Any] = {}

    def _resolve(self) -> str | None:
        if os.path.isabs(self._given):
            return self._given
        d = logger.get_logger_dir()
        return None if d is None else os.path.join(d, self._given)

    @property
    def _fname(self) -> str | None:
        return self._bound if self._bound is not None else self._resolve()

    @property
    def enabled(self) -> bool:
        return self._fname is not None

    @property
    def filename(self) -> str | None:
        """The path of the CSV file (None when disabled)."""
        return self._fname

    def _setup_graph(self) -> None:
        self._bound = self._resolve()
        self._reset()
        if self._bound is None:
            logger.warning(f"CSVWriter: the logger directory was not set (logger.set_logger_dir) and {self._given!r} "
                           "is a relative path; CSVWriter is ignored.")
        elif os.path.isdir(self._bound):
            raise ValueError(f"CSVWriter(filename={self._given!r}): {self._bound} is a directory")

    # ------------------------------------------------------------------ hooks
    def _before_train(self) -> None:
        if not os.path.isfile(self._fname):
            return
        try:
            with open(self._fname, newline="", encoding="utf-8") as f:
                reader = csv.DictReader(f)
                columns = list(reader.fieldnames or [])
                rows = list(reader)
        except (OSError, UnicodeDecodeError, csv.Error) as e:
            raise ValueError(f"CSVWriter: cannot read the existing {self._fname} ({e}); move it away before "
                             "training in this directory") from None
        if columns[:2] != list(_KEYS):
            raise ValueError(f"CSVWriter: the existing {self._fname} does not start with the columns epoch_num, "
                             f"global_step (it has {columns[:4]}...); move it away or choose another filename")
        gs = self.trainer.global_step
        kept = [r for r in rows if _int(r.get("global_step")) is not None and _int(r["global_step"]) <= gs]
        last_epoch = _int(kept[-1]["epoch_num"]) if kept else None
        if last_epoch is not None and last_epoch + 1 == self.trainer.starting_epoch:
            logger.info(f"CSVWriter: appending to {self._fname}"
                        + (f" (dropped {len(rows) - len(kept)} row(s) after global_step {gs})" if len(kept) < len(rows) else ""))
            self._columns = columns + [c for c in self._columns if c not in columns]
            self._rows = [{k: v for k, v in r.items() if v not in ("", None)} for r in kept]
            if len(kept) < len(rows):
                self._write()
            return
        backup = self._fname + "." + datetime.now().strftime("%m%d-%H%M%S")
        logger.warning(f"CSVWriter: {self._fname} holds another run's rows; it is moved to {backup} and a new file starts.")
        shutil.move(self._fname, backup)

    def process_scalar(self, name: str, val: Any) -> None:
        if name in _KEYS:
            name = "stat:" + name  # never overwrite the row's own keys
        if name not in self._columns:
            self._columns.append(name)
        self._current[name] = val

    def _trigger(self) -> None:
        row = dict(self._current)
        row["epoch_num"] = self.trainer.epoch_num
        row["global_step"] = self.trainer.global_step
        self._current = {}
        last = self._rows[-1] if self._rows else None
        if last is not None and _int(last.get("global_step")) == row["global_step"] and \
                _int(last.get("epoch_num")) == row["epoch_num"]:
            self._rows[-1].update(row)  # triggered twice at the same step (e.g. at after_train)
        else:
            self._rows.append(row)
        self._write()

    def _after_train(self) -> None:
        if self._current:
            self._trigger()

    # ------------------------------------------------------------------ internals
    def _write(self) -> None:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=self._columns, restval="", lineterminator="\n")
        w.writeheader()
        for r in self._rows:
            w.writerow(r)
        try:
            atomic_write_text(self._fname, buf.getvalue())
        except OSError as e:
            _ckpt.report_write_failure("CSVWriter", self._fname, e, "the previous file stays; its rows are kept in "
                                       "memory and written at the next epoch")
            return
        _ckpt.write_succeeded("CSVWriter", self._fname)

    def __str__(self) -> str:
        return "CSVWriter" if self.enabled else "CSVWriter(disabled: no logger directory)"


def _int(v: Any) -> int | None:
    try:
        return int(v)
    except (TypeError, ValueError):
        return None
