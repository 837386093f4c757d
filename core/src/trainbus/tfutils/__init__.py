"""TensorFlow utilities (tensorpack's ``tfutils``).

Submodules: ``argscope``, ``collect_env``, ``collection``, ``common``, ``dependency``, ``export``,
``gradproc``, ``model_utils``, ``optimizer``, ``scope_utils``, ``sesscreate``, ``sessinit``,
``summary``, ``symbolic_functions``, ``tower``, ``varmanip``, ``varreplace``. Importing this package does not import TensorFlow; the helpers
below and the session initializers of installed plugins resolve on first use.
"""

from __future__ import annotations

from trainbus.bus import registry as _registry

#: the package's own public names; ``__all__`` (computed on access) adds the session
#: initializers installed plugins declare, as tensorpack's star-imports its ``sessinit``
_CORE_ALL = ("get_default_sess_config", "get_global_step_var", "get_global_step_value", "get_tf_version_tuple",
             "collect_env_info", "TowerContext", "get_current_tower_context", "TowerFunc", "argscope",
             "get_arg_scope", "enable_argscope_for_module", "enable_argscope_for_function", "SessionInit",
             "JustCurrentSession", "ChainInit", "sessinit", "summary", "optimizer", "sesscreate", "gradproc",
             "varreplace", "tower")

_LAZY = {
    "get_default_sess_config": "trainbus.tfutils.common",
    "get_global_step_var": "trainbus.tfutils.common",
    "get_global_step_value": "trainbus.tfutils.common",
    "get_tf_version_tuple": "trainbus.tfutils.common",
    "get_op_tensor_name": "trainbus.tfutils.common",
    "get_op_or_tensor_by_name": "trainbus.tfutils.common",
    "TowerContext": "trainbus.tfutils.tower",
    "get_current_tower_context": "trainbus.tfutils.tower",
    "TowerFunc": "trainbus.tfutils.tower",
    "argscope": "trainbus.tfutils.argscope",
    "get_arg_scope": "trainbus.tfutils.argscope",
    "SessionInit": "trainbus.tfutils.sessinit",
    "JustCurrentSession": "trainbus.tfutils.sessinit",
    "ChainInit": "trainbus.tfutils.sessinit",
    "collect_env_info": "trainbus.tfutils.collect_env",
    "enable_argscope_for_module": "trainbus.tfutils.argscope",
    "enable_argscope_for_function": "trainbus.tfutils.argscope",
}
_SUBMODULES = {"argscope", "collect_env", "collection", "common", "dependency", "export", "gradproc", "model_utils",
               "optimizer", "scope_utils", "sesscreate", "sessinit", "summary", "symbolic_functions", "tower",
               "varmanip", "varreplace"}
# ``argscope`` names both a submodule and its function: bind the function now (argscope.py
# imports no TensorFlow), else importing the submodule would shadow it with the module.
from trainbus.tfutils.argscope import argscope, get_arg_scope  # noqa: E402

__getattr__, __dir__ = _registry.make_module_getattr(__name__, ("trainbus.tfutils.sessinit",), globals(), _CORE_ALL,
                                                    lazy=_LAZY, submodules=_SUBMODULES)
