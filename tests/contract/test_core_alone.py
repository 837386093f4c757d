"""``tests/core`` runs with only the core (``trainbus``) installed.

Why a static check and not a run of ``tests/core`` in a core-only interpreter: that run costs as
much as ``tests/core`` itself (minutes of CPU, a TensorFlow import per subprocess test) on top
of the suite, which is already over its time budget. Reading the test files with ``ast`` costs
well under a second, and it fails on every way the core gives a test something a plugin
distribution provides, because the core gives them in these ways only:

1. a plugin package (``import trainbus_saver``);
2. a name resolved through a facade (``from trainbus.callbacks import ModelSaver``,
   ``trainbus.train.SyncMultiGPUTrainer``, ``getattr(trainbus.dataflow, "BatchData")``): the
   entry-point groups of ``trainbus.bus.registry.NAME_GROUPS``;
3. a module path a plugin declares in group ``trainbus.modules``
   (``import trainbus.dataflow.imgaug``);
4. the defaults the plugins contribute (``DEFAULT_CALLBACKS()``, ``DEFAULT_MONITORS()``, and
   ``TrainConfig``/``train_with_defaults`` called without ``extra_callbacks=`` or ``monitors=``,
   which then collect them): with the core alone they are empty, so a test that leaves them
   implicit runs another training when plugins are installed (the ambient plugins of group
   ``trainbus.plugins`` contribute only these, and ``sessinit_for``, which only the plugin name
   ``SmartInit`` asks);
5. a core entry point that itself resolves a plugin's name (:data:`CORE_REACHES`, kept complete
   by ``test_the_core_reaches_plugins_only_where_listed``), called the way that reaches it;
6. any of these inside Python code a test hands to a subprocess or writes to a file (a string
   that parses as a module with an import); and what only an installed plugin prints, expected
   in a string: a plugin's name under its facade (``"trainbus.callbacks.ModelSaver"``) or a
   plugin distribution with its version (``"trainbus-saver 0.1.0"``), as ``trainbus plugins``
   and ``trainbus --version`` print them.

The plugin names are those the repository's plugin distributions declare (their
``pyproject.toml``), so a name added to a plugin is covered at once. ``test_the_check_sees_each_kind``
plants one violation of each kind and asserts that it is reported. What it cannot see is a name
put together at run time (``exec(f"from {module} import {name}")`` with the name a parameter):
``tools/test_core_alone.sh`` runs ``tests/core`` for real with the core alone (``python -S``,
a view of site-packages without the plugin distributions; about a minute), and
``tools/bootstrap.sh test`` (CI) runs it before the suite; it is how such a case and the core's
own reaches into plugins (:data:`CORE_REACHES`) were found.
"""

from __future__ import annotations

import ast
import re
import textwrap
import tomllib
from pathlib import Path

from trainbus.bus import modpaths

ROOT = Path(__file__).resolve().parents[2]
CORE_TESTS = ROOT / "tests" / "core"
NAME_GROUPS = ("trainbus.callbacks", "trainbus.train", "trainbus.tfutils.sessinit", "trainbus.dataflow")
#: where the core itself resolves a plugin's name: file -> (what, [(callable, keyword)]); a call of
#: ``callable`` reaches it when the keyword is given, or (``"-keyword"``) when it is not, or (None) always
CORE_REACHES = {
    "core/src/trainbus/contrib/keras.py": (
        "KerasModel.fit(validation_data=...) validates with InferenceRunner and ScalarStats (trainbus-inference); "
        "KerasModel(...) without trainer= on several GPUs trains with SyncMultiGPUTrainerParameterServer "
        "(trainbus-trainers-multigpu)", [("fit", "validation_data"), ("KerasModel", "-trainer")]),
    "core/src/trainbus/train/config.py": (
        "AutoResumeTrainConfig restores the checkpoint it finds with SaverRestore (trainbus-sessinit)",
        [("AutoResumeTrainConfig", None)]),
}
#: calls that collect the plugins' default callbacks/monitors unless told otherwise
DEFAULTING_CALLS = {name: ("extra_callbacks", "monitors")
                    for name in ("TrainConfig", "AutoResumeTrainConfig", "train_with_defaults")}


def _plugin_declarations() -> tuple[dict[str, str], dict[str, str]]:
    """(name -> distribution, module path -> distribution) of every plugin distribution here."""
    names: dict[str, str] = {}
    paths: dict[str, str] = {}
    example = ROOT / "examples" / "thirdparty-plugin" / "pyproject.toml"
    for pp in sorted([*ROOT.glob("plugins/*/pyproject.toml"), example]):
        project = tomllib.loads(pp.read_text())["project"]
        for group, eps in project.get("entry-points", {}).items():
            if group in NAME_GROUPS:
                names.update(dict.fromkeys(eps, project["name"]))
            elif group == "trainbus.modules":
                paths.update(dict.fromkeys(eps, project["name"]))
    return names, paths


PLUGIN_NAMES, PLUGIN_PATHS = _plugin_declarations()
PLUGIN_DISTS = {*PLUGIN_NAMES.values(), *PLUGIN_PATHS.values()}
#: the modules whose names plugins provide: the facades of the name groups, ``trainbus`` and
#: tensorpack's module paths made of them (``trainbus.train.trainers``)
FACADES = {"trainbus", *NAME_GROUPS, *modpaths.FACADES}
DOTTED = re.compile(r"\btrainbus(?:\.\w+)+")
#: a distribution and its version, as ``trainbus plugins`` and ``trainbus --version`` print it
INSTALLED = re.compile(r"\b(trainbus-[a-z0-9-]+) \d+\.\d+")


def _is_plugin_module(module: str) -> str | None:
    top = module.split(".")[0]
    if top.startswith("trainbus_"):
        return f"imports the plugin package {top}"
    for path, dist in PLUGIN_PATHS.items():
        if module == path or module.startswith(path + "."):
            return f"imports {module}, a module path of {dist}"
    return None


def _root_name(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _trainbus_bindings(tree: ast.AST) -> set[str]:
    """The names a file binds to trainbus modules (``import trainbus``, ``import trainbus.x as
    y``, ``from trainbus import callbacks``)."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "trainbus":
                    bound.add(a.asname or "trainbus")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "trainbus":
            bound.update(a.asname or a.name for a in node.names if a.name[:1].islower())
    return bound


def _keywords(call: ast.Call) -> set[str] | None:
    """The keyword names of a call; None with ``**kwargs`` (then anything may be passed)."""
    if any(k.arg is None for k in call.keywords):
        return None
    return {k.arg for k in call.keywords}


def _has_import(text: str) -> bool:
    """Whether ``text`` is Python code with an import (code for a subprocess or a file)."""
    try:
        tree = ast.parse(textwrap.dedent(text))
    except SyntaxError:
        return False
    return any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree))


def plugin_needs(source: str, where: str) -> list[str]:
    """Every place in Python ``source`` where a test takes something from a plugin distribution."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    bound = _trainbus_bindings(tree)
    out: list[str] = []
    for node in ast.walk(tree):
        line = f"{where}:{getattr(node, 'lineno', '?')}"
        if isinstance(node, ast.Import):
            out += [f"{line} {why}" for a in node.names if (why := _is_plugin_module(a.name))]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            why = _is_plugin_module(node.module)
            if why:
                out.append(f"{line} {why}")
            elif node.module.split(".")[0] == "trainbus":
                out += [f"{line} imports {a.name} from {node.module}: {PLUGIN_NAMES[a.name]} provides it"
                        for a in node.names if a.name in PLUGIN_NAMES]
                out += [f"{line} {why}" for a in node.names if (why := _is_plugin_module(f"{node.module}.{a.name}"))]
        elif isinstance(node, ast.Attribute) and node.attr in PLUGIN_NAMES and _root_name(node.value) in bound:
            out.append(f"{line} uses {ast.unparse(node)}: {PLUGIN_NAMES[node.attr]} provides it")
        elif isinstance(node, ast.Call):
            func = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            args = node.args
            literal = args[0].value if args and isinstance(args[0], ast.Constant) else None
            if func == "import_module" and isinstance(literal, str) and (why := _is_plugin_module(literal)):
                out.append(f"{line} {why}")
            if (func == "getattr" and len(args) >= 2 and _root_name(args[0]) in bound
                    and isinstance(args[1], ast.Constant) and args[1].value in PLUGIN_NAMES):
                out.append(f"{line} uses getattr(..., {args[1].value!r}): {PLUGIN_NAMES[args[1].value]} provides it")
            for what, triggers in CORE_REACHES.values():
                for name, keyword in triggers:
                    given = _keywords(node)
                    if func != name or (keyword is not None and given is None):
                        continue
                    if keyword is None or (keyword.startswith("-") and keyword[1:] not in given) or \
                            (not keyword.startswith("-") and keyword in given):
                        out.append(f"{line} calls {name}() so that the core reaches a plugin: {what}")
            if func in ("DEFAULT_CALLBACKS", "DEFAULT_MONITORS"):
                out.append(f"{line} calls {func}(), which collects what the plugins contribute")
            elif func in DEFAULTING_CALLS:
                given = _keywords(node)
                missing = [k for k in DEFAULTING_CALLS[func] if given is not None and k not in given]
                if missing:
                    out.append(f"{line} calls {func}() without {'= / '.join(missing)}=, so the plugins' defaults "
                               "join the run; pass them (e.g. extra_callbacks=[], monitors=[])")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if "import " in node.value and _has_import(node.value):
                out += [f"{line} (code in a string) {p.split(' ', 1)[1]}"
                        for p in plugin_needs(textwrap.dedent(node.value), where)]
                continue
            for dotted in DOTTED.findall(node.value):
                last = dotted.rsplit(".", 1)[1]
                if last in PLUGIN_NAMES and dotted.rsplit(".", 1)[0] in FACADES:
                    out.append(f"{line} names {dotted} in a string: {PLUGIN_NAMES[last]} provides it")
            out += [f"{line} expects {m.group(0)!r} in an output: that distribution installed"
                    for m in INSTALLED.finditer(node.value) if m.group(1) in PLUGIN_DISTS]
    return out


def test_no_core_test_needs_a_plugin_distribution():
    files = sorted(CORE_TESTS.rglob("*.py"))
    assert len(files) > 10, files
    bad = [p for f in files for p in plugin_needs(f.read_text(), str(f.relative_to(ROOT)))]
    assert not bad, ("tests/core runs with the core alone (tests of what a plugin provides belong in that plugin's "
                     "tests/, tests of the whole installation in tests/ecosystem); these take something from a "
                     "plugin distribution:\n" + "\n".join(bad))


def test_the_core_reaches_plugins_only_where_listed():
    """The core modules that resolve a plugin's name in their code (not in a docstring or a
    message) are exactly those of :data:`CORE_REACHES`: a new one must say which test calls reach it."""
    reaching = set()
    for path in sorted((ROOT / "core" / "src" / "trainbus").rglob("*.py")):
        needs = plugin_needs(path.read_text(), str(path.relative_to(ROOT)))
        if any(" imports " in n or " uses " in n for n in needs):
            reaching.add(str(path.relative_to(ROOT)))
    assert reaching == set(CORE_REACHES), reaching


def test_the_check_sees_each_kind():
    assert PLUGIN_NAMES["ModelSaver"] == "trainbus-saver" and "SimpleTrainer" not in PLUGIN_NAMES
    planted = {
        "import trainbus_saver\n": "imports the plugin package trainbus_saver",
        "def f():\n    from trainbus_dataflow.common import x\n": "imports the plugin package trainbus_dataflow",
        "from trainbus.callbacks import Callback, ModelSaver\n": "imports ModelSaver from trainbus.callbacks: "
                                                                  "trainbus-saver provides it",
        "import trainbus.callbacks as cbs\ncbs.ModelSaver()\n": "uses cbs.ModelSaver: trainbus-saver provides it",
        "import trainbus\ntrainbus.train.SyncMultiGPUTrainer\n": "uses trainbus.train.SyncMultiGPUTrainer",
        "import trainbus\ngetattr(trainbus.dataflow, 'BatchData')\n": "uses getattr(..., 'BatchData')",
        "import trainbus.dataflow.imgaug\n": "imports trainbus.dataflow.imgaug, a module path of trainbus-dataflow",
        "import importlib\nimportlib.import_module('trainbus_sessinit')\n":
            "imports the plugin package trainbus_sessinit",
        "from trainbus.train import DEFAULT_CALLBACKS\nDEFAULT_CALLBACKS()\n": "calls DEFAULT_CALLBACKS()",
        "TrainConfig(model=m, dataflow=d, monitors=[])\n": "calls TrainConfig() without extra_callbacks=",
        "t.train_with_defaults(steps_per_epoch=3)\n":
            "calls train_with_defaults() without extra_callbacks= / monitors=",
        'CODE = """\nfrom trainbus.dataflow import BatchData\n"""\n': "(code in a string) imports BatchData",
        "assert '    trainbus.callbacks.ModelSaver' in out\n": "names trainbus.callbacks.ModelSaver in a string",
        "M.fit(validation_data=val, max_epoch=3)\n": "calls fit() so that the core reaches a plugin",
        "KerasModel(f, SIG_IN, SIG_OUT, input=train)\n": "calls KerasModel() so that the core reaches a plugin",
        "AutoResumeTrainConfig(model=m, dataflow=d, extra_callbacks=[], monitors=[])\n":
            "calls AutoResumeTrainConfig() so that the core reaches a plugin",
        "assert '  trainbus-saver 0.1.0 (plugin API 1)' in lines\n": "expects 'trainbus-saver 0.1' in an output",
    }
    for source, expected in planted.items():
        found = plugin_needs(source, "planted.py")
        assert any(expected in f for f in found), (source, found)
    clean = ("import trainbus\nfrom trainbus.train import SimpleTrainer, TrainConfig\nfrom trainbus.testing import "
             "train_tiny\nTrainConfig(model=m, dataflow=d, extra_callbacks=[], monitors=[])\nTrainConfig(**kw)\n"
             "trainbus.train.NoOpTrainer\nx.ModelSaver = 1\nM.fit(max_epoch=1)\nKerasModel(f, input=t, trainer=tr)\n")
    assert plugin_needs(clean, "clean.py") == []
