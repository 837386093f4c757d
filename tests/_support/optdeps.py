"""Optional packages the development venv keeps outside its site-packages."""

from __future__ import annotations

import os
import sys

import pytest


def opt_packages(name: str) -> str:
    """The folder ``tools/bootstrap.sh`` installs an optional package group into
    (``<venv>/opt/<name>``: ``sklearn``, ``plot``, ``mat`` for scipy, ``image`` for OpenCV),
    outside site-packages because Keras imports those packages during every ``import
    tensorflow`` when they are importable. Fails the test with the command to run when the
    folder is missing."""
    # the venv of this interpreter (sys.prefix is the base interpreter's under `python -S`,
    # as tools/test_core_alone.sh runs it)
    where = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(sys.executable))), "opt", name)
    if not os.path.isdir(where):
        pytest.fail(f"{where} is missing: run `bash tools/bootstrap.sh setup`")
    return where


def import_opt(name: str, module: str):
    """For a test module that imports an optional package at its top: put ``<venv>/opt/<name>``
    on this process's ``sys.path`` (after site-packages) and import ``module``; returns its
    top-level package. The processes such a module's tests start get the folder from the
    fixtures of the root conftest (``opencv_importable``, ``scipy_importable``)."""
    import importlib

    where = opt_packages(name)
    if where not in sys.path:
        sys.path.append(where)
    importlib.import_module(module)
    return sys.modules[module.split(".")[0]]
