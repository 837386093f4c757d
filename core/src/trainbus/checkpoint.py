"""The one owner of checkpoints and the run directory.

Everything that reads or writes a checkpoint directory goes through this module:

* the ``checkpoint`` list (TensorFlow's ``CheckpointState`` in text form): :func:`read_listing`
  resolves every entry and confines it to the directory. An entry naming a file of another
  directory (an absolute path, ``../``: a copied or moved run) is used from this directory when
  a copy of it is here, and is otherwise *foreign*: reported, never deleted, never resumed from;
* the global step in a checkpoint prefix (:func:`step_of`), the files of a checkpoint
  (:func:`checkpoint_files`), removing one (:func:`remove_checkpoint`, which refuses any path
  outside the directory);
* the callbacks' state beside each checkpoint (``<prefix>.trainbus.json``), written when every
  callback has handled the triggers of the step the checkpoint belongs to (:func:`defer_commit`,
  :func:`flush_commits`), never in the middle of them;
* the lock that gives a run directory to one training at a time (:class:`RunDirLock`);
* the write-failure policy (:func:`report_write_failure`): a full, read-only or failing disk is
  one log line naming the file and the OS error, training goes on, the previous file stays.

The core finds checkpoint writers through the :class:`CheckpointWriter` protocol, never by a
class name. Importing this module imports no TensorFlow.
"""

from __future__ import annotations

import errno
import glob
import json
import math
import os
import re
import threading
from typing import Any, Callable, Iterator, Protocol, runtime_checkable

from trainbus.utils import logger
from trainbus.utils.fs import atomic_write_text

__all__ = [
    "STATE_FILE", "SUFFIX", "LOCK_FILE", "BUSY_EXIT_CODE", "DamagedCheckpointError", "RunDirBusyError", "CheckpointWriter",
    "Entry", "Listing", "step_of", "checkpoint_files", "state_file", "write_callback_states",
    "read_callback_states", "read_listing", "read_checkpoint_list", "write_listing", "latest_checkpoint",
    "remove_checkpoint", "is_inside", "callback_members", "find_writers", "newest_checkpoint", "defer_commit", "flush_commits",
    "RunDirLock", "lock_run_dir", "release_run_dirs", "write_error_text", "report_write_failure",
    "write_succeeded", "dumps_strict", "loads_strict",
]

#: name of TensorFlow's checkpoint list in a checkpoint directory
STATE_FILE = "checkpoint"
#: suffix of the callback-state file beside a checkpoint prefix
SUFFIX = ".trainbus.json"

_STEP_RE = re.compile(r"-(\d+)$")
_DATA_RE = re.compile(r"^\.data-\d+-of-\d+$")

_DEFAULT_ADVICE = ("Resume from an older checkpoint (AutoResumeTrainConfig and `trainbus train` use the newest one "
                   "that reads completely by themselves), restore the file from a backup, or move the damaged "
                   "checkpoint's files away so it is no longer offered")


class DamagedCheckpointError(ValueError):
    """A checkpoint cannot be read completely: one of its files (index, data shard, callback-state
    file, or the ``checkpoint`` list naming it) is missing, truncated or fails its checksum.

    ``checkpoint`` is the checkpoint prefix (or directory), ``file`` the damaged file, ``problem``
    what is wrong with it.
    """

    def __init__(self, checkpoint: str, file: str, problem: str, advice: str | None = None) -> None:
        self.checkpoint = checkpoint
        self.file = file
        self.problem = problem
        super().__init__(f"checkpoint {checkpoint} is damaged: {file} {problem}. {advice or _DEFAULT_ADVICE}.")


# ---------------------------------------------------------------------------------------- names
def step_of(prefix: str | None) -> int | None:
    """The global step in a checkpoint prefix's name (``model-120`` -> 120), or None."""
    m = _STEP_RE.search(os.fspath(prefix)) if prefix else None
    return int(m.group(1)) if m else None


def checkpoint_files(prefix: str) -> list[str]:
    """The data shards and the index file of the checkpoint ``prefix`` that exist (index last)."""
    files = sorted(f for f in glob.glob(glob.escape(prefix) + ".data-*-of-*") if _DATA_RE.search(f[len(prefix):]))
    if os.path.isfile(prefix + ".index"):
        files.append(prefix + ".index")
    return files


def is_inside(directory: str, path: str) -> bool:
    """Whether the file ``path`` lies directly in ``directory`` (links resolved)."""
    return os.path.realpath(os.path.dirname(os.path.abspath(path))) == os.path.realpath(directory)


# ------------------------------------------------------------------------------- strict JSON
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _finite_or_name(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    if isinstance(x, dict):
        return {k: _finite_or_name(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite_or_name(v) for v in x]
    return x


def dumps_strict(obj: Any, **kwargs: Any) -> str:
    """JSON that every strict parser reads: a NaN or infinite float is written as the string
    ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` (:func:`loads_strict` gives floats back)."""
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError:
        return json.dumps(_finite_or_name(obj), allow_nan=False, **kwargs)


def _names_to_floats(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: (_NONFINITE[v] if isinstance(v, str) and v in _NONFINITE else _names_to_floats(v))
                for k, v in x.items()}
    if isinstance(x, list):
        return [_names_to_floats(v) for v in x]
    return x


def loads_strict(text: str | bytes) -> Any:
    """Parse JSON written by :func:`dumps_strict` (or by older versions, bare ``NaN`` included);
    the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` as values of objects become floats."""
    return _names_to_floats(json.loads(text))


# -------------------------------------------------------------------------- callback state
def state_file(checkpoint_prefix: str) -> str:
    """The callback-state file of the checkpoint ``checkpoint_prefix``."""
    return str(checkpoint_prefix) + SUFFIX


def write_callback_states(checkpoint_prefix: str, states: dict[str, Any]) -> str:
    """Write ``states`` for the checkpoint ``checkpoint_prefix`` atomically; returns the file name."""
    path = state_file(checkpoint_prefix)
    atomic_write_text(path, dumps_strict(states, indent=1, sort_keys=True))
    return path


def read_callback_states(checkpoint_prefix: str) -> dict[str, Any]:
    """The states saved with ``checkpoint_prefix`` ({} if no state file exists).

    Raises ``DamagedCheckpointError`` when the file exists but is empty, truncated or not a JSON
    object: a resumed run never silently goes on without the state it was meant to have."""
    path = state_file(checkpoint_prefix)
    if not os.path.isfile(path):
        return {}
    advice = ("Resume from an older checkpoint, or delete this file to resume from these weights with every "
              "callback starting fresh")
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise DamagedCheckpointError(str(checkpoint_prefix), path, f"cannot be read ({e.strerror or e})",
                                     advice) from None
    if not raw.strip():
        raise DamagedCheckpointError(str(checkpoint_prefix), path, "is empty (truncated)", advice)
    try:
        data = loads_strict(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DamagedCheckpointError(str(checkpoint_prefix), path, f"is truncated or not valid JSON ({e})",
                                     advice) from None
    if not isinstance(data, dict):
        raise DamagedCheckpointError(str(checkpoint_prefix), path,
                                     f"does not hold a JSON object but a {type(data).__name__}", advice)
    return data


# --------------------------------------------------------------------------- the list
class _Record:
    """Plain records (a dataclass costs more to define than this module's whole import): the
    fields named in ``__slots__``, compared and shown by them."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self.__slots__)

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass is

    def __repr__(self) -> str:
        fields = ", ".join(f"{f}={getattr(self, f)!r}" for f in self.__slots__)
        return f"{type(self).__name__}({fields})"


class Entry(_Record):
    """One checkpoint of a ``checkpoint`` list.

    ``prefix`` is where the checkpoint is read from (absolute); ``listed`` the path as the list
    spells it; ``local`` whether the checkpoint lies in the listing's directory (entries naming
    another directory whose checkpoint has a copy here are relocated to the copy, ``relocated``)."""

    __slots__ = ("prefix", "listed", "timestamp", "local", "relocated")

    def __init__(self, prefix: str, listed: str, timestamp: float | None = None, local: bool = True,
                 relocated: bool = False) -> None:
        self.prefix = prefix
        self.listed = listed
        self.timestamp = timestamp
        self.local = local
        self.relocated = relocated

    @property
    def step(self) -> int | None:
        return step_of(self.prefix)


class Listing(_Record):
    """The ``checkpoint`` list of a directory, resolved: ``entries`` oldest first (the latest
    last); ``foreign`` the entries naming checkpoints outside the directory, left alone."""

    __slots__ = ("directory", "entries", "foreign", "last_preserved")

    def __init__(self, directory: str, entries: list[Entry] | None = None, foreign: list[Entry] | None = None,
                 last_preserved: float = 0.0) -> None:
        self.directory = directory
        self.entries = [] if entries is None else entries
        self.foreign = [] if foreign is None else foreign
        self.last_preserved = last_preserved

    @property
    def latest(self) -> Entry | None:
        return self.entries[-1] if self.entries else None


def _resolve(directory: str, listed: str) -> Entry:
    full = listed if os.path.isabs(listed) else os.path.join(directory, listed)
    full = os.path.normpath(full)
    if is_inside(directory, full):
        return Entry(os.path.join(os.path.abspath(directory), os.path.basename(full)), listed)
    here = os.path.join(os.path.abspath(directory), os.path.basename(full))
    if os.path.isfile(here + ".index"):
        return Entry(here, listed, relocated=True)
    return Entry(os.path.abspath(full), listed, local=False)


_reported_foreign: set[tuple[str, str]] = set()


def read_listing(directory: str) -> Listing | None:
    """The resolved ``checkpoint`` list of ``directory``; None if it has none.

    Raises ``DamagedCheckpointError`` when the list is empty, truncated or cannot be parsed.
    Whether the named checkpoints exist is not checked. Foreign entries are reported once per
    process in the log."""
    path = os.path.join(directory, STATE_FILE)
    if not os.path.isfile(path):
        return None
    from google.protobuf import text_format
    from tensorflow.python.checkpoint.checkpoint_management import CheckpointState

    advice = ("Delete it (and resume from a checkpoint prefix given explicitly, or let AutoResumeTrainConfig "
              "find the newest intact checkpoint by its file names), or restore it from a backup")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        state = text_format.Parse(text, CheckpointState())
    except (OSError, UnicodeDecodeError, text_format.ParseError) as e:
        raise DamagedCheckpointError(directory, path, f"is truncated or not a checkpoint list ({e})", advice) from None
    if not state.model_checkpoint_path:
        raise DamagedCheckpointError(directory, path, "names no checkpoint (empty or truncated)", advice)
    stamps = list(state.all_model_checkpoint_timestamps)
    listed = list(state.all_model_checkpoint_paths)
    pairs = [(p, stamps[i] if i < len(stamps) else None) for i, p in enumerate(listed)
             if p != state.model_checkpoint_path]
    latest_stamp = stamps[listed.index(state.model_checkpoint_path)] \
        if state.model_checkpoint_path in listed and listed.index(state.model_checkpoint_path) < len(stamps) else None
    pairs.append((state.model_checkpoint_path, latest_stamp))
    out = Listing(os.path.abspath(directory), last_preserved=state.last_preserved_timestamp)
    seen: set[str] = set()
    for p, t in pairs:
        e = _resolve(directory, p)
        e.timestamp = t
        if not e.local:
            out.foreign.append(e)
            continue
        if e.prefix in seen:  # the same checkpoint under two spellings: once, at its newest place
            out.entries = [x for x in out.entries if x.prefix != e.prefix]
        seen.add(e.prefix)
        out.entries.append(e)
    for e in out.foreign:
        key = (out.directory, e.listed)
        if key not in _reported_foreign:
            _reported_foreign.add(key)
            logger.warning(f"The checkpoint list {path} names {e.listed}, which is outside that directory and has "
                           "no copy in it (a copied or moved run directory?); it is left alone: never rotated away "
                           "nor resumed from.")
    return out


def read_checkpoint_list(directory: str) -> list[str] | None:
    """The checkpoint prefixes of ``directory``'s list that are in the directory, oldest first
    and the latest last, as absolute paths; None if there is no list (see :func:`read_listing`)."""
    listing = read_listing(directory)
    if listing is None:
        return None
    return [e.prefix for e in listing.entries]


def write_listing(directory: str, entries: list[tuple[str, float]], last_preserved: float = 0.0) -> None:
    """Replace the ``checkpoint`` list of ``directory`` atomically: ``entries`` are ``(prefix,
    timestamp)`` oldest first, the last one the latest. Prefixes in the directory are written by
    their base name, so a copied or moved directory stays readable."""
    from google.protobuf import text_format
    from tensorflow.python.checkpoint.checkpoint_management import CheckpointState

    if not entries:
        raise ValueError("write_listing needs at least one checkpoint")

    def rel(p: str) -> str:
        return os.path.basename(p) if is_inside(directory, p) else p

    state = CheckpointState(
        model_checkpoint_path=rel(entries[-1][0]),
        all_model_checkpoint_paths=[rel(p) for p, _ in entries],
        all_model_checkpoint_timestamps=[t for _, t in entries],
        last_preserved_timestamp=last_preserved,
    )
    atomic_write_text(os.path.join(directory, STATE_FILE), text_format.MessageToString(state))


def latest_checkpoint(directory: str) -> tuple[str | None, int | None]:
    """``(prefix, step)`` of the newest checkpoint of ``directory``'s list whose index exists;
    ``(None, None)`` when there is none or the list cannot be read."""
    try:
        listing = read_listing(directory)
    except DamagedCheckpointError:
        return None, None
    if listing is None:
        return None, None
    for e in reversed(listing.entries):
        if os.path.isfile(e.prefix + ".index"):
            return e.prefix, e.step
    return None, None


def remove_checkpoint(directory: str, prefix: str, who: str = "trainbus") -> bool:
    """Delete the files of the checkpoint ``prefix`` (data, index, callback state). Refuses, with
    a warning, a prefix outside ``directory``. A file that cannot be deleted (read-only or failing
    disk) is reported by the write-failure policy; returns whether everything was deleted."""
    if not is_inside(directory, prefix):
        logger.warning(f"{who}: not deleting {prefix}: it is outside the checkpoint directory {directory}.")
        return False
    ok = True
    for f in checkpoint_files(prefix) + [state_file(prefix)]:
        try:
            os.remove(f)
        except FileNotFoundError:
            pass
        except OSError as e:
            ok = False
            report_write_failure(who, f, e, "it stays on disk; training goes on", action="delete")
            break
    return ok


# ----------------------------------------------------------------- writers, found by protocol
@runtime_checkable
class CheckpointWriter(Protocol):
    """What the core needs of a callback that writes checkpoints (``ModelSaver`` is one): the
    directory it writes to, and the newest checkpoint it wrote in this run (written and maybe not
    yet listed: see :func:`defer_commit`), or the newest its directory lists."""

    checkpoint_dir: str | None

    def latest(self) -> str | None: ...


def callback_members(cb: Any) -> Iterator[Any]:
    """``cb`` and every callback it wraps (a proxy's ``cb``, a group's ``cbs``), depth first."""
    from trainbus.callbacks.base import ProxyCallback

    yield cb
    if isinstance(cb, ProxyCallback):
        yield from callback_members(cb.cb)
    for x in getattr(cb, "cbs", None) or ():
        yield from callback_members(x)


def find_writers(trainer: Any) -> list[Any]:
    """The :class:`CheckpointWriter` callbacks of ``trainer`` (inside proxies and groups too), in order."""
    from trainbus.callbacks.base import Callback

    out = []
    for top in list(getattr(trainer, "_callbacks", None) or ()):
        for cb in callback_members(top):
            if isinstance(cb, Callback) and isinstance(cb, CheckpointWriter) and cb not in out:
                out.append(cb)
    return out


def newest_checkpoint(trainer: Any) -> tuple[str | None, int | None]:
    """``(prefix, step)`` of the newest listed checkpoint in the directory of ``trainer``'s first
    checkpoint writer; ``(None, None)`` when it has none or nothing is listed yet."""
    for w in find_writers(trainer):
        d = getattr(w, "checkpoint_dir", None)
        if d:
            return latest_checkpoint(os.fspath(d))
    return None, None


# ---------------------------------------------------------------- commits after the triggers
def defer_commit(trainer: Any, commit: Callable[[dict[str, Any]], None]) -> None:
    """Have ``commit(states)`` called once every callback handled the triggers of this step
    (after ``trigger_epoch``, after ``trigger_step`` when the epoch does not end there, after
    ``after_train``), with ``trainer.callback_states()`` as they are then. Outside a running
    training loop it is called at once."""
    pending = getattr(trainer, "_pending_commits", None)
    if pending is None or not getattr(trainer, "_defer_commits", False):
        commit(trainer.callback_states())
        return
    pending.append(commit)


def flush_commits(trainer: Any) -> None:
    """Run the commits :func:`defer_commit` queued, with the callbacks' states of now."""
    pending = getattr(trainer, "_pending_commits", None)
    if not pending:
        return
    todo = list(pending)
    pending.clear()
    states = trainer.callback_states()
    for commit in todo:
        commit(states)


# ----------------------------------------------------------------------------- the lock
from trainbus.utils.rundirlock import BUSY_EXIT_CODE, LOCK_FILE, RunDirBusyError, RunDirLock  # noqa: E402


def lock_run_dir(trainer: Any, directory: str | None) -> RunDirLock | None:
    """Lock ``directory`` for ``trainer`` until :func:`release_run_dirs`; a directory the trainer
    already holds is not locked twice. Raises :class:`RunDirBusyError` when another training
    holds it. Nothing happens for None or a directory that does not exist."""
    if not directory or not os.path.isdir(directory):
        return None
    locks: list[RunDirLock] = trainer.__dict__.setdefault("_run_dir_locks", [])
    real = os.path.realpath(directory)
    for lk in locks:
        if os.path.realpath(lk.directory) == real:
            lk.describe_holder()
            return lk
    lk = RunDirLock(directory).acquire()
    locks.append(lk)
    lk.describe_holder()
    return lk


def release_run_dirs(trainer: Any) -> None:
    """Release every run-directory lock ``trainer`` holds."""
    for lk in trainer.__dict__.pop("_run_dir_locks", []):
        lk.release()


# ----------------------------------------------------------------------- write failures
#: the errors a full, read-only, forbidden or failing disk gives
WRITE_ERRNOS = (errno.ENOSPC, errno.EROFS, errno.EPERM, errno.EACCES, errno.EIO, getattr(errno, "EDQUOT", errno.ENOSPC))


def write_error_text(exc: BaseException) -> str | None:
    """``"No space left on device (ENOSPC)"`` for an error of a full, read-only, forbidden or
    failing disk — an ``OSError`` or a TensorFlow error whose message carries the OS text —
    else None."""
    no = getattr(exc, "errno", None)
    if isinstance(exc, OSError) and no in WRITE_ERRNOS:
        return f"{os.strerror(no)} ({errno.errorcode.get(no, no)})"
    text = str(exc)
    for code in WRITE_ERRNOS:
        msg = os.strerror(code)
        if msg in text:
            return f"{msg} ({errno.errorcode.get(code, code)})"
    return None


_failing: dict[tuple[str, str], str] = {}
_failing_lock = threading.Lock()


def report_write_failure(who: str, path: str, exc: BaseException, consequence: str | None = None,
                         action: str = "write") -> None:
    """Log one line for a failed write of ``path`` by ``who``: the OS error and what happens next.
    The same failure of the same file is logged once until a write of it succeeds again
    (:func:`write_succeeded`)."""
    reason = write_error_text(exc)
    if reason is None:
        first = str(exc).strip().splitlines()
        reason = f"{type(exc).__name__}: {first[-1] if first else ''}".rstrip(": ")
    key = (who, os.path.dirname(os.path.abspath(path)) if action == "delete" else os.path.abspath(path))
    with _failing_lock:
        if _failing.get(key) == reason:
            logger.debug(f"{who}: cannot {action} {path} again: {reason}")
            return
        _failing[key] = reason
    then = consequence or "training goes on with the previous file kept; the next save tries again"
    logger.error(f"{who}: cannot {action} {path}: {reason}; {then}.")


def write_succeeded(who: str, path: str) -> None:
    """A write of ``path`` by ``who`` succeeded: a later failure is logged again, and a recovery
    after a logged failure is said once."""
    key = (who, os.path.abspath(path))
    with _failing_lock:
        was = _failing.pop(key, None)
    if was is not None:
        logger.info(f"{who}: writing {path} works again.")
