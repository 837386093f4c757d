"""Files beside checkpoints: the callbacks' saved state, the ``checkpoint`` list, and the error
that reports a damaged one.

``<checkpoint prefix>.trainbus.json`` holds ``trainer.callback_states()``; it is written
atomically (temporary file, fsync, rename) right after the checkpoint it belongs to.
``DamagedCheckpointError`` is what every restore path raises for a checkpoint (or one of these
files) that is missing, truncated or fails its checksum: one error naming the file, what is wrong
with it and what to do.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from trainbus.utils.fs import atomic_write_text

__all__ = ["SUFFIX", "STATE_FILE", "DamagedCheckpointError", "state_file", "write_callback_states",
           "read_callback_states", "read_checkpoint_list"]

SUFFIX = ".trainbus.json"
#: name of TensorFlow's checkpoint list (``CheckpointState`` in text format) in a checkpoint directory
STATE_FILE = "checkpoint"

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


def state_file(checkpoint_prefix: str) -> str:
    """The callback-state file of the checkpoint ``checkpoint_prefix``."""
    return str(checkpoint_prefix) + SUFFIX


def write_callback_states(checkpoint_prefix: str, states: dict[str, Any]) -> str:
    """Write ``states`` for the checkpoint ``checkpoint_prefix``; returns the file name."""
    path = state_file(checkpoint_prefix)
    atomic_write_text(path, json.dumps(states, indent=1, sort_keys=True))
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
        data = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DamagedCheckpointError(str(checkpoint_prefix), path, f"is truncated or not valid JSON ({e})",
                                     advice) from None
    if not isinstance(data, dict):
        raise DamagedCheckpointError(str(checkpoint_prefix), path,
                                     f"does not hold a JSON object but a {type(data).__name__}", advice)
    return data


def read_checkpoint_list(directory: str) -> list[str] | None:
    """The checkpoint prefixes the ``checkpoint`` list of ``directory`` names, oldest first and
    the latest (``model_checkpoint_path``) last, as absolute paths; None if there is no list.

    Raises ``DamagedCheckpointError`` when the list is empty, truncated or cannot be parsed.
    Whether the named checkpoints exist is not checked here."""
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

    def full(p: str) -> str:
        return p if os.path.isabs(p) else os.path.join(directory, p)

    paths = [full(p) for p in state.all_model_checkpoint_paths if p != state.model_checkpoint_path]
    return paths + [full(state.model_checkpoint_path)]


def checkpoint_step(prefix: str) -> int | None:
    """The global step in a checkpoint prefix's name (``model-120`` -> 120), or None."""
    m = re.search(r"-(\d+)$", prefix)
    return int(m.group(1)) if m else None
