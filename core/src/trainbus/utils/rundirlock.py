"""The lock that gives a run directory to one training at a time (:class:`RunDirLock`), and the
refusal a second training gets (:class:`RunDirBusyError`). Used by ``logger.set_logger_dir`` and
by the trainer through :mod:`trainbus.checkpoint`; it imports nothing of trainbus, only the
standard library, so the logger can use it."""

from __future__ import annotations

import errno
import logging
import os
import sys
import time
from typing import Any

__all__ = ["LOCK_FILE", "BUSY_EXIT_CODE", "RunDirBusyError", "RunDirLock"]

#: where a training describes itself while it holds its run directory's lock (a dot file)
LOCK_FILE = ".trainbus.lock"

#: exit status of a process refused because another training holds its run directory (EX_TEMPFAIL)
BUSY_EXIT_CODE = 75


class RunDirBusyError(SystemExit):
    """Another training holds the run directory ``directory`` (``holder`` says which process).

    Like ``TrainingInterrupted`` it is a ``SystemExit``: a script that does not catch it ends
    with status 75 and ONE line on stderr naming the directory and the holder (the full traceback
    too with ``TRAINBUS_DEBUG=1``); nothing in the directory was changed."""

    def __init__(self, directory: str, holder: str) -> None:
        self.directory = directory
        self.holder = holder
        self.exit_code = BUSY_EXIT_CODE
        self._reported = False
        super().__init__(BUSY_EXIT_CODE)

    @property
    def message(self) -> str:
        return (f"the run directory {self.directory} is in use by another training ({self.holder}); wait for it "
                "to end, or give this run another directory (logger.set_logger_dir / logdir = ...). Nothing in it "
                "was changed")

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> Any:
        return (type(self), (self.directory, self.holder))

    @property  # type: ignore[override]
    def code(self) -> int:  # read by Python exactly when it ends the interpreter with this exception
        self.report()
        return self.exit_code

    @code.setter
    def code(self, value: Any) -> None:
        pass

    def report(self, file: Any = None) -> None:
        """Print the one line on ``file`` (default stderr), once."""
        if self._reported:
            return
        self._reported = True
        out = file if file is not None else sys.stderr
        if os.environ.get("TRAINBUS_DEBUG", "").strip().lower() not in ("", "0", "false", "no", "off"):
            import traceback

            traceback.print_exception(type(self), self, self.__traceback__, file=out)
        print(f"trainbus: {self.message}", file=out)


class RunDirLock:
    """An OS lock on a run directory, held by one training at a time and released when the lock
    is released or the process ends (a crash and SIGKILL included).

    On POSIX systems the directory itself is locked (``flock`` on the directory, owned by the
    open descriptor, so a second training in the same process is refused too): taking the lock
    creates no file. Once the training starts writing there, :meth:`describe_holder` records who
    holds it (pid, host, command) in ``.trainbus.lock`` for the message the next one gets."""

    def __init__(self, directory: str) -> None:
        self.directory = os.path.abspath(directory)
        self.path = os.path.join(self.directory, LOCK_FILE)
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> "RunDirLock":
        if self._fd is not None:
            return self
        fd = _open_for_lock(self)
        if fd is None:
            return self
        try:
            _lock_fd(fd)
        except BlockingIOError:
            os.close(fd)
            raise RunDirBusyError(self.directory, self._holder()) from None
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):  # a file system without locks
                logging.getLogger("trainbus").warning(f"Cannot lock the run directory {self.directory} ({e.strerror}); a second training "
                               "there would not be refused.")
                return self
            raise
        self._fd = fd
        return self

    def describe_holder(self) -> None:
        """Write who holds the lock into ``.trainbus.lock`` (best effort)."""
        if self._fd is None:
            return
        import socket

        cmd = " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(sys.argv))[:300]
        info = f"pid {os.getpid()} on {socket.gethostname()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}: {cmd}\n"
        import tempfile

        try:  # written whole or not at all: a temporary file renamed into place
            fd, tmp = tempfile.mkstemp(prefix=LOCK_FILE + ".", dir=self.directory)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as f:
                    f.write(info)
                os.chmod(tmp, 0o644)
                os.replace(tmp, self.path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass  # the description is a courtesy; the lock is what counts

    def _holder(self) -> str:
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                text = f.read(400).strip()
        except OSError:
            text = ""
        return text or "a process that has not started training there yet"

    def release(self) -> None:
        """Release the lock and remove the description this process wrote (one left by a process
        that was killed stays until the next training replaces it: the lock, not the file, counts)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                with open(self.path, encoding="utf-8", errors="replace") as f:
                    mine = f.read(64).startswith(f"pid {os.getpid()} ")
                if mine:
                    os.unlink(self.path)
            except OSError:
                pass
            try:
                _unlock_fd(fd)
            finally:
                os.close(fd)

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


if os.name == "nt":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _open_for_lock(lock: RunDirLock) -> int | None:
        try:
            return os.open(lock.path + ".lck", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            return None

    def _lock_fd(fd: int) -> None:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError as e:
            raise BlockingIOError(str(e)) from None

    def _unlock_fd(fd: int) -> None:
        try:
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        except OSError:
            pass
else:
    import fcntl

    def _open_for_lock(lock: RunDirLock) -> int | None:
        return os.open(lock.directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))

    def _lock_fd(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    def _unlock_fd(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
