"""The documentation site builds with ONE command, warnings as errors (``mkdocs build --strict``),
with every page of docs/ in it and an API reference generated from the docstrings; the
getting-started example runs as written."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import zygote  # tests/_support

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_strict_build(tmp_path) -> None:
    site = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "WARNING" not in r.stderr
    # every Markdown page of docs/ is in the site, and in the navigation
    home = (site / "index.html").read_text()
    for page in sorted((ROOT / "docs").rglob("*.md")):
        rel = page.relative_to(ROOT / "docs").with_suffix("")
        built = site / ("index.html" if rel.name == "index" and rel.parent == pathlib.Path(".") else
                        rel.parent / ("" if rel.name == "index" else rel.name) / "index.html")
        assert built.is_file(), f"{page} was not built"
        href = "" if str(rel) == "index" else str(rel).replace("/index", "").rstrip("/") + "/"
        assert href == "" or f'href="{href}"' in home, f"{page} is not in the navigation"
    # the API reference is generated from docstrings
    hookspecs = (site / "api" / "hookspecs" / "index.html").read_text()
    for hook in ("before_run", "after_run", "trigger_epoch", "process_scalar", "default_callbacks"):
        assert re.search(rf'id="trainbus\.(bus\.)?hookspecs\.[A-Za-z_.]*{hook}"', hookspecs), hook
    testing = (site / "api" / "testing" / "index.html").read_text()
    assert 'id="trainbus.testing.check_distribution"' in testing
    compose = (site / "api" / "compose" / "index.html").read_text()
    assert 'id="trainbus.compose.build"' in compose and "signature" in compose


def test_getting_started_example_runs(tmp_path) -> None:
    text = (ROOT / "docs" / "getting-started.md").read_text()
    section = text.split("## A first run", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    # forked from the worker's zygote (tests/_support/zygote.py): a process of its own, TensorFlow imported
    r = zygote.run([sys.executable, "-c", code], cwd=tmp_path, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    log = tmp_path / "train_log" / "first"
    assert sorted(p.name for p in log.glob("model-*.index")) == ["model-16.index", "model-24.index"]
    assert (log / "stats.json").is_file()
