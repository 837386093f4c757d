"""Callback state saved beside checkpoints, so resumed runs continue where they stopped.

``<checkpoint prefix>.trainbus.json`` holds ``trainer.callback_states()``; it is written
atomically (temporary file, fsync, rename) right after the checkpoint it belongs to.
"""

from __future__ import annotations

import json
import os
from typing import Any

from trainbus.utils.fs import atomic_write_text

SUFFIX = ".trainbus.json"


def state_file(checkpoint_prefix: str) -> str:
    return str(checkpoint_prefix) + SUFFIX


def write_callback_states(checkpoint_prefix: str, states: dict[str, Any]) -> str:
    """Write ``states`` for the checkpoint ``checkpoint_prefix``; returns the file name."""
    path = state_file(checkpoint_prefix)
    atomic_write_text(path, json.dumps(states, indent=1, sort_keys=True))
    return path


def read_callback_states(checkpoint_prefix: str) -> dict[str, Any]:
    """The states saved with ``checkpoint_prefix`` ({} if none were saved)."""
    path = state_file(checkpoint_prefix)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"the callback state file {path} is corrupt ({e}); delete it to resume without callback state") from None
    if not isinstance(data, dict):
        raise ValueError(f"the callback state file {path} does not hold a JSON object; delete it to resume without callback state")
    return data
