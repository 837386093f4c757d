"""Training runs described by a TOML file (``trainbus train RUN.toml``): the names of
:mod:`trainbus.runfile`, where the run-file format is described and the code lives, under
their first import path."""

from __future__ import annotations

from trainbus.runfile import (Component, Problem, RunConfigError, RunPlan, load_run_file, scan_key_lines,
                              train_from_file)

__all__ = ["RunConfigError", "Problem", "Component", "RunPlan", "load_run_file", "train_from_file", "scan_key_lines"]
