"""Test setup of the DataFlow plugin: its helper modules (``dataflow_fixtures``) import as top-level modules."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
