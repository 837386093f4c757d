"""Session initializers for trainbus: load variables from checkpoints, dicts and ``.npz`` files.

``SmartInit(obj)`` picks the loader for ``obj`` by asking the installed plugins (hook
``sessinit_for``); this distribution answers for checkpoints, dicts, ``.npz`` files, ``None``/``""``
and lists.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from trainbus_sessinit._restore import DictRestore, SaverRestore, SaverRestoreRelaxed
    from trainbus_sessinit._smart import SmartInit
    from trainbus_sessinit._verify import DamagedCheckpointError, verify_checkpoint

    get_model_loader = SmartInit

__all__ = ["SaverRestore", "SaverRestoreRelaxed", "DictRestore", "SmartInit", "get_model_loader",
           "DamagedCheckpointError", "verify_checkpoint"]

# every name is imported from its module on first use: the ambient plugin (``_plugin``, loaded by
# every training) imports this package, and a training that restores nothing needs none of them
_MODULE_OF = {"SaverRestore": "_restore", "SaverRestoreRelaxed": "_restore", "DictRestore": "_restore",
              "SmartInit": "_smart", "get_model_loader": "_smart", "DamagedCheckpointError": "_verify",
              "verify_checkpoint": "_verify"}


def __getattr__(name: str) -> object:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # get_model_loader: tensorpack's older name for SmartInit
    attr = "SmartInit" if name == "get_model_loader" else name
    value = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
