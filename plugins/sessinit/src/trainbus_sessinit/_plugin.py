"""The built-in answers of ``SmartInit``: checkpoints, dicts, ``.npz``, ``None``/``""``, lists.

Registered as the ambient plugin ``sessinit`` (group ``trainbus.plugins``). Light to import:
TensorFlow and numpy load only when an object is accepted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import trainbus


def looks_like_checkpoint(path: str) -> bool:
    """True if ``path`` is a TF checkpoint prefix, one of its files, a ``checkpoint`` state
    file, or a directory holding a ``checkpoint`` state file (also when the checkpoint's index is
    missing but its data files are there: restoring it then reports what is damaged)."""
    if os.path.isdir(path):
        return os.path.isfile(os.path.join(path, "checkpoint"))
    if os.path.basename(path) == "checkpoint" and os.path.isfile(path):
        return True
    if os.path.isfile(path + ".index"):
        return True
    m = re.match(r"^(.*)\.(index|meta|data-\d+-of-\d+)$", path)
    if m and os.path.isfile(m.group(1) + ".index"):
        return True
    # data files without their index: a damaged checkpoint, which SaverRestore reports as such
    import glob

    prefix = m.group(1) if m else path
    return bool(glob.glob(glob.escape(prefix) + ".data-*-of-*"))


@trainbus.hookimpl
def sessinit_for(obj: Any, ignore_mismatch: bool) -> Any:
    from trainbus.tfutils.sessinit import ChainInit, JustCurrentSession, SessionInit

    if obj is None or (isinstance(obj, str) and obj == ""):
        return JustCurrentSession()
    if isinstance(obj, SessionInit):
        return obj
    if isinstance(obj, (list, tuple)):
        from trainbus_sessinit._smart import SmartInit

        return ChainInit([SmartInit(x, ignore_mismatch=ignore_mismatch) for x in obj])
    if isinstance(obj, Mapping):
        from trainbus_sessinit._restore import DictRestore

        return DictRestore(dict(obj), ignore_mismatch=ignore_mismatch)
    if isinstance(obj, (str, os.PathLike)):
        path = os.path.expanduser(os.fspath(obj))
        if path.endswith(".npz"):
            if not os.path.isfile(path):
                return None
            from trainbus_sessinit._restore import DictRestore

            return DictRestore.from_npz(path, ignore_mismatch=ignore_mismatch)
        if looks_like_checkpoint(path):
            from trainbus_sessinit._restore import SaverRestore, SaverRestoreRelaxed

            return (SaverRestoreRelaxed if ignore_mismatch else SaverRestore)(path)
    return None
