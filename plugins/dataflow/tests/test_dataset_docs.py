"""Every Python example of docs/datasets.md runs as written, each in a process of its own (forked from
the worker's zygote, tests/_support/zygote.py: TensorFlow imported, nothing of trainbus), no network."""

from __future__ import annotations

import os
import pathlib
import sys

import pytest

import zygote  # tests/_support

DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "datasets.md"


def blocks() -> list[str]:
    text = DOC.read_text()
    return [part.split("```", 1)[0] for part in text.split("```python\n")[1:]]


def test_page_has_examples():
    assert len(blocks()) == 5


@pytest.mark.parametrize("index", range(5))
def test_example_runs(index, tmp_path):
    code = blocks()[index]
    # TMPDIR: the example's mkdtemp() folders go into tmp_path, which pytest removes
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TRAINBUS_DATASET=str(tmp_path), TMPDIR=str(tmp_path))
    r = zygote.run([sys.executable, "-c", code], cwd=tmp_path, timeout=120, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    if "Mnist(" in code:
        assert "(28, 28) float32 1.0 7" in out
    elif "HDF5Serializer" in code:
        assert "(2, 2) 0" in out
    elif "TFRecordSerializer" in code:
        assert "[[0, ''], [1, 'x'], [2, 'xx']" in out and out.splitlines()[-1] == "[1, 'x']"
    elif "LMDBDataDecoder" in code:
        assert out.splitlines()[-1] == "[[0, 0], [2, 4], [4, 16]]"
    else:
        assert out.splitlines()[-1].endswith(os.sep + "mnist_data")
