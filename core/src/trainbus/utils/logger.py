"""The trainbus logger: ``logger.info(...)`` etc., and the run's log directory.

``set_logger_dir(dir, action)`` chooses the directory where callbacks and monitors write
(checkpoints, ``stats.json``, event files); when training starts (``commit_logger_dir``) the
action is carried out and logging to ``log.log`` in it begins.
"""

from __future__ import annotations

import errno
import logging
import os
import shutil
import sys
from datetime import datetime


__all__ = ["set_logger_dir", "auto_set_dir", "get_logger_dir", "commit_logger_dir", "pending_logger_dir_action",
           "take_run_dir_lock", "protect_path",
           "info", "warning", "warn", "error", "exception", "debug", "critical", "setLevel", "addFilter",
           "LOG_FILENAME"]

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


class _BufferHandler(logging.Handler):
    """Holds the records logged while the log directory is pending; they go to ``log.log``
    once the directory is committed, and are dropped if it never is."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.records) < 10000:
            self.records.append(record)


class _PendingDir:
    """A log directory chosen by ``set_logger_dir`` whose action has not been carried out yet."""

    def __init__(self, requested: str, dirname: str, action: str | None) -> None:
        self.requested = requested  # the directory as given
        self.dirname = dirname      # where the run writes (differs from ``requested`` for "n")
        self.action = action        # "k", "d", "b", "n" or None (the directory was empty or absent)
        self.buffer = _BufferHandler()
        self.lock: object | None = None  # the run-directory lock, taken when the directory exists


_PROTECTED: list[str] = []


def protect_path(path: str) -> None:
    """Never let ``set_logger_dir(..., action="d")`` delete a directory holding ``path`` (the run
    file of ``trainbus train`` registers itself)."""
    _PROTECTED.append(os.path.abspath(path))


def _check_deletable(dirname: str) -> None:
    d = os.path.realpath(dirname)
    for what, p in [("the current directory", os.getcwd())] + [("the run file", x) for x in _PROTECTED]:
        rp = os.path.realpath(p)
        if rp == d or rp.startswith(d.rstrip(os.sep) + os.sep):
            raise ValueError(f"set_logger_dir: action 'd' would delete {dirname}, which holds {what} ({p}); "
                             "choose a log directory of its own (e.g. train_log/<name>) or another action")


_PENDING: _PendingDir | None = None


class _LogFileHandler(logging.FileHandler):
    """``log.log``: a record that cannot be written (full or read-only disk) gives one warning on
    the console, not Python's ``--- Logging error ---`` traceback for every record; writing is
    tried again with each record, and a recovery is said once."""

    def __init__(self, path: str) -> None:
        super().__init__(filename=path, encoding="utf-8", mode="w")
        self._failing: str | None = None

    def emit(self, record: logging.LogRecord) -> None:
        super().emit(record)
        if self._failing is not None and self._ok:
            self._failing = None
            sys.stdout.write(f"[trainbus] writing {self.baseFilename} works again.\n")

    def handleError(self, record: logging.LogRecord) -> None:
        self._ok = False
        e = sys.exc_info()[1]
        reason = (f"{os.strerror(e.errno)} ({errno.errorcode.get(e.errno, e.errno)})"
                  if isinstance(e, OSError) and e.errno else f"{type(e).__name__}: {e}")
        if self._failing != reason:
            self._failing = reason
            try:
                sys.stderr.write(f"[trainbus] WRN cannot write the log file {self.baseFilename}: {reason}; "
                                 "messages go on on the console only until it can be written again.\n")
            except Exception:  # noqa: BLE001 - nothing left to report to
                pass

    def format(self, record: logging.LogRecord) -> str:
        self._ok = True
        return super().format(record)

    def close(self) -> None:
        try:
            super().close()
        except OSError:  # the last buffered lines cannot be written either: already warned about
            stream, self.stream = self.stream, None
            try:
                if stream is not None:
                    stream.close()
            except OSError:
                pass
            logging.Handler.close(self)


def _set_file(path: str) -> None:
    global _FILE_HANDLER
    if os.path.isfile(path):
        backup = path + "." + _get_time_str()
        shutil.move(path, backup)
        info(f"Existing log file '{path}' backuped to '{backup}'")
    hdl = _LogFileHandler(path)
    hdl.setFormatter(_Formatter(datefmt="%m%d %H:%M:%S"))
    if _FILE_HANDLER is not None:
        _logger.removeHandler(_FILE_HANDLER)
        _FILE_HANDLER.close()
    _FILE_HANDLER = hdl
    _logger.addHandler(hdl)


def _dir_nonempty(d: str) -> bool:
    return os.path.isdir(d) and any(x[0] != "." for x in os.listdir(d))


def _drop_pending() -> None:
    global _PENDING
    if _PENDING is not None:
        _logger.removeHandler(_PENDING.buffer)
        if _PENDING.lock is not None:
            _PENDING.lock.release()  # type: ignore[attr-defined]
        _PENDING = None


def take_run_dir_lock() -> object | None:
    """Hand the lock ``set_logger_dir`` took on the log directory over to the caller (a trainer
    about to train there), or None when it took none."""
    if _PENDING is None:
        return None
    lock, _PENDING.lock = _PENDING.lock, None
    return lock


def set_logger_dir(dirname: str | os.PathLike, action: str | None = None) -> None:
    """Use ``dirname`` as the run's log directory and log to ``log.log`` inside it.

    Choosing is immediate (``get_logger_dir()`` returns the directory at once), acting is
    not: deleting, backing up or creating the directory, and starting ``log.log``, happen
    when training starts, after the trainer has checked the whole run (or when
    :func:`commit_logger_dir` is called). A run that fails its checks leaves the file
    system as it was; the messages logged until then still reach ``log.log`` when the
    directory is committed.

    :param action: what to do if ``dirname`` exists and is not empty: ``"k"`` keep (resume
        into it), ``"d"`` delete it, ``"b"`` back it up (rename with a time suffix) and start
        empty, ``"n"`` use a new directory ``dirname + time suffix``, ``"q"`` quit (raises).
        ``None`` asks on the terminal, and raises ``FileExistsError`` when there is none.
    """
    global LOG_DIR, _PENDING
    dirname = os.path.normpath(os.fspath(dirname))
    if action is not None and action not in ("k", "d", "b", "n", "q"):
        raise ValueError(f"set_logger_dir(action={action!r}): action must be one of 'k' (keep), 'd' (delete), "
                         "'b' (backup), 'n' (new), 'q' (quit), or None to ask")
    if os.path.exists(dirname) and not os.path.isdir(dirname):
        raise NotADirectoryError(f"set_logger_dir: {dirname} exists and is not a directory; choose another path "
                                 "or remove the file")
    _check_can_create(dirname)
    if _FILE_HANDLER is not None:
        _logger.removeHandler(_FILE_HANDLER)
        _FILE_HANDLER.close()
        globals()["_FILE_HANDLER"] = None
    _drop_pending()
    act: str | None = None
    target = dirname
    if action == "d":
        _check_deletable(dirname)
    if _dir_nonempty(dirname):
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
        if act == "n":
            target = dirname + _get_time_str()
        elif act not in ("k", "d", "b"):
            raise FileExistsError(f"log directory {dirname} exists and set_logger_dir was told to quit "
                                  f"(action {act!r})")
        if act == "d":
            _check_deletable(dirname)
    lock = None
    if target == dirname and os.path.isdir(dirname):
        # another training there is refused now, before anything reads or changes the directory
        from trainbus.utils.rundirlock import RunDirLock

        lock = RunDirLock(dirname).acquire()
    LOG_DIR = target
    _PENDING = _PendingDir(dirname, target, act)
    _PENDING.lock = lock
    _logger.addHandler(_PENDING.buffer)
    info("Argv: " + " ".join(sys.argv))


def _check_can_create(dirname: str) -> None:
    """Raise now (nothing done yet) if ``dirname`` could not be created or written when
    training starts: a file in its path, or a nearest existing directory that is not writable."""
    d = os.path.abspath(dirname)
    while not os.path.exists(d):
        parent = os.path.dirname(d)
        if parent == d:
            return
        d = parent
    if not os.path.isdir(d):
        raise NotADirectoryError(f"set_logger_dir: {d} is a file, so the log directory {dirname} cannot be created; "
                                 "choose another path")
    if not os.access(d, os.W_OK | os.X_OK):
        raise PermissionError(f"set_logger_dir: {d} is not writable, so the log directory {dirname} cannot be "
                              "created or written; choose a writable place")


def pending_logger_dir_action() -> str | None:
    """The action ``set_logger_dir`` chose that is not carried out yet: ``"k"``, ``"d"``,
    ``"b"`` or ``"n"``; ``"create"`` when the directory is new or empty; None when nothing is
    pending. With ``"d"`` or ``"b"`` pending, what the directory holds now is not the run's:
    resuming code must not read it."""
    if _PENDING is None:
        return None
    return _PENDING.action or "create"


def commit_logger_dir() -> str | None:
    """Carry out the action chosen by ``set_logger_dir`` (delete, back up, create the
    directory), start ``log.log`` with the messages logged since, and return the directory.
    Trainers call it when training starts, after every check passed; calling it again, or
    with no log directory set, does nothing (returns ``get_logger_dir()``)."""
    global _PENDING
    pending = _PENDING
    if pending is None:
        return LOG_DIR
    dirname, act = pending.requested, pending.action
    # the directory may have changed since it was chosen: act on what is there now
    if _dir_nonempty(dirname):
        # the directory itself stays (this run holds its lock): its content goes
        content = [os.path.join(dirname, n) for n in os.listdir(dirname)]
        if act == "b":
            backup_name = dirname + _get_time_str()
            os.makedirs(backup_name)
            for p in content:
                shutil.move(p, os.path.join(backup_name, os.path.basename(p)))
            info(f"Directory '{dirname}' backuped to '{backup_name}'")
        elif act == "d":
            for p in content:
                if os.path.isdir(p) and not os.path.islink(p):
                    shutil.rmtree(p)
                else:
                    os.remove(p)
            info(f"Deleted the old content of the log directory '{dirname}'.")
        elif act == "n":
            info(f"Use a new log directory {pending.dirname}")
    try:
        os.makedirs(pending.dirname)
    except OSError as e:
        if e.errno != errno.EEXIST:
            raise type(e)(e.errno, f"cannot create the log directory {pending.dirname} ({e.strerror}); choose a "
                                   "writable place with set_logger_dir(dir, ...) or logdir = ...") from e
    try:
        _set_file(os.path.join(pending.dirname, LOG_FILENAME))
    except OSError as e:
        raise type(e)(e.errno, f"cannot write {os.path.join(pending.dirname, LOG_FILENAME)} ({e.strerror}); the log "
                               "directory must be writable") from e
    _logger.removeHandler(pending.buffer)
    _PENDING = None
    assert _FILE_HANDLER is not None
    for record in pending.buffer.records:
        if record.levelno >= _FILE_HANDLER.level:
            _FILE_HANDLER.handle(record)
    return pending.dirname


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
    _PROTECTED.clear()
    _drop_pending()
    if _FILE_HANDLER is not None:
        _logger.removeHandler(_FILE_HANDLER)
        _FILE_HANDLER.close()
        _FILE_HANDLER = None


