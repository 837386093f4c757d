"""Tell a checkpoint that reads completely from a damaged one, and say exactly what is damaged.

TensorFlow reports a damaged checkpoint with a long trace whose last line (``not an sstable (bad
magic number)``, ``Checksum does not match``, ``Read less bytes than requested``) does not name
the file. ``verify_checkpoint`` reads a checkpoint the way a restore does and turns any failure
into one ``DamagedCheckpointError`` naming the file, what is wrong (missing, truncated, checksum)
and what to do.
"""

from __future__ import annotations

import glob
import os
import re

from trainbus.checkpoint import STATE_FILE, DamagedCheckpointError, read_callback_states, read_checkpoint_list

__all__ = ["DamagedCheckpointError", "verify_checkpoint", "resolve_checkpoint", "explain_restore_error"]

_DATA_RE = re.compile(r"\.data-(\d+)-of-(\d+)$")


def _data_files(prefix: str) -> list[str]:
    return sorted(f for f in glob.glob(glob.escape(prefix) + ".data-*-of-*") if _DATA_RE.search(f))


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def _index_problem(e: BaseException) -> str:
    msg = str(e)
    if "too short to be an sstable" in msg or "bad magic number" in msg:
        return "is truncated (TensorFlow: the index table ends early)"
    if "checksum" in msg.lower():
        return "fails its checksum (its bytes were changed after it was written)"
    return f"cannot be read ({_first_line(e)})"


def explain_restore_error(prefix: str, e: BaseException) -> DamagedCheckpointError | None:
    """The ``DamagedCheckpointError`` describing what TensorFlow's error ``e`` (raised while
    reading checkpoint ``prefix``) means, or None if ``e`` is not about damaged files."""
    msg = str(e)
    data = _data_files(prefix)
    m = re.search(r"(\S+\.data-\d+-of-\d+)", msg)
    if "No such file or directory" in msg or "not found" in msg.lower():
        missing = m.group(1).rstrip(";:,") if m else (prefix + ".data-00000-of-00001")
        if not os.path.isfile(missing):
            return DamagedCheckpointError(prefix, missing, "is missing (the index names it but it is not on disk)")
    if "Checksum does not match" in msg or "checksum mismatch" in msg:
        shard = re.search(r"shard (\d+)", msg)
        file = _shard_file(prefix, data, int(shard.group(1))) if shard else _one_or_all(prefix, data)
        return DamagedCheckpointError(prefix, file, "fails its checksum (its bytes were changed after it was written)")
    if "Read less bytes than requested" in msg or "truncated" in msg.lower() or "unexpected end" in msg.lower():
        return DamagedCheckpointError(prefix, _one_or_all(prefix, data),
                                      "is truncated (shorter than the index says)")
    if "sstable" in msg or "Unable to read file" in msg:
        return DamagedCheckpointError(prefix, prefix + ".index", _index_problem(e))
    return None


def _shard_file(prefix: str, data: list[str], shard: int) -> str:
    for f in data:
        m = _DATA_RE.search(f)
        if m and int(m.group(1)) == shard:
            return f
    return _one_or_all(prefix, data)


def _one_or_all(prefix: str, data: list[str]) -> str:
    if len(data) == 1:
        return data[0]
    return "one of " + ", ".join(os.path.basename(f) for f in data) if data else prefix + ".data-*"


def verify_checkpoint(prefix: str, read_data: bool = True, state_file: bool = True) -> None:
    """Raise ``DamagedCheckpointError`` unless checkpoint ``prefix`` reads completely.

    :param prefix: the checkpoint prefix (``.../model-1000``).
    :param read_data: read every tensor (which checks every data shard's length and checksum);
        with False only the index and the presence of the data files are checked.
    :param state_file: also check the callback-state file beside it (``.trainbus.json``), if any.
    """
    import tensorflow as tf

    index = prefix + ".index"
    if not os.path.isfile(index):
        if _data_files(prefix):
            raise DamagedCheckpointError(prefix, index, "is missing (its data files are there; the save was "
                                         "interrupted or the index was deleted)")
        raise DamagedCheckpointError(prefix, index, "is missing")
    if os.path.getsize(index) == 0:
        raise DamagedCheckpointError(prefix, index, "is empty (truncated)")
    try:
        reader = tf.compat.v1.train.NewCheckpointReader(prefix)
    except Exception as e:  # noqa: BLE001 - every reader failure here is about the index file
        raise DamagedCheckpointError(prefix, index, _index_problem(e)) from None
    data = _data_files(prefix)
    shards = {int(_DATA_RE.search(f).group(2)) for f in data}
    expected = [f"{prefix}.data-{i:05d}-of-{n:05d}" for n in shards for i in range(n)] or \
        [prefix + ".data-00000-of-00001"]
    names = reader.get_variable_to_shape_map()
    if names:
        for f in expected:
            if not os.path.isfile(f):
                raise DamagedCheckpointError(prefix, f, "is missing (the index names it but it is not on disk)")
    if read_data:
        for name in sorted(names):
            try:
                reader.get_tensor(name)
            except Exception as e:  # noqa: BLE001
                err = explain_restore_error(prefix, e)
                if err is None:
                    err = DamagedCheckpointError(prefix, _one_or_all(prefix, data),
                                                 f"cannot be read at variable {name} ({_first_line(e)})")
                raise err from None
    if state_file:
        read_callback_states(prefix)


def resolve_checkpoint(path: str) -> str:
    """The checkpoint prefix ``path`` means: a prefix, one of its files, a ``checkpoint`` list
    or a directory holding one (its latest checkpoint). Raises ``DamagedCheckpointError`` when the
    list is damaged or names a checkpoint whose index is missing, ``FileNotFoundError`` when
    there is nothing at ``path``."""
    from trainbus.tfutils.varmanip import get_checkpoint_path

    path = os.path.expanduser(os.fspath(path))
    directory = None
    if os.path.isdir(path):
        directory = path
    elif os.path.basename(path) == STATE_FILE and os.path.isfile(path):
        directory = os.path.dirname(path) or "."
    if directory is not None:
        listed = read_checkpoint_list(directory)
        if listed is None:
            raise FileNotFoundError(f"no checkpoint in directory {directory!r}: it has no '{STATE_FILE}' list. "
                                    "Give a checkpoint prefix such as <dir>/model-1000")
        latest = listed[-1]
        if not os.path.isfile(latest + ".index"):
            raise DamagedCheckpointError(
                latest, os.path.join(directory, STATE_FILE),
                f"names {os.path.basename(latest)} as the latest checkpoint, but {latest}.index is missing",
                "Give an existing checkpoint prefix explicitly, or let AutoResumeTrainConfig pick the newest intact "
                "one; a checkpoint whose files were deleted cannot be restored")
        return latest
    m = re.match(r"^(.*)\.(index|meta|data-\d+-of-\d+|trainbus\.json)$", path)
    prefix = m.group(1) if m and not os.path.isfile(path + ".index") else path
    if not os.path.isfile(prefix + ".index") and _data_files(prefix):
        raise DamagedCheckpointError(prefix, prefix + ".index", "is missing (its data files are there; the save "
                                     "was interrupted or the index was deleted)")
    return get_checkpoint_path(path)
