"""The callback-state files and the ``checkpoint`` list, under the names earlier code imports.

:mod:`trainbus.checkpoint` owns them now; this module only re-exports its functions.
"""

from __future__ import annotations

from trainbus.checkpoint import (STATE_FILE, SUFFIX, DamagedCheckpointError, read_callback_states,
                                 read_checkpoint_list, state_file, write_callback_states)
from trainbus.checkpoint import step_of as checkpoint_step

__all__ = ["SUFFIX", "STATE_FILE", "DamagedCheckpointError", "state_file", "write_callback_states",
           "read_callback_states", "read_checkpoint_list", "checkpoint_step"]
