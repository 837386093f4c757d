"""The entry-point listing of an environment, kept on disk between processes.

Every trainbus process reads which installed distributions declare trainbus entry points
(:func:`trainbus.bus.registry.scan`). Listing the folders on ``sys.path`` and opening every
distribution's ``entry_points.txt`` costs several milliseconds in an environment of a hundred
distributions, on every start. What a listing found is therefore written to a small JSON file
(one per ``sys.path``), and the next process uses it instead of listing, **only while nothing it
depends on changed**:

* every folder on ``sys.path`` has the modification time, inode and link count it had before that
  listing (installing, upgrading or removing a distribution adds or removes a ``.dist-info``
  folder there, which changes the folder's time and, on most file systems, its link count), and
  no entry appeared, disappeared or became a file;
* the ``entry_points.txt`` of every distribution found has the same time, size and inode.

A folder modified less than two seconds before the listing is not trusted (a change in the same
clock tick would not show in its time): such a listing is used by its own process and not written.

The file lives in ``$TRAINBUS_CACHE_DIR``, else ``$XDG_CACHE_HOME/trainbus``, else
``~/.cache/trainbus``, beside at most 63 others (the least recently written go);
``TRAINBUS_METADATA_CACHE=0`` turns it off. A cache that cannot be read or
written (read-only home, a full disk, a damaged file) is ignored: the folders are listed as
without it. ``registry.clear_cache()`` makes the next scan list the folders whatever the file says.
"""

from __future__ import annotations

import os
import stat
import sys

#: the layout of the file; another layout is ignored (and replaced)
FORMAT = 1
#: a folder changed less than this many nanoseconds before the listing is not trusted
_SETTLE_NS = 2_000_000_000
#: the most cache files kept (one per ``sys.path``: a script's folder is on it); writing one more
#: removes the least recently written
MAX_FILES = 64


def cache_dir() -> str | None:
    """The folder of the cache files, or None when the cache is turned off."""
    if os.environ.get("TRAINBUS_METADATA_CACHE", "").strip().lower() in ("0", "false", "no", "off"):
        return None
    chosen = os.environ.get("TRAINBUS_CACHE_DIR")
    if chosen:
        return chosen
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "trainbus")


def _folder_stamp(path: str) -> list[int] | None | bool:
    """[mtime_ns, inode, device, links] of a folder (a folder's link count grows with each
    subfolder on most file systems: a ``.dist-info`` added or removed shows there even where the
    time was set back); None if there is nothing there; False if it is a file or cannot be looked
    at (then no listing of this ``sys.path`` is cached)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    return [st.st_mtime_ns, st.st_ino, st.st_dev, st.st_nlink]


def _file_stamp(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino]


class ListingCache:
    """The cache file of one ``sys.path`` (``entries``)."""

    def __init__(self, entries: list[str]) -> None:
        import zlib

        #: the entries as absolute paths: what the file is for (the working directory counts)
        self.folders = [os.path.abspath(e or ".") for e in entries]
        folder = cache_dir()
        key = f"{sys.version_info[0]}.{sys.version_info[1]}\0" + "\0".join(self.folders)
        self.path = (os.path.join(folder, f"entry-points-{zlib.crc32(key.encode('utf-8', 'surrogateescape')):08x}.json")
                     if folder else None)

    def _ep_file(self, index: int, child: str) -> str:
        """The ``entry_points.txt`` of distribution folder ``child`` in ``sys.path`` entry ``index``."""
        return os.path.join(self.folders[index], child, "entry_points.txt")

    def load(self) -> list[tuple[int, str, str]] | None:
        """What an earlier listing of this ``sys.path`` found, if nothing it depends on changed."""
        if self.path is None:
            return None
        import json

        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            if data.get("format") != FORMAT or data.get("folders") != self.folders:
                return None
            for folder, stamp in zip(self.folders, data["stamps"]):
                if _folder_stamp(folder) != stamp:
                    return None
            found = []
            for index, child, text, ep_stamp in data["found"]:
                if _file_stamp(self._ep_file(index, child)) != ep_stamp:
                    return None
                found.append((index, child, text))
            return found
        except (OSError, ValueError, TypeError, KeyError, IndexError):
            return None  # no file yet, or one damaged or of another layout: list the folders

    def stamp_folders(self) -> list | None:
        """The stamps of the folders, taken before they are listed; None if one of them is a file
        (a zip archive: the listing leaves such a ``sys.path`` to ``importlib_metadata``)."""
        stamps = [_folder_stamp(folder) for folder in self.folders]
        return None if any(s is False for s in stamps) else stamps

    def store(self, stamps: list, found: list[tuple[int, str, str]]) -> None:
        """Write what the listing found, unless a folder changed too recently to be trusted or the
        cache is off. Failing to write is not an error: the next process lists the folders."""
        if self.path is None:
            return
        import time

        settled = time.time_ns() - _SETTLE_NS
        if any(s is not None and s[0] > settled for s in stamps):
            return
        entries = []
        for index, child, text in found:
            ep_stamp = _file_stamp(self._ep_file(index, child))
            if ep_stamp is None or ep_stamp[0] > settled:
                return
            entries.append([index, child, text, ep_stamp])
        import json

        data = {"format": FORMAT, "folders": self.folders, "stamps": stamps, "found": entries}
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(data, f)
            os.replace(tmp, self.path)
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            return
        _prune(os.path.dirname(self.path))


def _prune(folder: str) -> None:
    """Keep the :data:`MAX_FILES` most recently written cache files of ``folder``."""
    try:
        names = [n for n in os.listdir(folder) if n.startswith("entry-points-") and n.endswith(".json")]
        if len(names) <= MAX_FILES:
            return
        dated = sorted((os.stat(os.path.join(folder, n)).st_mtime_ns, n) for n in names)
        for _, name in dated[:len(names) - MAX_FILES]:
            os.unlink(os.path.join(folder, name))
    except OSError:
        pass  # another process pruned meanwhile, or the folder went away: nothing to keep tidy

