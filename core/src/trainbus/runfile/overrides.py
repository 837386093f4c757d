"""``--set PATH=VALUE``: change one value of a run file from the command line.

``PATH`` is written as the run-file problems print it: ``train.max_epoch``,
``callbacks[0].args.max_to_keep``, ``model.args.lr``, ``data.args.batch``. ``VALUE`` is a TOML
value (``3``, ``0.1``, ``true``, ``"a string"``, ``[1, 2]``, ``{ x = 1 }``); a word that is
not TOML (``runs/a``) is taken as a string. Missing tables on the way are created; an array
index must name an existing entry. The changed document is then checked like the file itself,
so an override naming an unknown key gets the same did-you-mean, marked as coming from ``--set``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Sequence

from trainbus.runfile.scan import Path, Problem, RunConfigError, _where

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["Override", "parse_override", "apply_overrides", "mark_override_problems"]

_PART = re.compile(r'(?:^|\.)(?:([A-Za-z0-9_-]+)|"([^"]*)")|\[(\d+)\]')
_BARE_STRING = re.compile(r"^[^\s\[\]{}\"'=,#]+$")


@dataclasses.dataclass
class Override:
    """One ``--set PATH=VALUE``."""

    text: str      # as given
    path: Path     # ("callbacks", 0, "args", "max_to_keep")
    value: Any
    created: Path | None = None  # the first table on the way that the file did not have

    @property
    def where(self) -> str:
        return _where(self.path)


class OverrideError(ValueError):
    """A ``--set`` that cannot be read or applied (one line)."""


def _parse_path(text: str) -> Path:
    parts: list[Any] = []
    pos = 0
    while pos < len(text):
        m = _PART.match(text, pos)
        if not m or m.end() == pos or (pos == 0 and text[0] == "."):
            raise OverrideError(f"cannot read the path {text!r} at {text[pos:]!r}; write it as the run file's "
                                "problems print it, e.g. train.max_epoch or callbacks[0].args.max_to_keep")
        name, quoted, index = m.groups()
        parts.append(int(index) if index is not None else (name if name is not None else quoted))
        pos = m.end()
    if not parts or isinstance(parts[0], int):
        raise OverrideError(f"the path {text!r} must start with a section name (train, model, data, trainer, "
                            "session_init, callbacks, monitors)")
    return tuple(parts)


def _parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError as e:
        if _BARE_STRING.match(text):
            return text  # a path or a word: a string
        raise OverrideError(f"the value {text!r} is not a TOML value ({e}); quote a string: '\"text\"'") from None


def parse_override(text: str) -> Override:
    """``"train.max_epoch=5"`` -> ``Override(path=("train", "max_epoch"), value=5)``."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise OverrideError(f"--set {text!r} must look like PATH=VALUE, e.g. --set train.max_epoch=10")
    return Override(text, _parse_path(key.strip()), _parse_value(value.strip()))


def apply_overrides(doc: dict[str, Any], lines: dict[Path, int], overrides: Sequence[str],
                    filename: str) -> list[Override]:
    """Apply the ``--set`` texts to the parsed run file ``doc`` (in place) and forget the line of
    each overridden key (its value no longer comes from the file). Raises
    :class:`~trainbus.runfile.scan.RunConfigError` naming every ``--set`` that cannot be read or
    applied."""
    done: list[Override] = []
    problems: list[Problem] = []
    for text in overrides:
        try:
            ov = parse_override(text)
            _put(doc, ov)
        except OverrideError as e:
            problems.append(Problem(None, f"--set {text}", str(e)))
            continue
        for p in [p for p in lines if p[:len(ov.path)] == ov.path]:
            del lines[p]
        done.append(ov)
    if problems:
        raise RunConfigError(filename, problems)
    return done


def _put(doc: dict[str, Any], ov: Override) -> None:
    node: Any = doc
    for i, part in enumerate(ov.path[:-1]):
        nxt = ov.path[i + 1]
        here = _where(ov.path[:i + 1])
        if isinstance(part, int):
            if not isinstance(node, list):
                raise OverrideError(f"{_where(ov.path[:i]) or 'the file'} is not an array; {here} does not exist")
            if part >= len(node):
                raise OverrideError(_index_message(ov.path[:i], len(node)))
            node = node[part]
            continue
        if not isinstance(node, dict):
            raise OverrideError(f"{_where(ov.path[:i])} is not a table; cannot set {ov.where}")
        if part not in node:
            if isinstance(nxt, int):
                raise OverrideError(_index_message(ov.path[:i + 1], 0))
            node[part] = {}
            if ov.created is None:
                ov.created = ov.path[:i + 1]
        node = node[part]
    last = ov.path[-1]
    if isinstance(last, int):
        if not isinstance(node, list):
            raise OverrideError(f"{_where(ov.path[:-1])} is not an array; {ov.where} does not exist")
        if last >= len(node):
            raise OverrideError(_index_message(ov.path[:-1], len(node)))
        node[last] = ov.value
    else:
        if not isinstance(node, dict):
            raise OverrideError(f"{_where(ov.path[:-1])} is not a table; cannot set {ov.where}")
        node[last] = ov.value


def _index_message(path: Path, n: int) -> str:
    where = _where(path)
    if n == 0:
        return f"the run file has no {where} entries"
    return f"the run file has {n} {where} entr{'y' if n == 1 else 'ies'} ({where}[0] to {where}[{n - 1}])"


def mark_override_problems(problems: Sequence[Problem], overrides: Sequence[Override]) -> list[Problem]:
    """The problems, each one at a place an override set marked with the ``--set`` it comes from."""
    out: list[Problem] = []
    for p in problems:
        src = [ov for ov in overrides if p.where == ov.where or p.where.startswith(ov.where + ".")
               or p.where.startswith(ov.where + "[") or (ov.created is not None and p.where == _where(ov.created))]
        if src:
            p = dataclasses.replace(p, message=f"{p.message} (from --set {src[-1].text})")
        out.append(p)
    return out
