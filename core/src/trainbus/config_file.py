"""Training runs described by a TOML file (``trainbus train RUN.toml``).

A run file names every component; callbacks, monitors, the trainer and the session
initializer by their registered names (``trainbus plugins`` lists them)::

    [model]                          # a ModelDesc: "module:Class" and its arguments
    class = "mymodels:Net"
    args = { lr = 0.1 }

    [data]                           # "module:function" returning a DataFlow or an InputSource
    function = "mydata:train_data"
    args = { batch = 32 }

    [trainer]                        # default: SimpleTrainer
    name = "SimpleTrainer"

    [[callbacks]]
    name = "ModelSaver"
    args = { max_to_keep = 2 }

    [[callbacks]]                    # an argument may itself be a component:
    name = "PeriodicTrigger"         #   { callback = "Name", args = {...} }, { monitor = ... },
    args = { triggerable = { callback = "ModelSaver" }, every_k_steps = 5 }
                                     #   { session_init = ... }, { object = "module:attr", args = {...} }
    [[callbacks]]                    # state_key: the key its saved state goes under
    name = "MinSaver"                #   (default: the class and what identifies the instance)
    state_key = "best-cost"
    args = { monitor_stat = "cost" }

    [[monitors]]                     # no [[monitors]] at all = DEFAULT_MONITORS()
    name = "ScalarPrinter"

    [session_init]                   # optional
    name = "SmartInit"
    args = { session_init = "train_log/old/checkpoint" }

    [train]
    steps_per_epoch = 100            # default: the size of the data
    max_epoch = 10
    starting_epoch = 1
    logdir = "train_log/net"         # optional; relative to the current directory
    logdir_action = "k"              # k(eep) d(elete) b(ackup) n(ew) q(uit), if logdir is not empty
    resume = true                    # continue from the newest checkpoint in logdir (the default)
    default_callbacks = true         # append DEFAULT_CALLBACKS() (tensorpack's extra_callbacks)

``module`` paths are imported with the run file's directory and the current directory on
``sys.path``. Every mistake (unknown names, arguments that do not fit a signature or the
types it is annotated with, missing plugins, bad loop options, what the constructors reject,
two stateful callbacks with one state key) is collected and reported at once, each with its
line, before anything starts (:class:`RunConfigError`); ``logdir_action`` is carried out only when training starts, so a
run with mistakes leaves the file system as it was. Running a file again continues the run
from the newest checkpoint of its log directory (``AutoResumeTrainConfig``).
"""

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import importlib
import inspect
import os
import re
import pathlib
import sys
import types
import typing
from typing import Any, Iterator

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

from trainbus import compose

__all__ = ["RunConfigError", "Problem", "Component", "RunPlan", "load_run_file", "train_from_file", "scan_key_lines"]

Path = tuple  # a key path in the TOML document, e.g. ("callbacks", 1, "args", "max_to_keep")


# =============================================================================================
# positions: tomllib (tomli on Python 3.10) reads the values; this maps key paths to their lines
# =============================================================================================

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


# =============================================================================================
# problems
# =============================================================================================

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


# =============================================================================================
# components
# =============================================================================================

@dataclasses.dataclass
class Component:
    """One resolved component of a run: what to call (``target``) with which arguments."""

    kind: str          # model, data, trainer, session_init, callback, monitor, object
    label: str         # where in the file, e.g. "callbacks[0]"
    name: str          # the registered name, or "module:attr"
    target: Any        # the class or function
    args: dict[str, Any]
    provider: str      # "trainbus-saver 0.1.0", "trainbus 0.1.0 (core)", "module mymodels (path)"
    line: int | None
    call: bool = True  # False for {object = "module:attr"} without args: the attribute itself
    arg_lines: dict[str, int] = dataclasses.field(default_factory=dict)  # argument name -> its line
    state_key: str | None = None      # callbacks and monitors: the key their saved state goes under
    state_key_line: int | None = None

    def problem_from(self, e: BaseException) -> Problem:
        """A construction error as a problem: at the line of the argument the message names
        (when it names exactly one), else at the component's line."""
        text = str(e)
        if isinstance(e, _StateKeyError):
            return Problem(self.state_key_line or self.line, f"{self.label}.state_key", text)
        named = [k for k in self.arg_lines if re.search(rf"\b{re.escape(k)}\b", text)]
        line = self.arg_lines[named[0]] if len(named) == 1 else self.line
        where = f"{self.label}.args.{named[0]}" if len(named) == 1 else self.label
        return Problem(line, where, f"{self.describe()} failed: {type(e).__name__}: {e}")

    def build(self) -> Any:
        """Call ``target`` with the (recursively built) arguments."""
        if not self.call:
            return self.target
        obj = self.target(**{k: _materialize(v) for k, v in self.args.items()})
        if self.state_key is not None:
            if not isinstance(getattr(type(obj), "state_key", None), property):
                raise _StateKeyError(f"{type(obj).__name__} has no state_key (it is not a callback); remove "
                                     "state_key from this entry")
            obj.state_key = self.state_key
        return obj

    def describe(self) -> str:
        if not self.call:
            return self.name
        text = f"{self.name}({', '.join(f'{k}={_describe_value(v)}' for k, v in self.args.items())})"
        if self.state_key is not None:
            text += f" state_key={self.state_key!r}"
        return text


class _StateKeyError(TypeError):
    """A component given a ``state_key`` built something that has none."""


def _materialize(v: Any) -> Any:
    if isinstance(v, Component):
        return v.build()
    if isinstance(v, list):
        return [_materialize(x) for x in v]
    if isinstance(v, dict):
        return {k: _materialize(x) for k, x in v.items()}
    return v


def _describe_value(v: Any) -> str:
    if isinstance(v, Component):
        return v.describe()
    if isinstance(v, list):
        return "[" + ", ".join(_describe_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {_describe_value(x)}" for k, x in v.items()) + "}"
    return repr(v)


_REF_KINDS = {"callback": "callback", "monitor": "monitor", "session_init": "session_init", "trainer": "trainer",
              "object": "object"}
_TOP_KEYS = {
    "model": "the ModelDesc: class = \"module:Class\", args = {...}",
    "data": "the input: function = \"module:function\", args = {...}",
    "trainer": "the trainer strategy: name = \"SimpleTrainer\", args = {...}",
    "session_init": "the session initializer: name = \"SmartInit\", args = {...}",
    "callbacks": "[[callbacks]] tables: name = \"ModelSaver\", args = {...}",
    "monitors": "[[monitors]] tables: name = \"ScalarPrinter\", args = {...}",
    "train": "the loop options: steps_per_epoch, max_epoch, starting_epoch, logdir, logdir_action, resume, "
             "default_callbacks",
}
_TRAIN_KEYS = {"steps_per_epoch", "max_epoch", "starting_epoch", "logdir", "logdir_action", "resume",
               "default_callbacks"}


def _close(word: str, choices: Any) -> str:
    m = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {m[0]!r}?)" if m else ""


class _Checker:
    """Turns the parsed document into components, collecting every problem on the way."""

    def __init__(self, doc: dict[str, Any], lines: dict[Path, int], base_dir: pathlib.Path) -> None:
        self.doc = doc
        self.lines = lines
        self.base_dir = base_dir
        self.problems: list[Problem] = []

    def line(self, path: Path) -> int | None:
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return None

    def problem(self, path: Path, message: str) -> None:
        self.problems.append(Problem(self.line(path), _where(path), message))

    # -- "module:attr" targets
    def import_target(self, path: Path, spec: Any, what: str) -> tuple[Any, str] | None:
        if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
            self.problem(path, f"{what} must be a string \"module:attribute\" (e.g. \"mymodels:Net\"), got {spec!r}")
            return None
        modname, attr = spec.split(":")
        with _import_path(self.base_dir):
            try:
                mod = importlib.import_module(modname)
            except ModuleNotFoundError as e:
                if e.name is not None and (modname == e.name or modname.startswith(e.name + ".")):
                    self.problem(path, f"cannot import module {modname!r} ({e}); the module must be importable from the "
                                       f"run file's directory ({self.base_dir}), the current directory or sys.path")
                else:
                    self.problem(path, f"importing module {modname!r} failed: {e}; install the missing package")
                return None
            except Exception as e:  # noqa: BLE001 - reported with its line
                self.problem(path, f"importing module {modname!r} failed: {type(e).__name__}: {e}")
                return None
        obj: Any = mod
        for part in attr.split("."):
            if not hasattr(obj, part):
                public = [n for n in dir(obj) if not n.startswith("_")]
                self.problem(path, f"module {modname!r} has no attribute {attr!r}{_close(part, public)}")
                return None
            obj = getattr(obj, part)
        return obj, f"module {modname} ({getattr(mod, '__file__', '?')})"

    # -- arguments
    def args_of(self, path: Path, table: dict[str, Any], allowed: set[str]) -> dict[str, Any]:
        for key in table:
            if key not in allowed and key != "args":
                self.problem(path + (key,), f"unknown key {key!r}{_close(key, allowed | {'args'})}; allowed here: "
                                            f"{', '.join(sorted(allowed | {'args'}))} (put arguments in args = {{...}})")
        args = table.get("args", {})
        if not isinstance(args, dict):
            self.problem(path + ("args",), f"args must be a table of keyword arguments, e.g. args = {{ x = 1 }}, got {args!r}")
            return {}
        return {k: self.value(path + ("args", k), v) for k, v in args.items()}

    def value(self, path: Path, v: Any) -> Any:
        if isinstance(v, list):
            return [self.value(path + (i,), x) for i, x in enumerate(v)]
        if isinstance(v, dict):
            kinds = [k for k in v if k in _REF_KINDS]
            if len(kinds) == 1 and set(v) <= {kinds[0], "args"}:
                comp = self.component(path, _REF_KINDS[kinds[0]], v, name_key=kinds[0])
                return comp if comp is not None else None
            return {k: self.value(path + (k,), x) for k, x in v.items()}
        return v

    def check_call(self, path: Path, target: Any, name: str, args: dict[str, Any]) -> bool:
        try:
            bound = compose.check_arguments(target, (), args, label=name)
        except compose.ComponentArgumentError as e:
            bad = [k for k in args if f"{k!r} is not a parameter" in str(e)]
            self.problem(path + ("args", bad[0]) if bad else path + ("args",), f"{e} Fix args = {{...}} of this entry.")
            return False
        ok = True
        for key, annotation, value in _annotated_arguments(target, bound):
            if _fits(annotation, value) is False:
                takes = _annotation_text(target, key, annotation)
                self.problem(path + ("args", key), f"{name}: {key} = {value!r} is {_toml_kind(value)}, but {name} "
                                                   f"takes {takes} for {key}; fix the value in args = {{...}} of "
                                                   "this entry")
                ok = False
        return ok

    # -- one component
    def component(self, path: Path, kind: str, table: Any, name_key: str = "name") -> Component | None:
        label = _where(path)
        if not isinstance(table, dict):
            self.problem(path, f"expected a table ({_TOP_KEYS.get(path[0], '')}), got {table!r}")
            return None
        if kind in ("model", "data", "object"):
            key = {"model": "class", "data": "function", "object": "object"}[kind]
            if key not in table:
                self.problem(path, f"missing {key} = \"module:attribute\"")
                self.args_of(path, table, {key})
                return None
            found = self.import_target(path + (key,), table[key], key)
            args = self.args_of(path, table, {key})
            if found is None:
                return None
            target, provider = found
            call = kind != "object" or "args" in table
            if call and not callable(target):
                self.problem(path + (key,), f"{table[key]} is {target!r}, which cannot be called")
                return None
            if call and not self.check_call(path, target, table[key], args):
                return None
            return Component(kind, label, table[key], target, args, provider, self.line(path), call=call,
                             arg_lines=self.arg_lines(path, args))
        # a [[callbacks]] or [[monitors]] entry may name the key its saved state goes under
        keys = {name_key, "state_key"} if len(path) == 2 and path[0] in ("callbacks", "monitors") else {name_key}
        if name_key not in table:
            if kind == "trainer":
                table = {**table, "name": "SimpleTrainer"}
            else:
                self.problem(path, f"missing {name_key} = \"<registered name>\" (see `trainbus plugins`)")
                self.args_of(path, table, keys)
                return None
        name = table[name_key]
        args = self.args_of(path, table, keys)
        state_key = table.get("state_key") if "state_key" in keys else None
        if state_key is not None and (not isinstance(state_key, str) or not state_key.strip()):
            self.problem(path + ("state_key",), f"state_key must be a non-empty string, the key this callback's "
                                                f"state is saved under (e.g. state_key = \"val-early-stop\"), "
                                                f"got {state_key!r}")
            state_key = None
        if not isinstance(name, str):
            self.problem(path + (name_key,), f"{name_key} must be a string, got {name!r}")
            return None
        try:
            target = compose.resolve(kind, name)
        except compose.MissingPluginError as e:
            self.problem(path + (name_key,), f"{e}")
            return None
        except compose.UnknownComponentError as e:
            self.problem(path + (name_key,), f"{e}")
            return None
        except Exception as e:  # noqa: BLE001 - a broken plugin: reported with its line
            self.problem(path + (name_key,), f"{type(e).__name__}: {e}")
            return None
        if not self.check_call(path, target, name, args):
            return None
        return Component(kind, label, name, target, args, compose.provider_of(kind, name), self.line(path),
                         arg_lines=self.arg_lines(path, args), state_key=state_key,
                         state_key_line=self.line(path + ("state_key",)) if state_key is not None else None)

    def arg_lines(self, path: Path, args: dict[str, Any]) -> dict[str, int]:
        return {k: line for k in args if (line := self.line(path + ("args", k))) is not None}

    # -- the whole document
    def check(self) -> RunPlan:
        doc = self.doc
        for key in doc:
            if key not in _TOP_KEYS:
                self.problem((key,), f"unknown section {key!r}{_close(key, _TOP_KEYS)}; a run file has: "
                                     f"{', '.join(_TOP_KEYS)}")
        model = data = trainer = sessinit = None
        if "model" not in doc:
            self.problems.append(Problem(None, "model", "missing [model] section with class = \"module:Class\""))
        else:
            model = self.component(("model",), "model", doc["model"])
        if "data" not in doc:
            self.problems.append(Problem(None, "data", "missing [data] section with function = \"module:function\""))
        else:
            data = self.component(("data",), "data", doc["data"])
        trainer = self.component(("trainer",), "trainer", doc.get("trainer", {}))
        if "session_init" in doc:
            sessinit = self.component(("session_init",), "session_init", doc["session_init"])
        lists: dict[str, list[Component] | None] = {}
        for section, kind in (("callbacks", "callback"), ("monitors", "monitor")):
            if section not in doc:
                lists[section] = None
                continue
            items = doc[section]
            if not isinstance(items, list):
                self.problem((section,), f"{section} must be an array of tables: write each entry as [[{section}]]")
                lists[section] = []
                continue
            comps = [self.component((section, i), kind, t) for i, t in enumerate(items)]
            lists[section] = [c for c in comps if c is not None]
        self.check_state_keys([*(lists["callbacks"] or []), *(lists["monitors"] or [])])
        loop = self.loop_options(doc.get("train", {}))
        return RunPlan(model=model, data=data, trainer=trainer, session_init=sessinit,
                       callbacks=lists["callbacks"] or [], monitors=lists["monitors"], loop=loop,
                       loop_lines={k: line for k in loop if (line := self.line(("train", k))) is not None})

    def check_state_keys(self, comps: list[Component]) -> None:
        """Two entries given one ``state_key``: on resume, their states could not be told apart."""
        seen: dict[str, Component] = {}
        for c in comps:
            if c.state_key is None:
                continue
            first = seen.setdefault(c.state_key, c)
            if first is not c:
                self.problems.append(Problem(c.state_key_line, f"{c.label}.state_key", f"state_key {c.state_key!r} "
                                             f"is also the state_key of {first.label} (line {first.state_key_line}); "
                                             "each callback needs its own key to get its own saved state back on "
                                             "resume: change one of them"))

    def loop_options(self, train: Any) -> dict[str, Any]:
        if not isinstance(train, dict):
            self.problem(("train",), "[train] must be a table")
            return {}
        for key in train:
            if key not in _TRAIN_KEYS:
                self.problem(("train", key), f"unknown loop option {key!r}{_close(key, _TRAIN_KEYS)}; allowed: "
                                             f"{', '.join(sorted(_TRAIN_KEYS))}")
        out: dict[str, Any] = {k: v for k, v in train.items() if k in _TRAIN_KEYS}
        for key, lo in (("steps_per_epoch", 1), ("max_epoch", 1), ("starting_epoch", 0)):
            v = train.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < lo):
                self.problem(("train", key), f"{key} must be an integer >= {lo}, got {v!r}; write e.g. {key} = {max(lo, 1) * 2}")
        for key in ("default_callbacks", "resume"):
            if key in train and not isinstance(train[key], bool):
                self.problem(("train", key), f"{key} must be true or false, got {train[key]!r}")
        first, last = train.get("starting_epoch", 1), train.get("max_epoch")
        if all(isinstance(v, int) and not isinstance(v, bool) for v in (first, last)) and last < first:
            self.problem(("train", "max_epoch"), f"max_epoch ({last}) is smaller than starting_epoch ({first}); "
                                                 "the run would train no epoch")
        action = train.get("logdir_action")
        if action is not None and action not in ("k", "d", "b", "n", "q"):
            self.problem(("train", "logdir_action"), f"logdir_action must be one of \"k\" (keep), \"d\" (delete), "
                                                     f"\"b\" (backup), \"n\" (new), \"q\" (quit), got {action!r}")
        logdir = train.get("logdir")
        if logdir is not None:
            if not isinstance(logdir, str) or not logdir:
                self.problem(("train", "logdir"), f"logdir must be a directory path string, got {logdir!r}")
            elif os.path.exists(logdir) and not os.path.isdir(logdir):
                self.problem(("train", "logdir"), f"the log directory {logdir} exists and is not a directory; "
                                                  "choose another path or remove the file")
            elif (why := _cannot_create(logdir)) is not None:
                self.problem(("train", "logdir"), why)
            elif action == "q" and os.path.isdir(logdir) and any(not n.startswith(".") for n in os.listdir(logdir)):
                self.problem(("train", "logdir_action"), f"the log directory {logdir} exists and is not empty, and "
                                                         "logdir_action = \"q\" says to quit; use \"k\" to resume "
                                                         "it, \"b\" to back it up or \"n\" for a new directory")
            elif action is None and os.path.isdir(logdir) and any(not n.startswith(".") for n in os.listdir(logdir)) \
                    and not (sys.stdin and sys.stdin.isatty()):
                self.problem(("train", "logdir"), f"the log directory {logdir} exists and is not empty; add "
                                                  "logdir_action = \"k\" (keep and resume), \"d\" (delete), \"b\" (backup) "
                                                  "or \"n\" (new directory) to [train]")
        return out


def _annotated_arguments(target: Any, bound: inspect.BoundArguments | None) -> Iterator[tuple[str, Any, Any]]:
    """``(name, annotation, value)`` of the arguments bound to annotated parameters (none when
    the annotations cannot be resolved)."""
    if bound is None:
        return
    func = target.__init__ if isinstance(target, type) else target
    try:
        hints = typing.get_type_hints(func)
    except Exception:  # noqa: BLE001 - unresolvable annotations: nothing to check
        return
    params = bound.signature.parameters
    for key, value in bound.arguments.items():
        if key in hints and params[key].kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            yield key, hints[key], value


_ARRAYS = (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence, collections.abc.Iterable,
           collections.abc.Collection)
_TABLES = (dict, collections.abc.Mapping, collections.abc.MutableMapping)


def _fits(annotation: Any, value: Any) -> bool | None:
    """Whether a value read from TOML fits a parameter's annotation: True, False, or None when
    it cannot be told (classes, callables, ``Any``, nested components)."""
    if isinstance(value, Component) or annotation is Any:
        return None
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        results = [_fits(a, value) for a in typing.get_args(annotation)]
        return True if True in results else (None if None in results else False)
    if annotation is type(None):
        return False  # TOML has no null
    if origin is not None:
        if origin in _ARRAYS:
            return True if isinstance(value, list) else (None if isinstance(value, str) else False)
        if origin in _TABLES:
            return isinstance(value, dict)
        return None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is str:
        return isinstance(value, str)
    if annotation in (list, tuple):
        return isinstance(value, list)
    if annotation is dict:
        return isinstance(value, dict)
    return None


def _toml_kind(value: Any) -> str:
    for t, word in ((bool, "a boolean"), (int, "an integer"), (float, "a float"), (str, "a string"), (list, "an array"),
                    (dict, "a table")):
        if isinstance(value, t):
            return word
    return f"a {type(value).__name__}"


def _annotation_text(target: Any, key: str, annotation: Any) -> str:
    """The annotation as written in the signature (``'int | None'``)."""
    try:
        written = compose._signature(target).parameters[key].annotation
    except (TypeError, ValueError, KeyError):
        written = inspect.Parameter.empty
    if isinstance(written, str):
        return written
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def _cannot_create(logdir: str) -> str | None:
    """Why the log directory could not be created or written when training starts, or None."""
    from trainbus.utils import logger

    try:
        logger._check_can_create(logdir)
    except OSError as e:
        return str(e).replace("set_logger_dir: ", "")
    return None


class _import_path:
    """Put a directory (and the current one) first on ``sys.path`` while importing."""

    def __init__(self, base: pathlib.Path) -> None:
        self.dirs = [str(base), os.getcwd()]

    def __enter__(self) -> None:
        self.added = [d for d in self.dirs if d not in sys.path]
        sys.path[:0] = self.added

    def __exit__(self, *exc: Any) -> None:
        for d in self.added:
            if d in sys.path:
                sys.path.remove(d)


# =============================================================================================
# the plan
# =============================================================================================

@dataclasses.dataclass
class RunPlan:
    """A checked run file: every component resolved, nothing built or started yet."""

    model: Component | None
    data: Component | None
    trainer: Component | None
    session_init: Component | None
    callbacks: list[Component]
    monitors: list[Component] | None  # None: DEFAULT_MONITORS()
    loop: dict[str, Any]
    filename: str = "<run file>"
    loop_lines: dict[str, int] = dataclasses.field(default_factory=dict)  # [train] key -> its line

    def components(self) -> Iterator[Component]:
        for c in (self.model, self.data, self.trainer, self.session_init, *self.callbacks, *(self.monitors or [])):
            if c is not None:
                yield c

    def _build_all(self, comps: list[Component]) -> list[Any]:
        """Build components, collecting every construction error (with its line) before raising."""
        built, problems = _build_collect(comps)
        if problems:
            raise RunConfigError(self.filename, problems)
        return built

    def construction_problems(self, skip: list[Problem] = ()) -> list[Problem]:
        """Build the callbacks, monitors, session initializer and model as the run would, in
        a throwaway log directory, and return what their constructors reject (wrong types,
        values out of range, unsorted schedules ...). Components under a place that already
        has a problem in ``skip`` are not built. Neither the data nor the trainer is built:
        they may be expensive or start services."""
        clean = _clean_of(skip)
        cbs = [c for c in (*self.callbacks, *(self.monitors or [])) if clean(c)]
        comps = [*cbs, *[c for c in (self.session_init, self.model) if c is not None and clean(c)]]
        with _quiet_plugin_log(), _stand_in_logdir(True):
            built, problems = _build_collect(comps)
            extra = _default_callbacks_of(self.loop)
        pairs = [*zip(cbs, built), *((None, cb) for cb in extra)]
        return problems + _state_key_problems(pairs)

    def build_callbacks(self) -> tuple[list[Any], list[Any], list[Any] | None]:
        """(callbacks, extra_callbacks, monitors or None for the defaults), constructed."""
        monitors_c = self.monitors or []
        built = self._build_all([*self.callbacks, *monitors_c])
        callbacks = built[:len(self.callbacks)]
        monitors = built[len(self.callbacks):] if self.monitors is not None else None
        return callbacks, _default_callbacks_of(self.loop), monitors

    def describe(self, callbacks: list[Any] | None = None, extra: list[Any] | None = None,
                 monitors: list[Any] | None = None) -> str:
        """The resolved plan: each component, who provides it, the loop options and (when the
        callbacks are given) the callback order per hook."""
        from trainbus.bus.order import describe_order

        rows: list[tuple[str, str, str]] = []
        if self.model:
            rows.append(("model", self.model.describe(), self.model.provider))
        if self.data:
            rows.append(("data", self.data.describe(), self.data.provider + "; not called in a dry run"))
        if self.trainer:
            rows.append(("trainer", self.trainer.describe(), self.trainer.provider))
        if self.session_init:
            rows.append(("session_init", self.session_init.describe(), self.session_init.provider))
        else:
            rows.append(("session_init", "JustCurrentSession()", "default"))
        for c in self.callbacks:
            rows.append((c.label, c.describe(), c.provider))
        if extra:
            for i, cb in enumerate(extra):
                name = type(cb).__name__
                rows.append((f"extra_callbacks[{i}]", f"{name}()", _provider_of_instance(cb) + "; DEFAULT_CALLBACKS"))
        elif not self.loop.get("default_callbacks", True):
            rows.append(("extra_callbacks", "(none: default_callbacks = false)", ""))
        if self.monitors is None:
            for i, m in enumerate(monitors or []):
                rows.append((f"monitors[{i}]", f"{type(m).__name__}()", _provider_of_instance(m) + "; DEFAULT_MONITORS"))
        else:
            for c in self.monitors:
                rows.append((c.label, c.describe(), c.provider))
        w1 = max(len(r[0]) for r in rows)
        w2 = min(max(len(r[1]) for r in rows), 60)
        lines = [f"run plan of {self.filename}"]
        lines += [f"  {a:<{w1}}  {b:<{w2}}  {c}".rstrip() for a, b, c in rows]
        loop = {k: self.loop.get(k) for k in ("steps_per_epoch", "starting_epoch", "max_epoch")}
        loop["steps_per_epoch"] = loop["steps_per_epoch"] or "(size of the data)"
        loop["starting_epoch"] = loop["starting_epoch"] or 1
        loop["max_epoch"] = loop["max_epoch"] or 99999
        lines.append(f"  {'loop':<{w1}}  " + " ".join(f"{k}={v}" for k, v in loop.items()))
        if self.loop.get("logdir"):
            resume = "resume from its newest checkpoint" if self.loop.get("resume", True) else "start over"
            lines.append(f"  {'logdir':<{w1}}  {self.loop['logdir']} (if not empty: "
                         f"{self.loop.get('logdir_action') or 'ask'}; {resume}; acted on when training starts)")
        if callbacks is not None:
            lines.append("")
            lines.append("callback order per hook:")
            order = describe_order([*callbacks, *(extra or [])], monitors or [])
            lines += ["  " + line for line in order.splitlines()]
        return "\n".join(lines)

    def dry_run(self) -> str:
        """Build the callbacks and monitors (not the model input, nothing trains) and describe the plan."""
        from trainbus.train.config import DEFAULT_MONITORS

        with _quiet_plugin_log(), _stand_in_logdir(bool(self.loop.get("logdir"))):
            callbacks, extra, monitors = self.build_callbacks()
            self._build_all([c for c in (self.trainer, self.session_init, self.model) if c is not None])
            return self.describe(callbacks, extra, monitors if monitors is not None else DEFAULT_MONITORS())

    def train(self, problems: list[Problem] | None = None) -> Any:
        """Build everything and check the run, reporting every problem at once (with lines),
        with ``problems`` (those the file's check found, if it was not raised); then train.
        Each component is built once. Nothing is deleted, moved or created in the log
        directory before every check passed: ``logdir_action`` is carried out when training
        starts. With ``resume`` (the default) and a log directory, the run continues from the
        newest checkpoint there (``AutoResumeTrainConfig``). Returns the trainer."""
        from trainbus.utils import logger

        problems = list(problems or [])
        prev_dir = logger.get_logger_dir()
        logdir = self.loop.get("logdir")
        if logdir and not any(p.where.startswith("train.logdir") for p in problems):
            # chosen now (constructors read it), acted on when training starts
            try:
                logger.set_logger_dir(logdir, action=self.loop.get("logdir_action"))
            except (OSError, ValueError) as e:
                problems.append(Problem(self.loop_lines.get("logdir_action", self.loop_lines.get("logdir")),
                                        "train.logdir", f"{type(e).__name__}: {e}"))
        try:
            return self._check_and_train(problems)
        except RunConfigError:
            logger._drop_pending()  # nothing happened on disk; forget the chosen directory
            logger.LOG_DIR = prev_dir
            raise

    def _check_and_train(self, problems: list[Problem]) -> Any:
        from trainbus.dataflow import is_dataflow
        from trainbus.input_source import InputSource
        from trainbus.train.config import AutoResumeTrainConfig, TrainConfig
        from trainbus.train.interface import launch_train_with_config
        from trainbus.train.model_desc import ModelDescBase
        from trainbus.train.tower import SingleCostTrainer
        from trainbus.utils import logger

        if (self.model is None or self.data is None or self.trainer is None) and not problems:
            raise RunConfigError(self.filename, [Problem(None, "(file)", "the plan has no model, data or trainer")])
        n_cb = len(self.callbacks)
        monitors_c = self.monitors or []
        comps = [*self.callbacks, *monitors_c, self.trainer, self.model, self.session_init]
        # a component under a place that already has a problem is not built (its error would
        # only repeat that problem)
        clean = _clean_of(problems)
        built, build_problems = _build_collect([c if c is not None and clean(c) else None for c in comps])
        problems += build_problems
        extra = _default_callbacks_of(self.loop)
        problems += _state_key_problems([*zip([*self.callbacks, *monitors_c], built), *((None, cb) for cb in extra)])
        callbacks, monitors = built[:n_cb], (built[n_cb:n_cb + len(monitors_c)] if self.monitors is not None else None)
        trainer, model, sessinit = built[n_cb + len(monitors_c):]
        if model is not None and not isinstance(model, ModelDescBase):
            problems.append(Problem(self.model.line, "model", f"{self.model.name} built {model!r}, which is not a "
                                                              "ModelDesc; name a ModelDesc subclass"))
        if trainer is not None and not isinstance(trainer, SingleCostTrainer):
            problems.append(Problem(self.trainer.line, "trainer", f"{self.trainer.name} is not a single-cost trainer; "
                                                                  "a run file needs one such as SimpleTrainer"))
        if problems:  # the data may be expensive to make: only once everything else is right
            raise RunConfigError(self.filename, sorted(problems, key=_line_order))
        data = self._build_all([self.data])[0]
        if not (is_dataflow(data) or isinstance(data, InputSource)):
            raise RunConfigError(self.filename, [Problem(self.data.line, "data", f"{self.data.describe()} returned "
                                                 f"{data!r}; it must return a DataFlow or an InputSource")])
        kw = dict(model=model, callbacks=callbacks, extra_callbacks=extra, monitors=monitors,
                  starting_epoch=self.loop.get("starting_epoch", 1),
                  steps_per_epoch=self.loop.get("steps_per_epoch"), max_epoch=self.loop.get("max_epoch", 99999))
        kw["data" if isinstance(data, InputSource) else "dataflow"] = data
        if sessinit is not None:
            kw["session_init"] = sessinit
        resume = bool(self.loop.get("logdir")) and self.loop.get("resume", True)
        try:
            if resume:
                ckpt_dir = _checkpoint_dir_of(callbacks, logger.get_logger_dir())
                config = AutoResumeTrainConfig(always_resume=True, checkpoint_dir=ckpt_dir, **kw)
            else:
                config = TrainConfig(**kw)
        except (TypeError, ValueError) as e:
            from trainbus.utils.cbstate import DamagedCheckpointError
            from trainbus.utils.stats import CorruptStatsError

            if resume and isinstance(e, (DamagedCheckpointError, CorruptStatsError)):
                # nothing of the log directory can be resumed from: say so, and how to start over
                problem = Problem(self.loop_lines.get("logdir"), "train.logdir",
                                  f"cannot resume from the log directory: {e} (or set resume = false, or "
                                  "logdir_action = \"b\" to start over with the old content backed up)")
            else:
                problem = Problem(None, "train", str(e))
            raise RunConfigError(self.filename, [problem]) from e
        launch_train_with_config(config, trainer)
        return trainer


def _default_callbacks_of(loop: dict[str, Any]) -> list[Any]:
    """``DEFAULT_CALLBACKS()`` unless the run file says ``default_callbacks = false``."""
    from trainbus.train.config import DEFAULT_CALLBACKS

    return DEFAULT_CALLBACKS() if loop.get("default_callbacks", True) else []


def _checkpoint_dir_of(callbacks: list[Any], logdir: str | None) -> str | None:
    """Where the run's checkpoints are: the directory of its first ``ModelSaver`` when that is
    not the log directory (None: the log directory)."""
    for cb in callbacks:
        if type(cb).__name__ == "ModelSaver" and getattr(cb, "checkpoint_dir", None):
            d = os.path.abspath(cb.checkpoint_dir)
            return None if logdir and d == os.path.abspath(logdir) else d
    return None


def _line_order(p: Problem) -> tuple[bool, int]:
    return (p.line is None, p.line or 0)


def _clean_of(problems: list[Problem]) -> Any:
    """A test of whether a component is free of the places these problems name."""
    bad = [p.where for p in problems]

    def clean(c: Component) -> bool:
        return not any(w == c.label or w.startswith(c.label + ".") or w.startswith(c.label + "[") for w in bad)

    return clean


def _state_key_problems(pairs: list[tuple[Component | None, Any]]) -> list[Problem]:
    """Built callbacks and monitors (with their entries; None for those the run adds, like
    ``DEFAULT_CALLBACKS()``) of which two that save state have one effective ``state_key``:
    the class's default key or the one the file gives. Pairs whose keys the file gave both are
    left to the file's check (which reports them at their lines)."""
    problems: list[Problem] = []
    seen: dict[str, tuple[Component | None, Any]] = {}
    for comp, obj in pairs:
        has_state = getattr(obj, "_has_state", None)
        if obj is None or has_state is None or not has_state():
            continue
        key = obj.state_key
        if key not in seen:
            seen[key] = (comp, obj)
            continue
        first, first_obj = seen[key]
        if comp is not None and first is not None and comp.state_key is not None and first.state_key is not None:
            continue
        here, there, there_obj = (comp, first, first_obj) if comp is not None else (first, None, obj)
        if here is None:  # two callbacks the run adds itself: the trainer reports it when it sets them up
            continue
        other = (f"{there.label} (line {there.line})" if there is not None
                 else f"{there_obj} (added by default_callbacks = true)")
        problems.append(Problem(here.state_key_line or here.line, f"{here.label}.state_key" if here.state_key
                                else here.label,
                                f"{here.describe()} saves its state under the key {key!r}, as {other} does; on "
                                "resume their saved states could not be told apart: add state_key = \"<a key of "
                                "its own>\" to this entry"))
    return problems


def _build_collect(comps: list[Component | None]) -> tuple[list[Any], list[Problem]]:
    """Build each component (None stays None); ``(built or None each, problems)``."""
    built: list[Any] = []
    problems: list[Problem] = []
    for c in comps:
        if c is None:
            built.append(None)
            continue
        try:
            built.append(c.build())
        except Exception as e:  # noqa: BLE001 - reported all at once with lines
            problems.append(c.problem_from(e))
            built.append(None)
    return built, problems


def _provider_of_instance(obj: Any) -> str:
    """The distribution that defines the class of ``obj`` (``"trainbus-summary 0.1.0"``)."""
    import importlib_metadata as md

    top = type(obj).__module__.split(".")[0]
    dists = md.packages_distributions().get(top) or []
    if dists:
        try:
            return f"{dists[0]} {md.version(dists[0])}"
        except md.PackageNotFoundError:
            pass
    return f"module {type(obj).__module__}"


class _stand_in_logdir:
    """In a dry run, let constructors that read the log directory see a throwaway one, so the
    plan is built as the run would build it, without creating the run's directory."""

    def __init__(self, active: bool) -> None:
        self.active = active

    def __enter__(self) -> None:
        import tempfile

        from trainbus.utils import logger

        self.prev = logger.LOG_DIR
        if self.active:
            self.tmp = tempfile.TemporaryDirectory(prefix="trainbus-dry-run-")
            logger.LOG_DIR = self.tmp.name

    def __exit__(self, *exc: Any) -> None:
        from trainbus.utils import logger

        if self.active:
            logger.LOG_DIR = self.prev
            self.tmp.cleanup()


class _quiet_plugin_log:
    """Silence the "loaded plugin ..." info lines while a plan is printed."""

    def __enter__(self) -> None:
        import logging

        self.log = logging.getLogger("trainbus.plugins")
        self.level = self.log.level
        self.log.setLevel(logging.WARNING)

    def __exit__(self, *exc: Any) -> None:
        self.log.setLevel(self.level)


def load_run_file(path: str | os.PathLike) -> RunPlan:
    """Read and check a run file; every problem is reported at once (:class:`RunConfigError`),
    including what the constructors of its callbacks, monitors, session initializer and model
    reject (they are built in a throwaway log directory, then dropped)."""
    plan, problems = _check_file(path)
    p = pathlib.Path(path)
    # what the constructors reject belongs to the same report (one pass, not one per fix)
    with _import_path(p.resolve().parent):
        problems += plan.construction_problems(skip=problems)
    if problems:
        raise RunConfigError(plan.filename, sorted(problems, key=_line_order))
    return plan


def _check_file(path: str | os.PathLike) -> tuple[RunPlan, list[Problem]]:
    """The checked plan and the problems of the file's text (names, signatures, annotated
    types, loop options); raises only when the file cannot be read or parsed."""
    p = pathlib.Path(path)
    fname = str(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise RunConfigError(fname, [Problem(None, "(file)", f"cannot read the run file: {e}")]) from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise RunConfigError(fname, [_syntax_problem(e, text)]) from None
    checker = _Checker(doc, scan_key_lines(text), p.resolve().parent)
    plan = checker.check()
    plan.filename = fname
    return plan, list(checker.problems)


def train_from_file(path: str | os.PathLike, dry_run: bool = False) -> Any:
    """Check the run file, then train (returns the trainer) or, with ``dry_run``, return the
    plan's description without training. Either way every mistake is reported at once; a
    real run builds each component once (with the run's log directory chosen, not acted on)."""
    if dry_run:
        return load_run_file(path).dry_run()
    plan, problems = _check_file(path)
    with _import_path(pathlib.Path(path).resolve().parent):
        return plan.train(problems)

