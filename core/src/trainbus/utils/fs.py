"""File-system helpers: crash-safe writes, ``mkdir_p``, ``download`` and the dataset directory.

Crash-safe writes (``atomic_write_bytes``/``atomic_write_text``): a reader sees the old content or
the new, never a torn file. ``download`` writes to a temporary name and renames it into place only
when the whole body arrived, so an interrupted download never leaves a file that looks complete.
"""

from __future__ import annotations

import errno
import os
import tempfile
import threading
import urllib.error
import urllib.request
from contextlib import contextmanager
from typing import Iterator

__all__ = ["mkdir_p", "download", "recursive_walk", "get_dataset_path", "normpath", "DownloadError",
           "DATASET_ENV_VARS", "atomic_write_bytes", "atomic_write_text", "fsync_dir", "current_umask",
           "default_file_mode"]

#: Environment variables naming the dataset directory, in the order they are consulted.
DATASET_ENV_VARS = ("TRAINBUS_DATASET", "TENSORPACK_DATASET")

_warned_default_dir = False


class DownloadError(OSError):
    """A download failed (network unreachable, HTTP error, empty or short body).

    ``url`` and ``path`` name what was being fetched and where it should have gone.
    """

    def __init__(self, message: str, url: str, path: str) -> None:
        super().__init__(message)
        self.url = url
        self.path = path


def fsync_dir(dirname: str) -> None:
    """Make a rename inside ``dirname`` durable."""
    try:
        fd = os.open(dirname or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


_umask_lock = threading.Lock()


def current_umask() -> int:
    """The process umask, read without changing it where the system allows it (Linux reads
    ``/proc/self/status``); elsewhere it is set and restored at once under a lock."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _umask_lock:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def default_file_mode() -> int:
    """The permissions ``open(path, "w")`` gives a new file: ``0o666`` less the umask."""
    return 0o666 & ~current_umask()


@contextmanager
def _replacing(path: str, suffix: str) -> Iterator[int]:
    """A new temporary file next to ``path``, as an OS file descriptor for the block to write; it has
    the permissions a plain ``open(path, "w")`` would give. When the block ends normally the file
    replaces ``path`` and the directory entry is synced; when it raises, the file is removed."""
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=suffix, dir=d)
    try:
        os.fchmod(fd, default_file_mode())
        yield fd
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    fsync_dir(d)


def atomic_write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: temporary file in the same directory, fsync, rename.

    The file gets the permissions a plain ``open(path, "w")`` would give it (``0o666`` less the
    process umask), not the owner-only mode of the temporary file.
    """
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with _replacing(path, ".tmp") as fd, os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def atomic_write_text(path: str, text: str) -> None:
    """``atomic_write_bytes`` of ``text`` encoded as UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


def mkdir_p(dirname: str) -> None:
    """Create ``dirname`` and its parents, like ``mkdir -p``; nothing happens if it exists.

    Args:
        dirname: the directory. ``""`` means the current directory (nothing to do).
    """
    if dirname is None:
        raise ValueError("mkdir_p(dirname): dirname is None; pass the directory to create")
    if dirname == "" or os.path.isdir(dirname):
        return
    try:
        os.makedirs(dirname)
    except OSError as e:
        if e.errno != errno.EEXIST or not os.path.isdir(dirname):
            raise


def _env_hint() -> str:
    return " or ".join("$" + v for v in DATASET_ENV_VARS)


def download(url: str, dir: str, filename: str | None = None, expect_size: int | None = None,
             timeout: float = 30.0) -> str:
    """Download ``url`` into the directory ``dir`` and return the path of the file.

    The name is the last component of the URL unless ``filename`` is given. When the file already
    exists with size ``expect_size``, nothing is downloaded; an existing file of another size (or
    when no size is expected) is replaced by a new download. The body goes to a temporary file in
    ``dir`` that is renamed into place once complete, so a failed or interrupted download leaves
    nothing under the final name.

    Args:
        url: what to download (any scheme ``urllib`` opens: http, https, ftp, file).
        dir: the directory to put the file in (created when missing).
        filename: the file name inside ``dir``; defaults to the URL's last component.
        expect_size: the size in bytes the complete file has, when known. A download of another
            size is logged as an error (the upstream may have changed the file) and kept.
        timeout: seconds to wait for the server to answer or send more bytes.

    Raises:
        DownloadError: when the server is unreachable, answers with an error, or sends an empty or
            short body. The message names the URL, the file it should have become, and how to put
            the file there by hand.
    """
    from trainbus.utils import logger

    mkdir_p(dir)
    if filename is None:
        filename = url.rstrip("/").split("/")[-1]
        if not filename:
            raise ValueError(f"download({url!r}): cannot tell a file name from the URL; pass filename=")
    fpath = os.path.join(dir, filename)

    if os.path.isfile(fpath):
        if expect_size is not None and os.stat(fpath).st_size == expect_size:
            logger.info(f"File {fpath} exists with the expected size; skip download.")
            return fpath
        logger.warn(f"File {fpath} exists; it will be replaced by a new download from {url}.")

    def fail(reason: str) -> DownloadError:
        return DownloadError(
            f"Failed to download {url} to {fpath}: {reason}. Download it by hand (e.g. with a browser, wget "
            f"or curl on a machine with network access) and put it at {fpath}; datasets are looked for under "
            f"{_env_hint()} (default ~/tensorpack_data).", url, fpath)

    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency of the dataset readers
        tqdm = None

    size = 0
    with _replacing(fpath, ".part") as fd:
        with os.fdopen(fd, "wb") as out:
            try:
                resp = urllib.request.urlopen(url, timeout=timeout)
            except urllib.error.HTTPError as e:
                raise fail(f"HTTP {e.code} {e.reason}") from e
            except (urllib.error.URLError, OSError, ValueError) as e:
                reason = getattr(e, "reason", e)
                raise fail(f"the server is not reachable ({reason})") from e
            with resp:
                total = resp.headers.get("Content-Length") if hasattr(resp, "headers") else None
                total = int(total) if total and total.isdigit() else None
                bar = tqdm(total=total, unit="B", unit_scale=True, miniters=1, desc=filename,
                           disable=None) if tqdm is not None else None
                try:
                    while True:
                        try:
                            chunk = resp.read(1 << 20)
                        except OSError as e:
                            raise fail(f"the connection broke after {size} bytes ({e})") from e
                        if not chunk:
                            break
                        out.write(chunk)
                        size += len(chunk)
                        if bar is not None:
                            bar.update(len(chunk))
                finally:
                    if bar is not None:
                        bar.close()
            out.flush()
            os.fsync(out.fileno())
        if size == 0:
            raise fail("the server sent an empty file")
        if total is not None and size != total:
            raise fail(f"the server announced {total} bytes but sent {size}")

    if expect_size is not None and size != expect_size:
        logger.error(f"File downloaded from {url} has {size} bytes, not the expected {expect_size}: it may be "
                     f"broken, or the upstream file changed.")
    logger.info(f"Successfully downloaded {fpath}: {size} bytes.")
    return fpath


def recursive_walk(rootdir: str) -> Iterator[str]:
    """Yield the path of every file under ``rootdir``, recursively."""
    for root, _dirs, files in os.walk(rootdir):
        for f in files:
            yield os.path.join(root, f)


def get_dataset_path(*args: str) -> str:
    """The path of a dataset file or directory: ``args`` joined under the dataset directory.

    The dataset directory is ``$TRAINBUS_DATASET`` if set, else ``$TENSORPACK_DATASET`` (so data a
    tensorpack setup already has is found), else ``~/tensorpack_data``, created when missing.

    Raises:
        NotADirectoryError: when the environment variable names something that is not a directory.
    """
    global _warned_default_dir
    from trainbus.utils import logger

    for var in DATASET_ENV_VARS:
        d = os.environ.get(var)
        if d:
            d = os.path.expanduser(d)
            if not os.path.isdir(d):
                raise NotADirectoryError(
                    f"${var}={d!r} is not a directory. Create it (mkdir -p {d}) or point ${var} at the "
                    f"directory that holds your datasets.")
            return os.path.join(d, *args)
    d = os.path.join(os.path.expanduser("~"), "tensorpack_data")
    if not _warned_default_dir:
        _warned_default_dir = True
        logger.warn(f"Neither {_env_hint()} is set; using {d} for datasets.")
    if not os.path.isdir(d):
        mkdir_p(d)
        logger.info(f"Created the directory {d}.")
    return os.path.join(d, *args)


def normpath(path: str) -> str:
    """``os.path.normpath``, except for remote paths (containing ``://``), which are returned as they are."""
    return path if "://" in path else os.path.normpath(path)
