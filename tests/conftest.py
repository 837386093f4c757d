"""Shared fixtures: every test gets a fresh log directory and forgets it afterwards."""

from __future__ import annotations

import os
import sys

import pytest

# test support modules (fake distributions, ...) import as top-level modules
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "_support"))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


@pytest.fixture()
def logdir(tmp_path):
    """A fresh trainbus log directory (``logger.set_logger_dir``), reset after the test."""
    from trainbus.utils import logger

    d = tmp_path / "log"
    logger.set_logger_dir(str(d), action="k")
    yield d
    logger._reset_for_tests()


@pytest.fixture(autouse=True)
def _reset_logger_dir():
    yield
    from trainbus.utils import logger

    logger._reset_for_tests()
