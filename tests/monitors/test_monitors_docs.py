"""Every Python example of docs/monitors.md runs as written."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re
import tempfile

import pytest

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "monitors.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_every_backend_has_a_section_and_an_example():
    text = DOC.read_text()
    for name in ("TFEventWriter", "JSONWriter", "ScalarPrinter", "SendMonitorData", "CSVWriter", "CometMLMonitor",
                 "MLflowMonitor", "WandbMonitor"):
        assert f"## `{name}(" in text, name
        assert any(name in b for b in BLOCKS), f"no example uses {name}"


@pytest.mark.parametrize("index", [
    pytest.param(i, marks=pytest.mark.slow) if "MLflowMonitor" in b else i  # MLflow creates its database: seconds
    for i, b in enumerate(BLOCKS)])
def test_example_runs(index, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the example's mkdtemp() folders: pytest removes them
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(BLOCKS[index], f"docs/monitors.md example {index + 1}", "exec"), {"__name__": "__doc_example__"})
    checks = {"EventAccumulator": "(2, 1.0), (4, 0.5)", "load_existing_epoch_number": "\n2\n",
              "error={val-error}": "error=0.25 cost=1.5", "csv.DictReader": "'lr': '0.01'",
              "get_metric_history": "[(2, 1.0), (4, 0.5)]"}
    for marker, expected in checks.items():
        if marker in BLOCKS[index]:
            assert expected in out.getvalue(), out.getvalue()
