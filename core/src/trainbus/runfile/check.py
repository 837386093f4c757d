"""Checking a run file in one pass: every section, name, argument (against the signature and
its annotated types), loop option and ``state_key`` is resolved or reported as a
:class:`~trainbus.runfile.scan.Problem` with its line; :class:`Component` is one resolved
entry. Also the checks of built callbacks (effective state keys) that join the same report."""

from __future__ import annotations

import collections.abc
import dataclasses
import difflib
import importlib
import inspect
import os
import pathlib
import re
import sys
import types
import typing
from typing import Any, Iterator

from trainbus import compose
from trainbus.runfile.scan import Path, Problem, _where

__all__ = ["Component"]

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
             "default_callbacks, seed",
}
_TRAIN_KEYS = {"steps_per_epoch", "max_epoch", "starting_epoch", "logdir", "logdir_action", "resume",
               "default_callbacks", "seed"}


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
                    self.problem(path, f"cannot import module {modname!r} ({e}); the module must be importable "
                                       f"from the run file's directory ({self.base_dir}), the current directory or "
                                       "sys.path")
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
                allowed_here = ", ".join(sorted(allowed | {"args"}))
                self.problem(path + (key,), f"unknown key {key!r}{_close(key, allowed | {'args'})}; allowed here: "
                                            f"{allowed_here} (put arguments in args = {{...}})")
        args = table.get("args", {})
        if not isinstance(args, dict):
            self.problem(path + ("args",), "args must be a table of keyword arguments, e.g. args = { x = 1 }, "
                                           f"got {args!r}")
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
            if len(kinds) == 1 and set(v) <= {kinds[0], "args", "state_key"}:
                self.problem(path + ("state_key",), "state_key belongs to the [[callbacks]] or [[monitors]] entry, "
                                                    "not to a component inside its arguments (a wrapper such as "
                                                    "PeriodicTrigger saves the wrapped callback's state under the "
                                                    "entry's key): move it next to name")
                return None
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
    def check(self) -> dict[str, Any]:
        """The fields of the :class:`~trainbus.runfile.plan.RunPlan` (every component resolved);
        the problems found on the way are in ``self.problems``."""
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
        return dict(model=model, data=data, trainer=trainer, session_init=sessinit,
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
                self.problem(("train", key), f"{key} must be an integer >= {lo}, got {v!r}; write e.g. "
                                             f"{key} = {max(lo, 1) * 2}")
        seed = train.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= 2 ** 31 - 1):
            self.problem(("train", "seed"), f"seed must be an integer from 0 to 2**31 - 1, got {seed!r}; write e.g. "
                                            "seed = 42")
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
                                                  "logdir_action = \"k\" (keep and resume), \"d\" (delete), "
                                                  "\"b\" (backup) "
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
    """Why the log directory could not be created or written when training starts, or None. An
    existing directory that cannot be written is named with the reason: a read-only file system
    (which stops root as well) or the permissions."""
    from trainbus.utils import logger

    try:
        logger._check_can_create(logdir)
    except OSError as e:
        if not os.path.isdir(logdir):
            return str(e).replace("set_logger_dir: ", "")
        try:
            read_only = bool(os.statvfs(logdir).f_flag & os.ST_RDONLY)
        except (OSError, AttributeError):
            read_only = False
        if read_only:
            return (f"the log directory {logdir} is on a read-only file system, so the run could write nothing "
                    "there; remount it read-write or set logdir to a directory on a writable disk")
        import shlex

        return (f"the log directory {logdir} is not writable by this user; give it write permission "
                f"(chmod u+w {shlex.quote(logdir)}) or set logdir to a writable directory")
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
