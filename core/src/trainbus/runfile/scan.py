"""Reading a run file: its values (``tomllib``; ``tomli`` on Python 3.10) and the line where
each key, table and array item starts (TOML parsers give values only), and the problems
reported with those lines (:class:`Problem`, :class:`RunConfigError`)."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["Path", "Problem", "RunConfigError", "read_run_file", "scan_key_lines"]

Path = tuple  # a key path in the TOML document, e.g. ("callbacks", 1, "args", "max_to_keep")


_BARE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


class _Scanner:
    """Walks a (valid) TOML text and records the line where every key, table and array item
    starts, by concrete path (array-of-tables entries by index)."""

    def __init__(self, text: str) -> None:
        self.t = text
        self.i = 0
        self.line = 1
        self.pos: dict[Path, int] = {}
        self.aot: dict[Path, int] = {}

    # -- characters
    def eof(self) -> bool:
        return self.i >= len(self.t)

    def peek(self, k: int = 1) -> str:
        return self.t[self.i:self.i + k]

    def adv(self, k: int = 1) -> None:
        chunk = self.t[self.i:self.i + k]
        self.line += chunk.count("\n")
        self.i += k

    def skip_ws(self, newlines: bool) -> None:
        while not self.eof():
            c = self.peek()
            if c in " \t\r" or (newlines and c == "\n"):
                self.adv()
            elif c == "#":
                while not self.eof() and self.peek() != "\n":
                    self.adv()
            else:
                return

    def skip_string(self) -> str:
        for delim in ('"""', "'''", '"', "'"):
            if self.t.startswith(delim, self.i):
                break
        self.adv(len(delim))
        start = self.i
        while not self.eof():
            if delim[0] == '"' and self.peek() == "\\":
                self.adv(2)
                continue
            if self.t.startswith(delim, self.i):
                # a multi-line string may end with up to two extra quotes
                while len(delim) == 3 and self.t.startswith(delim + delim[0], self.i):
                    self.adv()
                text = self.t[start:self.i]
                self.adv(len(delim))
                return text
            self.adv()
        return self.t[start:]

    def read_key(self) -> tuple[str, ...]:
        parts: list[str] = []
        while True:
            self.skip_ws(newlines=False)
            c = self.peek()
            if c in ('"', "'"):
                raw = self.skip_string()
                parts.append(raw.encode().decode("unicode_escape") if c == '"' and "\\" in raw else raw)
            else:
                start = self.i
                while not self.eof() and self.peek() in _BARE:
                    self.adv()
                parts.append(self.t[start:self.i])
            self.skip_ws(newlines=False)
            if self.peek() == ".":
                self.adv()
                continue
            return tuple(parts)

    # -- structure
    def concrete(self, key: tuple[str, ...]) -> Path:
        out: Path = ()
        for k in key:
            out = out + (k,)
            if out in self.aot:
                out = out + (self.aot[out],)
        return out

    def record(self, path: Path) -> None:
        for n in range(1, len(path)):
            self.pos.setdefault(path[:n], self.line)
        self.pos[path] = self.line

    def value(self, path: Path) -> None:
        self.skip_ws(newlines=False)
        c = self.peek()
        if c == "{":
            self.adv()
            while True:
                self.skip_ws(newlines=True)
                if self.eof() or self.peek() == "}":
                    self.adv()
                    return
                key = self.read_key()
                self.record(path + key)
                self.skip_ws(newlines=False)
                if self.peek() == "=":
                    self.adv()
                self.value(path + key)
                self.skip_ws(newlines=True)
                if self.peek() == ",":
                    self.adv()
        elif c == "[":
            self.adv()
            idx = 0
            while True:
                self.skip_ws(newlines=True)
                if self.eof() or self.peek() == "]":
                    self.adv()
                    return
                self.record(path + (idx,))
                self.value(path + (idx,))
                self.skip_ws(newlines=True)
                if self.peek() == ",":
                    self.adv()
                idx += 1
        elif c in ('"', "'"):
            self.skip_string()
        else:
            while not self.eof() and self.peek() not in ",]}\n#":
                self.adv()

    def run(self) -> dict[Path, int]:
        current: Path = ()
        while True:
            self.skip_ws(newlines=True)
            if self.eof():
                return self.pos
            if self.peek(2) == "[[":
                self.adv(2)
                key = self.read_key()
                base = self.concrete(key[:-1]) + (key[-1],)
                idx = self.aot.get(base, -1) + 1
                self.aot[base] = idx
                current = base + (idx,)
                self.pos.setdefault(base, self.line)
                self.record(current)
                self.adv(2)
            elif self.peek() == "[":
                self.adv()
                current = self.concrete(self.read_key())
                self.record(current)
                self.adv()
            else:
                key = self.read_key()
                self.record(current + key)
                self.skip_ws(newlines=False)
                if self.peek() == "=":
                    self.adv()
                self.value(current + key)


def scan_key_lines(text: str) -> dict[Path, int]:
    """Line number (1-based) of every key, table and array item of a TOML text, by path."""
    scanner = _Scanner(text)
    try:
        return scanner.run()
    except Exception:  # noqa: BLE001 - line numbers are best effort; tomllib already validated the text
        return scanner.pos


@dataclasses.dataclass
class Problem:
    """One mistake in a run file."""

    line: int | None
    where: str
    message: str
    column: int | None = None  # only for TOML syntax errors

    def format(self, filename: str) -> str:
        loc = f"{filename}:{self.line}" if self.line else filename
        if self.line and self.column:
            return f"{loc}:{self.column}: {self.message}"
        return f"{loc}: {self.where}: {self.message}"


class RunConfigError(ValueError):
    """A run file has mistakes; ``problems`` lists every one (with its line), nothing was started."""

    def __init__(self, filename: str, problems: list[Problem]) -> None:
        self.filename = filename
        self.problems = list(problems)
        if len(self.problems) == 1 and self.problems[0].where == _SYNTAX:
            # the file could not be read at all: one line, "file:line:column: what"
            super().__init__(f"{self.problems[0].format(filename)}; nothing was started")
            return
        body = "\n".join("  " + p.format(filename) for p in self.problems)
        super().__init__(f"{filename}: {len(self.problems)} problem(s); nothing was started:\n{body}")


_SYNTAX = "(syntax)"
_AT = re.compile(r"\s*\(at (?:line (\d+), column (\d+)|end of document)\)\s*$")


def _syntax_problem(e: ValueError, text: str) -> Problem:
    """A TOML parse error (``tomllib``/``tomli``) as a problem with its line and column (the
    parser names them at the end of its message: "(at line 3, column 7)", "(at end of document)")."""
    msg = str(e.args[0]) if e.args and isinstance(e.args[0], str) else str(e)
    line, col = None, None
    m = _AT.search(msg)
    if m:
        msg = msg[:m.start()]
        if m.group(1):
            line, col = int(m.group(1)), int(m.group(2))
        else:
            lines = text.rstrip("\n").split("\n")
            line, col = len(lines), len(lines[-1]) + 1
    return Problem(line, _SYNTAX, f"not valid TOML: {msg}", column=col)


def _where(path: Path) -> str:
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(file)"


def _line_order(p: Problem) -> tuple[bool, int]:
    return (p.line is None, p.line or 0)


def read_run_file(path: str | os.PathLike) -> tuple[dict[str, Any], dict[Path, int]]:
    """The run file's values (``tomllib``) and the line of every key path; raises
    :class:`RunConfigError` (one problem) when the file cannot be read or is not valid TOML."""
    fname = str(path)
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise RunConfigError(fname, [Problem(None, "(file)", f"cannot read the run file: {e}")]) from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise RunConfigError(fname, [_syntax_problem(e, text)]) from None
    return doc, scan_key_lines(text)
