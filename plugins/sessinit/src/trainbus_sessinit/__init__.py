"""Session initializers for trainbus: load variables from checkpoints, dicts and ``.npz`` files.

``SmartInit(obj)`` picks the loader for ``obj`` by asking the installed plugins (hook
``sessinit_for``); this distribution answers for checkpoints, dicts, ``.npz`` files, ``None``/``""``
and lists.
"""

from __future__ import annotations

from trainbus_sessinit._restore import DictRestore, SaverRestore, SaverRestoreRelaxed
from trainbus_sessinit._smart import SmartInit
from trainbus_sessinit._verify import DamagedCheckpointError, verify_checkpoint

__all__ = ["SaverRestore", "SaverRestoreRelaxed", "DictRestore", "SmartInit", "get_model_loader",
           "DamagedCheckpointError", "verify_checkpoint"]

#: tensorpack's older name for :func:`SmartInit`
get_model_loader = SmartInit
