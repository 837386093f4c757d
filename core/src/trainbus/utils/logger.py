"""The trainbus logger: ``logger.info(...)`` etc., and the run's log directory.

``set_logger_dir(dir, action)`` chooses the directory where callbacks and monitors write
(checkpoints, ``stats.json``, event files) and starts logging to ``log.log`` in it.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import sys
from datetime import datetime


__all__ = ["set_logger_dir", "auto_set_dir", "get_logger_dir", "info", "warning", "warn", "error",
           "exception", "debug", "critical", "setLevel", "addFilter", "LOG_FILENAME"]

LOG_FILENAME = "log.log"


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        date = "[%(asctime)s @%(filename)s:%(lineno)d]"
        if record.levelno == logging.WARNING:
            fmt = date + " WRN %(message)s"
        elif record.levelno in (logging.ERROR, logging.CRITICAL):
            fmt = date + " ERR %(message)s"
        elif record.levelno == logging.DEBUG:
            fmt = date + " DBG %(message)s"
        else:
            fmt = date + " %(message)s"
        self._style._fmt = fmt
        return super().format(record)


def _make_logger() -> logging.Logger:
    lg = logging.getLogger("trainbus")
    lg.propagate = False
    lg.setLevel(logging.INFO)
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_Formatter(datefmt="%m%d %H:%M:%S"))
    lg.addHandler(handler)
    return lg


_logger = _make_logger()
info = _logger.info
warning = _logger.warning
warn = _logger.warning
error = _logger.error
exception = _logger.exception
debug = _logger.debug
critical = _logger.critical
setLevel = _logger.setLevel
addFilter = _logger.addFilter

LOG_DIR: str | None = None
_FILE_HANDLER: logging.Handler | None = None


def _get_time_str() -> str:
    return datetime.now().strftime("%m%d-%H%M%S")


def _set_file(path: str) -> None:
    global _FILE_HANDLER
    if os.path.isfile(path):
        backup = path + "." + _get_time_str()
        shutil.move(path, backup)
        info(f"Existing log file '{path}' backuped to '{backup}'")
    hdl = logging.FileHandler(filename=path, encoding="utf-8", mode="w")
    hdl.setFormatter(_Formatter(datefmt="%m%d %H:%M:%S"))
    if _FILE_HANDLER is not None:
        _logger.removeHandler(_FILE_HANDLER)
        _FILE_HANDLER.close()
    _FILE_HANDLER = hdl
    _logger.addHandler(hdl)
    info("Argv: " + " ".join(sys.argv))


def set_logger_dir(dirname: str | os.PathLike, action: str | None = None) -> None:
    """Use ``dirname`` as the run's log directory and log to ``log.log`` inside it.

    :param action: what to do if ``dirname`` exists and is not empty: ``"k"`` keep (resume
        into it), ``"d"`` delete it, ``"b"`` back it up (rename with a time suffix) and start
        empty, ``"n"`` use a new directory ``dirname + time suffix``, ``"q"`` quit (raises).
        ``None`` asks on the terminal, and raises ``FileExistsError`` when there is none.
    """
    global LOG_DIR
    dirname = os.path.normpath(os.fspath(dirname))
    if action is not None and action not in ("k", "d", "b", "n", "q"):
        raise ValueError(f"set_logger_dir(action={action!r}): action must be one of 'k' (keep), 'd' (delete), "
                         "'b' (backup), 'n' (new), 'q' (quit), or None to ask")
    if _FILE_HANDLER is not None:
        _logger.removeHandler(_FILE_HANDLER)
        _FILE_HANDLER.close()
        globals()["_FILE_HANDLER"] = None

    def dir_nonempty(d: str) -> bool:
        return os.path.isdir(d) and len([x for x in os.listdir(d) if x[0] != "."])

    if dir_nonempty(dirname):
        if action is None:
            if not sys.stdin or not sys.stdin.isatty():
                raise FileExistsError(
                    f"log directory {dirname} exists and is not empty; choose what to do with "
                    "set_logger_dir(dir, action=...): 'k' keep, 'd' delete, 'b' backup, 'n' new"
                )
            warning(f"Log directory {dirname} exists! Use 'd' to delete it. ")
            warning("If you're resuming from a previous run, you can choose to keep it.\n"
                    "Press any other key to exit. ")
            while not action:
                action = input("Select Action: k (keep) / d (delete) / q (quit):").lower().strip()
        act = action
        if act == "b":
            backup_name = dirname + _get_time_str()
            shutil.move(dirname, backup_name)
            info(f"Directory '{dirname}' backuped to '{backup_name}'")
        elif act == "d":
            shutil.rmtree(dirname, ignore_errors=True)
            if dir_nonempty(dirname):
                shutil.rmtree(dirname, ignore_errors=False)
        elif act == "n":
            dirname = dirname + _get_time_str()
            info(f"Use a new log directory {dirname}")
        elif act == "k":
            pass
        else:
            raise FileExistsError(f"log directory {dirname} exists and set_logger_dir was told to quit (action {act!r})")
    LOG_DIR = dirname
    try:
        os.makedirs(dirname)
    except OSError as e:
        if e.errno != errno.EEXIST:
            raise
    _set_file(os.path.join(dirname, LOG_FILENAME))


def auto_set_dir(action: str | None = None, name: str | None = None) -> None:
    """Use ``train_log/<script name>[:name]`` as the log directory."""
    mod = sys.modules["__main__"]
    basename = os.path.basename(getattr(mod, "__file__", "interactive") or "interactive")
    auto_dirname = os.path.join("train_log", basename[: basename.rfind(".")] if "." in basename else basename)
    if name:
        auto_dirname += "_%s" % name if os.name == "nt" else ":%s" % name
    set_logger_dir(auto_dirname, action=action)


def get_logger_dir() -> str | None:
    """The log directory set by ``set_logger_dir``, or None. Callbacks and monitors write here."""
    return LOG_DIR


def _reset_for_tests() -> None:
    """Forget the log directory (tests run many trainings in one process)."""
    global LOG_DIR, _FILE_HANDLER
    LOG_DIR = None
    if _FILE_HANDLER is not None:
        _logger.removeHandler(_FILE_HANDLER)
        _FILE_HANDLER.close()
        _FILE_HANDLER = None


