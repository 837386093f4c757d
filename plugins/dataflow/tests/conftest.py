"""Test setup of the DataFlow plugin: its helper modules (``dataflow_fixtures``) import as top-level modules."""

from __future__ import annotations

import os
import sys

import pytest
from optdeps import opt_packages  # tests/_support

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def sklearn_importable(monkeypatch):
    """Put scikit-learn on ``sys.path`` for a test that needs it (SVMLightData's reader).

    ``tools/bootstrap.sh`` installs it under ``<venv>/opt/sklearn``, outside site-packages: Keras
    imports scikit-learn during ``import tensorflow`` whenever it is importable, which would slow
    every TensorFlow process of the suite."""
    try:
        import sklearn  # noqa: F401
        return
    except ImportError:
        pass
    monkeypatch.syspath_prepend(opt_packages("mat"))  # scikit-learn needs scipy, kept apart as well
    monkeypatch.syspath_prepend(opt_packages("sklearn"))
