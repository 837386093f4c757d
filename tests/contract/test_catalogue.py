"""``trainbus.bus.catalogue`` (which distribution provides each first-party name and module path,
and what each bundle installs) is generated from ``plugins/*/pyproject.toml`` and the core's
extras by ``tools/gen_catalogue.py``: a plugin that gains, loses or renames a name, or a bundle
that changes, without regenerating it, fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_catalogue_is_what_the_pyprojects_say():
    spec = importlib.util.spec_from_file_location("gen_catalogue", ROOT / "tools" / "gen_catalogue.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert gen.TARGET.read_text() == gen.build(), \
        "core/src/trainbus/bus/catalogue.py is stale: run tools/gen_catalogue.py"
    namespace: dict = {}
    exec(gen.build(), namespace)
    assert namespace["KNOWN_MODULES"]["trainbus.graph_builder"] == "trainbus-trainers-multigpu"
    assert "SimpleTrainer" not in namespace["KNOWN_PROVIDERS"]["trainbus.train"]  # the core's own
