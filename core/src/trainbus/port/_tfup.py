"""TensorFlow's own upgrade machinery (``tensorflow/tools/compatibility``, the code behind the
``tf_upgrade_v2`` command), loaded on first use: importing it imports TensorFlow.

Two rule sets are made from its ``TFAPIChangeSpec``: the ``tf.contrib`` rules alone (used on every
route) and all the others (the upgrade route). Its output is turned into span edits of the input
(:func:`trainbus.port._edits.token_edits`), so its printer's layout never reaches a file."""

from __future__ import annotations

import contextlib
import functools
import io
import re
from dataclasses import dataclass
from typing import Any

_CONTRIB = ("tf.contrib", "contrib_")
_SPEC_FIELDS = ("function_keyword_renames", "symbol_renames", "function_reorders", "function_warnings",
                "function_transformers", "module_deprecations", "change_to_function", "function_arg_warnings")
_LOG = re.compile(r"^(\d+):(\d+): (INFO|WARNING|ERROR): (.*)$", re.S)


@dataclass(frozen=True)
class Log:
    severity: str
    line: int
    col: int
    message: str


def tf() -> Any:
    import tensorflow

    return tensorflow


def _keep_rules(spec: Any, contrib: bool) -> None:
    """Keep the ``tf.contrib`` rules of ``spec`` (``contrib``) or all the others."""
    for name in _SPEC_FIELDS:
        table = getattr(spec, name, None)
        if isinstance(table, dict):
            setattr(spec, name, {k: v for k, v in table.items() if k.startswith(_CONTRIB) == contrib})
        elif isinstance(table, (set, frozenset)):
            setattr(spec, name, {k for k in table if k.startswith(_CONTRIB) == contrib})


@functools.lru_cache(maxsize=None)
def _upgrader(contrib: bool) -> Any:
    with contextlib.redirect_stdout(io.StringIO()):
        from tensorflow.tools.compatibility import ast_edits, tf_upgrade_v2

        class Spec(tf_upgrade_v2.TFAPIChangeSpec):
            # the upgrader puts every table back after each file (clear_preprocessing calls
            # __init__) and swaps some in while reading one (preprocess): the rule set is
            # chosen again each time, or the second file would get all the rules
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                _keep_rules(self, contrib)

            def preprocess(self, *args: Any, **kwargs: Any) -> Any:
                out = super().preprocess(*args, **kwargs)
                _keep_rules(self, contrib)
                return out

        spec = Spec()
    return ast_edits.ASTCodeUpgrader(spec)


@functools.lru_cache(maxsize=None)
def contrib_names() -> frozenset[str]:
    """The ``tf.contrib.*`` names TensorFlow's upgrader converts (renames and transformers)."""
    spec = _upgrader(True)._api_change_spec
    names = set(spec.symbol_renames) | set(spec.function_transformers)
    return frozenset(n for n in names if n.startswith("tf.contrib."))


def upgrade(text: str, *, contrib: bool) -> tuple[str, list[Log]]:
    """Run TensorFlow's upgrader (its ``tf.contrib`` rules, or all its other rules) over
    ``text``; returns its output and its log, each entry at a (line, column) of ``text``."""
    with contextlib.redirect_stdout(io.StringIO()):
        _, new, logs, _errors = _upgrader(contrib).update_string_pasta(text, "<port>")
    out = []
    for entry in logs:
        m = _LOG.match(entry.strip())
        if m:
            out.append(Log(m.group(3), int(m.group(1)), int(m.group(2)), " ".join(m.group(4).split())))
    return (new or text), out


def resolve(parts: list[str], v1: bool) -> bool:
    """Whether ``tf.<parts...>`` names something in TensorFlow 2.21's API (``tf.compat.v1``'s
    with ``v1``). Stops at the first name that is not a module (an attribute of a class or of
    a function's result is not TensorFlow's API to check)."""
    import types

    obj = tf().compat.v1 if v1 else tf()
    for part in parts:
        if not isinstance(obj, types.ModuleType):
            return True
        try:
            obj = getattr(obj, part)
        except Exception:  # noqa: BLE001 - a lazily loaded module that fails to load is not there
            return False
    return True
