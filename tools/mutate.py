#!/usr/bin/env python
"""Mutation testing of the modules whose mistakes lose work or change results.

Each target is a module (optionally narrowed to some of its classes or functions) and the test
files that are meant to catch its mistakes. For every target, the tool makes one small change
at a time (a mutant) and runs those tests against it; a mutant the tests do not fail is a
*survivor*: a plausible bug nobody would notice. Survivors are printed at the end (file, line,
the change), to be killed by a new test or listed as equivalent in ``docs/reliability.md``.

The work happens in a scratch copy of the repository (``--workdir``, default a new temporary
directory): the checkout itself is never modified, so it is safe to run while others use it.
The copy is put first on ``PYTHONPATH`` (the editable installs of the virtualenv point at the
checkout; ``PYTHONPATH`` entries come before them).

Changes made (one per mutant, only inside the selected classes/functions):

* comparisons ``<`` / ``<=`` / ``>`` / ``>=`` / ``==`` / ``!=`` / ``in`` / ``is`` to their neighbour or negation
* arithmetic ``+`` / ``-`` / ``*`` / ``/`` / ``//`` / ``%`` swapped, augmented assignments likewise
* ``and`` / ``or`` swapped, ``not x`` to ``x``
* integer constants ``n`` to ``n + 1``, ``True`` / ``False`` swapped
* ``return x`` to ``return None``; a call statement, ``raise`` or ``continue``/``break`` to ``pass``

Usage (see ``tools/mutate.sh``, which lists the default targets)::

    python tools/mutate.py TARGET [TARGET ...] [--max N] [--timeout S] [--only FILE]

    TARGET = PATH[:NAME[,NAME...]]=TESTS[,TESTS...][#KEYWORD]

e.g. ``core/src/trainbus/session/fastrun.py=tests/core/test_hot_path.py``; ``#KEYWORD`` is passed
to pytest as ``-k KEYWORD``. ``--only FILE`` runs only the mutants listed in FILE (lines as the
survivor list prints them), e.g. to check that new tests kill the survivors of a previous run.
Exit status: 0 if no mutant survived, 1 if some did, 2 on a usage error or failing baseline.
"""

from __future__ import annotations

import argparse
import ast
import copy
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CMP_SWAPS = {ast.Lt: [ast.LtE, ast.GtE], ast.LtE: [ast.Lt, ast.Gt], ast.Gt: [ast.GtE, ast.LtE],
              ast.GtE: [ast.Gt, ast.Lt], ast.Eq: [ast.NotEq], ast.NotEq: [ast.Eq], ast.In: [ast.NotIn],
              ast.NotIn: [ast.In], ast.Is: [ast.IsNot], ast.IsNot: [ast.Is]}
_BIN_SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult,
              ast.Mod: ast.FloorDiv}


@dataclass
class Mutant:
    line: int
    description: str
    source: str  # the whole mutated module


@dataclass
class Target:
    path: Path
    names: tuple[str, ...]
    tests: tuple[str, ...]
    keyword: str = ""


def parse_target(text: str) -> Target:
    if "=" not in text:
        raise SystemExit(f"mutate: target {text!r} must look like PATH[:NAME,...]=TEST[,TEST...][#KEYWORD]")
    left, tests = text.split("=", 1)
    tests, _, keyword = tests.partition("#")
    path, _, names = left.partition(":")
    p = ROOT / path
    if not p.is_file():
        raise SystemExit(f"mutate: {path} (in target {text!r}) is not a file of the repository")
    test_list = tuple(t for t in tests.split(",") if t)
    for t in test_list:
        if not (ROOT / t.split("::")[0]).exists():
            raise SystemExit(f"mutate: test path {t} (in target {text!r}) does not exist")
    return Target(Path(path), tuple(n for n in names.split(",") if n), test_list, keyword)


def _selected_ranges(tree: ast.Module, names: tuple[str, ...], path: Path) -> list[tuple[int, int]]:
    if not names:
        return [(1, 10 ** 9)]
    found: dict[str, tuple[int, int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            found.setdefault(node.name, (node.lineno, node.end_lineno or node.lineno))
    missing = [n for n in names if n not in found]
    if missing:
        raise SystemExit(f"mutate: {path} defines no class or function named {', '.join(missing)}")
    return list(found.values())


def _replace_segment(src_lines: list[str], node: ast.AST, text: str) -> str:
    """The module source with ``node``'s source segment replaced by ``text``."""
    l0, c0, l1, c1 = node.lineno - 1, node.col_offset, node.end_lineno - 1, node.end_col_offset
    lines = list(src_lines)
    head = lines[l0][:c0]
    tail = lines[l1][c1:]
    lines[l0:l1 + 1] = [head + text + tail]
    return "".join(lines)


def _is_docstring(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    parent = parents.get(node)
    return isinstance(parent, ast.Expr) and isinstance(getattr(parent, "value", None), ast.Constant) \
        and isinstance(parent.value.value, str)


def generate(source: str, names: tuple[str, ...], path: Path) -> list[Mutant]:
    tree = ast.parse(source)
    ranges = _selected_ranges(tree, names, path)
    lines = source.splitlines(keepends=True)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    out: list[Mutant] = []

    def in_fstring(node: ast.AST) -> bool:
        while node in parents:
            node = parents[node]
            if isinstance(node, ast.JoinedStr):
                return True
        return False

    def inside(node: ast.AST) -> bool:
        ln = getattr(node, "lineno", None)
        return ln is not None and any(a <= ln <= b for a, b in ranges) and not in_fstring(node)

    def add(node: ast.AST, new: ast.AST | str, what: str) -> None:
        text = new if isinstance(new, str) else f"({ast.unparse(new)})"
        mutated = _replace_segment(lines, node, text)
        try:
            compile(mutated, str(path), "exec")
        except SyntaxError:
            return
        out.append(Mutant(node.lineno, what, mutated))

    for node in ast.walk(tree):
        if not inside(node):
            continue
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                for repl in _CMP_SWAPS.get(type(op), []):
                    m = copy.deepcopy(node)
                    m.ops[i] = repl()
                    add(node, m, f"{ast.unparse(node)}  ->  {ast.unparse(m)}")
        elif isinstance(node, ast.BinOp) and type(node.op) in _BIN_SWAPS:
            m = copy.deepcopy(node)
            m.op = _BIN_SWAPS[type(node.op)]()
            add(node, m, f"{ast.unparse(node)}  ->  {ast.unparse(m)}")
        elif isinstance(node, ast.AugAssign) and type(node.op) in _BIN_SWAPS:
            m = copy.deepcopy(node)
            m.op = _BIN_SWAPS[type(node.op)]()
            add(node, ast.unparse(m), f"{ast.unparse(node)}  ->  {ast.unparse(m)}")
        elif isinstance(node, ast.BoolOp):
            m = copy.deepcopy(node)
            m.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            add(node, m, f"{ast.unparse(node)}  ->  {ast.unparse(m)}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            add(node, node.operand, f"{ast.unparse(node)}  ->  {ast.unparse(node.operand)}")
        elif isinstance(node, ast.Constant) and not _is_docstring(node, parents):
            v = node.value
            if isinstance(v, bool):
                add(node, ast.Constant(not v), f"{v!r}  ->  {not v!r}")
            elif isinstance(v, int):
                add(node, ast.Constant(v + 1), f"{v!r}  ->  {v + 1!r}")
        elif isinstance(node, ast.Return) and node.value is not None \
                and not (isinstance(node.value, ast.Constant) and node.value.value is None):
            add(node, "return None", f"{ast.unparse(node)}  ->  return None")
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            add(node, "pass", f"{ast.unparse(node)}  ->  pass")
        elif isinstance(node, (ast.Raise, ast.Continue, ast.Break)):
            add(node, "pass", f"{ast.unparse(node).splitlines()[0]}  ->  pass")
    out.sort(key=lambda m: m.line)
    return out


def make_workdir(workdir: Path | None) -> Path:
    """A copy of the repository's sources and tests (no .git, no virtualenv, no caches)."""
    dest = workdir or Path(tempfile.mkdtemp(prefix="trainbus-mutate-"))
    dest.mkdir(parents=True, exist_ok=True)
    ignore = shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.egg-info", ".pytest_cache", "site", "mutants",
                                    "train_log", "build", "dist")
    for item in ROOT.iterdir():
        if item.name in (".git", ".venv", "site", "train_log"):
            continue
        target = dest / item.name
        if item.is_dir():
            shutil.copytree(item, target, ignore=ignore, dirs_exist_ok=True)
        else:
            shutil.copy2(item, target)
    return dest


def _env(work: Path) -> dict:
    paths = [str(work / "core" / "src")] + sorted(str(p) for p in (work / "plugins").glob("*/src"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONDONTWRITEBYTECODE="1")
    env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def run_tests(work: Path, tests: tuple[str, ...], timeout: float, keyword: str = "") -> tuple[str, float]:
    """``"passed"``, ``"failed"`` or ``"timeout"``, and the seconds taken."""
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "-o",
           "addopts=--import-mode=importlib", *(["-k", keyword] if keyword else []), *tests]
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, cwd=work, env=_env(work), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - t0
    return ("passed" if r.returncode == 0 else "failed"), time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("targets", nargs="+", help="PATH[:NAME,...]=TEST[,TEST...]")
    ap.add_argument("--max", type=int, default=0, help="at most this many mutants per target (0: all)")
    ap.add_argument("--timeout", type=float, default=0, help="seconds per test run (default: 5x the baseline + 30)")
    ap.add_argument("--workdir", type=Path, help="where to copy the repository (default: a new temporary directory)")
    ap.add_argument("--list", action="store_true", help="print the mutants and run nothing")
    ap.add_argument("--only", type=Path, help="a file of mutants as --list and the survivor list print them "
                                               "(PATH:LINE: CHANGE, one a line): run just those")
    args = ap.parse_args(argv)
    targets = [parse_target(t) for t in args.targets]
    only = None
    if args.only:
        only = {line.strip() for line in args.only.read_text().splitlines() if line.strip()}
    if args.list:
        for t in targets:
            for m in generate((ROOT / t.path).read_text(), t.names, t.path):
                print(f"{t.path}:{m.line}: {m.description}")
        return 0
    work = make_workdir(args.workdir)
    print(f"mutate: working copy {work}", flush=True)
    survivors: list[str] = []
    totals = []
    for t in targets:
        src_file = work / t.path
        original = src_file.read_text()
        mutants = generate(original, t.names, t.path)
        if only is not None:
            mutants = [m for m in mutants if f"{t.path}:{m.line}: {m.description}" in only]
        if args.max:
            mutants = mutants[:args.max]
        where = f"{t.path}" + (f" ({', '.join(t.names)})" if t.names else "")
        status, base = run_tests(work, t.tests, 3600, t.keyword)
        if status != "passed":
            print(f"mutate: the tests of {where} do not pass unmutated ({status}); fix them first", flush=True)
            return 2
        timeout = args.timeout or base * 5 + 30
        print(f"mutate: {where}: {len(mutants)} mutants against {', '.join(t.tests)} (baseline {base:.0f} s)",
              flush=True)
        killed = timed_out = 0
        try:
            for i, m in enumerate(mutants, 1):
                src_file.write_text(m.source)
                status, took = run_tests(work, t.tests, timeout, t.keyword)
                if status == "passed":
                    survivors.append(f"{t.path}:{m.line}: {m.description}")
                    mark = "SURVIVED"
                elif status == "timeout":
                    timed_out += 1
                    mark = "killed (timeout)"
                else:
                    killed += 1
                    mark = "killed"
                print(f"  [{i}/{len(mutants)}] {t.path}:{m.line}: {m.description}: {mark} ({took:.0f} s)", flush=True)
        finally:
            src_file.write_text(original)
        totals.append(f"{where}: {len(mutants)} mutants, {killed} killed by a failing test, {timed_out} by a "
                      f"timeout, {len(mutants) - killed - timed_out} survived")
    print("\nmutate: summary")
    for line in totals:
        print(f"  {line}")
    if survivors:
        print(f"\nmutate: {len(survivors)} surviving mutant(s) (kill each with a test, or list it as equivalent "
              "in docs/reliability.md):")
        for s in survivors:
            print(f"  {s}")
        return 1
    print("\nmutate: no surviving mutants")
    return 0


if __name__ == "__main__":
    sys.exit(main())
