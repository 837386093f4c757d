"""``SmartInit``: a session initializer for any object some installed plugin can load."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["SmartInit"]

_BUILTIN = "plugin:sessinit"


def _describe(obj: Any) -> str:
    r = repr(obj)
    return r if len(r) <= 200 else r[:197] + "..."


def SmartInit(obj: Any, *, ignore_mismatch: bool = False) -> Any:
    """A ``SessionInit`` that loads ``obj``, chosen by the installed plugins.

    :param obj: a TF checkpoint (prefix such as ``model-100``, ``checkpoint`` state file or
        directory), a dict ``{name: array}``, an ``.npz`` file, ``None`` or ``""`` (no-op), a
        list of such objects (loaded one after another), or anything a third-party plugin's
        ``sessinit_for`` hook accepts.
    :param ignore_mismatch: warn and skip (instead of raising) variables whose value does not
        fit (shape or dtype).

    Plugins of group ``trainbus.plugins`` are asked in entry-point-name order; the first one
    that returns a ``SessionInit`` wins.
    """
    from trainbus.plugin_api import contribution_manager
    from trainbus.tfutils.sessinit import SessionInit

    pm = contribution_manager()
    res = pm.hook.sessinit_for(obj=obj, ignore_mismatch=bool(ignore_mismatch))
    fallback = res is None and not pm.has_plugin(_BUILTIN) and not pm.is_blocked(_BUILTIN)
    if fallback:
        # plugin autoloading is off: the built-in formats still work
        from trainbus_sessinit import _plugin

        res = _plugin.sessinit_for(obj=obj, ignore_mismatch=bool(ignore_mismatch))
    asked = [pm.dist_of(name) or name for name, p in pm.list_name_plugin()
             if p is not None and getattr(p, "sessinit_for", None) is not None]
    if fallback:
        asked.append("trainbus-sessinit (built-in formats)")
    if pm.is_blocked(_BUILTIN):
        asked.append("not the built-in plugin 'sessinit': it is disabled (TRAINBUS_DISABLE_PLUGINS), so TF "
                     "checkpoints, .npz files and dicts are not loaded either")
    if not asked:
        asked = ["nobody: no installed plugin implements sessinit_for"]
    if res is None:
        tried = "; ".join(asked)
        if isinstance(obj, (str, os.PathLike)):
            path = os.path.expanduser(os.fspath(obj))
            if not os.path.exists(path) and not os.path.exists(path + ".index"):
                raise FileNotFoundError(
                    f"SmartInit: {path!r} does not exist (looked for {path!r} and {path + '.index'!r}); "
                    f"no installed plugin could load it either (asked: {tried})")
            raise ValueError(
                f"SmartInit: no installed plugin can load {path!r} (asked: {tried}). Built-in formats are "
                "TF checkpoints (prefix, 'checkpoint' file or directory), .npz files, dicts, lists and None; "
                "install a plugin that implements the sessinit_for hook for this format")
        raise TypeError(
            f"SmartInit: no installed plugin can load {_describe(obj)} of type {type(obj).__name__} "
            f"(asked: {tried}). Give a checkpoint path, an .npz path, a dict {{name: array}}, a list, or None")
    if not isinstance(res, SessionInit):
        raise TypeError(f"SmartInit: a plugin's sessinit_for returned {res!r}, which is not a SessionInit "
                        f"(asked: {'; '.join(asked)})")
    return res
