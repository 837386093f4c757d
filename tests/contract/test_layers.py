"""The layering of the core and the plugins' use of it, read from the source with ``ast``.

Every import counts: at module level, inside functions and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "core" / "src" / "trainbus"
PLUGINS = sorted(p for p in (ROOT / "plugins").glob("*/src/*") if p.is_dir() and p.name.startswith("trainbus_"))

#: modules kept only so that old import paths work: each replaces itself by its new module
ALIASES = {"trainbus._manager", "trainbus._registry", "trainbus._catalogue", "trainbus._modpaths",
           "trainbus._exceptions", "trainbus.hookspecs", "trainbus.train._fastrun"}


def _module_name(path: Path, base: Path, package: str) -> str:
    rel = path.relative_to(base).with_suffix("")
    parts = [package, *rel.parts]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, module: str) -> list[tuple[str, int]]:
    """Every module ``path`` imports (absolute names; ``from a import b`` gives ``a.b`` too)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_pkg else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                src = ".".join(base + ([node.module] if node.module else []))
            else:
                src = node.module or ""
            out.append((src, node.lineno))
            out += [(f"{src}.{a.name}", node.lineno) for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                out.append((node.args[0].value, node.lineno))
    return out


def _core_modules() -> dict[str, Path]:
    return {_module_name(p, CORE, "trainbus"): p for p in CORE.rglob("*.py")}


CORE_MODULES = _core_modules()


def _core_targets(imported: str) -> set[str]:
    """The core modules an imported name refers to (itself, or its package for a name in it)."""
    found = set()
    name = imported
    while name:
        if name in CORE_MODULES:
            found.add(name)
            break
        name = name.rpartition(".")[0]
    return found


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_bus_imports_nothing_from_the_layers_above_it():
    allowed = ("trainbus.bus", "trainbus.exceptions")
    bad = []
    for mod, path in CORE_MODULES.items():
        if not _in(mod, "trainbus.bus"):
            continue
        for imported, line in _imports(path, mod):
            if imported.startswith("trainbus") and not any(_in(imported, a) for a in allowed):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    assert not bad, "trainbus.bus may import only itself and trainbus.exceptions:\n" + "\n".join(bad)


def test_callbacks_never_import_train_or_session():
    bad = []
    for mod, path in CORE_MODULES.items():
        if not _in(mod, "trainbus.callbacks"):
            continue
        for imported, line in _imports(path, mod):
            if _in(imported, "trainbus.train") or _in(imported, "trainbus.session"):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    assert not bad, "\n".join(bad)


def test_the_session_layer_does_not_import_train():
    bad = []
    for mod, path in CORE_MODULES.items():
        if _in(mod, "trainbus.session"):
            bad += [f"{path.relative_to(ROOT)}:{line} imports {imp}" for imp, line in _imports(path, mod)
                    if _in(imp, "trainbus.train")]
    assert not bad, "\n".join(bad)


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for mod, path in CORE_MODULES.items():
        if mod in ALIASES:
            continue
        deps = set()
        for imported, _ in _imports(path, mod):
            deps |= _core_targets(imported)
        # importing a submodule runs its packages' __init__ first: those are not cycles of mod's
        graph[mod] = {d for d in deps - {mod} if not _in(mod, d) and d not in ALIASES}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_among_core_modules():
    cycles = _cycles(_graph())
    assert not cycles, f"import cycles among core modules (imports inside functions count): {cycles}"


def _private_attribute_uses(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        owner = node.value
        # trainer._x, self.trainer._x, hooked_sess._x, self.trainer.hooked_sess._x
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if name in ("trainer", "hooked_sess", "hooked"):
            found.append((node.lineno, f"{name}.{node.attr}"))
    return found


def test_no_private_trainer_or_session_state_outside_train_and_session():
    bad = []
    files = [p for m, p in CORE_MODULES.items() if not (_in(m, "trainbus.train") or _in(m, "trainbus.session"))]
    for pkg in PLUGINS:
        files += sorted(pkg.rglob("*.py"))
    for path in files:
        bad += [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in _private_attribute_uses(path)]
    assert not bad, "private trainer/session state used from outside train/ and session/:\n" + "\n".join(bad)


def test_no_pluggy_private_api_anywhere():
    bad = []
    files = list(CORE_MODULES.values())
    for pkg in PLUGINS:
        files += sorted(pkg.rglob("*.py"))
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pluggy._"):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: from {node.module} import ...")
            if isinstance(node, ast.Attribute) and node.attr in ("_remove_plugin", "_hookexec", "_hookimpls",
                                                                  "_inner_hookexec", "_add_hookimpl", "_name2plugin"):
                bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: .{node.attr}")
    assert not bad, "\n".join(bad)


def _private(module: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in module.split("."))


@pytest.mark.parametrize("pkg", PLUGINS, ids=lambda p: p.name)
def test_plugins_import_no_private_module_of_trainbus_or_of_another_distribution(pkg):
    bad = []
    for path in sorted(pkg.rglob("*.py")):
        mod = _module_name(path, pkg.parent, "")[1:]
        for imported, line in _imports(path, mod):
            top = imported.split(".")[0]
            if top == pkg.name:
                continue  # its own modules, private or not
            if top == "trainbus" or top.startswith("trainbus_"):
                # a private module, or a private name taken from a module
                if _private(imported.rpartition(".")[0]) or (top != "trainbus" and _private(imported)):
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {imported}")
    assert not bad, ("plugins import only public trainbus modules (trainbus.plugin_api for what the core "
                     "shares with plugins):\n" + "\n".join(bad))


def test_the_checks_see_a_planted_violation(tmp_path):
    """The readers above are not blind: a file with each kind of violation is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("from trainbus.train._signals import x\n"
                   "def f(trainer):\n    import trainbus.train.base\n    return trainer._stop_reason\n")
    imported = {i for i, _ in _imports(bad, "trainbus.bus.bad")}
    assert "trainbus.train._signals" in imported and "trainbus.train.base" in imported
    assert _private("trainbus.train._signals")
    assert _private_attribute_uses(bad) == [(4, "trainer._stop_reason")]
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
