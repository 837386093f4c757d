"""``trainbus.graph_builder`` lives in ``trainbus-trainers-multigpu`` (its only users are the
multi-device and distributed trainers); without that distribution, importing the path is one
``ModuleNotFoundError`` line naming what to install, and ``from trainbus import *`` still works."""

from __future__ import annotations

import sys

import pytest

from trainbus.bus import modpaths, registry

#: the path, imported here only with every declared module path hidden (``without_declared_modules``):
#: these tests run with the core alone
GRAPH_BUILDER = "trainbus.graph_builder"


@pytest.fixture
def without_declared_modules(monkeypatch):
    """As if no distribution declared a module path (the core alone), for this test. The table
    ``from trainbus import *`` caches (per entry-point scan, which this does not change) is made
    afresh here and the process's own is given back afterwards, so that what this test computes
    does not leak into later tests of the same worker."""
    import trainbus

    real = registry.index
    monkeypatch.setattr(registry, "index", lambda group: {} if group == modpaths.MODULE_GROUP else real(group))
    monkeypatch.setattr(trainbus, "_STAR", [None, (), {}])
    for name in [m for m in sys.modules if m == "trainbus.graph_builder" or m.startswith("trainbus.graph_builder.")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.parametrize("path", [GRAPH_BUILDER, f"{GRAPH_BUILDER}.utils"])
def test_missing_graph_builder_names_the_distribution_in_one_line(without_declared_modules, path):
    import importlib

    with pytest.raises(ModuleNotFoundError) as ei:
        importlib.import_module(path)
    msg = str(ei.value)
    assert msg == ("trainbus.graph_builder is provided by the 'trainbus-trainers-multigpu' distribution, which is not "
                   "installed; install it: pip install trainbus-trainers-multigpu (from a trainbus checkout: "
                   "tools/build_wheels.sh, then pip install --find-links dist trainbus-trainers-multigpu)"), msg
    assert "\n" not in msg


def test_star_import_binds_graph_builder_only_when_it_is_installed(without_declared_modules):
    import trainbus

    assert "graph_builder" not in trainbus.__all__ and "SimpleTrainer" in trainbus.__all__


def test_the_star_import_of_later_tests_is_the_installed_one():
    """Runs after the test above (file order): ``from trainbus import *`` binds ``graph_builder``
    again exactly when its distribution is installed (the table that test made is not kept)."""
    import trainbus

    installed = GRAPH_BUILDER in modpaths.declared_modules()
    ns: dict = {}
    exec("from trainbus import *", ns)
    assert ("graph_builder" in trainbus.__all__) == installed
    assert ("graph_builder" in ns) == installed


def test_a_directory_an_older_checkout_left_is_not_an_empty_namespace_package(without_declared_modules, tmp_path,
                                                                              monkeypatch):
    """After a pull, ``trainbus/graph_builder/`` may remain holding only ``__pycache__``: the path is
    still answered by its distribution (here: absent, so the one line saying what to install)."""
    import importlib

    import trainbus

    (tmp_path / "graph_builder" / "__pycache__").mkdir(parents=True)
    monkeypatch.setattr(trainbus, "__path__", [*trainbus.__path__, str(tmp_path)])
    with pytest.raises(ModuleNotFoundError, match="provided by the 'trainbus-trainers-multigpu' distribution"):
        importlib.import_module(GRAPH_BUILDER)
