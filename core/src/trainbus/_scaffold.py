"""``trainbus new-plugin NAME``: write a plugin distribution to start from.

The result installs with ``pip install -e <dir>`` and, with its ``test`` extra (pytest; the
trainer its tests use, ``SimpleTrainer``, is the core's), passes its own tests: a callback, a
monitor, the entry points that make them ``trainbus.callbacks.<Name>``, the plugin API keyword,
a conformance test (``trainbus.testing.check_distribution``) and a real training test.
"""

from __future__ import annotations

import pathlib
import re

__all__ = ["scaffold_plugin", "names_for"]

_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")


def names_for(name: str) -> dict[str, str]:
    """The distribution, import package and class names derived from ``name``.

    ``"grad-stats"`` -> ``trainbus-grad-stats``, ``trainbus_grad_stats``, ``GradStatsCallback``,
    ``GradStatsMonitor``. A leading ``trainbus-`` is accepted and not doubled.
    """
    short = name[len("trainbus-"):] if name.startswith("trainbus-") else name
    if not _NAME.fullmatch(short):
        raise ValueError(
            f"plugin name {name!r} is not usable: use lowercase letters, digits and single dashes, starting with a "
            "letter (e.g. 'grad-stats'); the distribution becomes trainbus-<name>"
        )
    camel = "".join(part.capitalize() for part in short.split("-"))
    return {
        "short": short,
        "dist": f"trainbus-{short}",
        "package": f"trainbus_{short.replace('-', '_')}",
        "callback": f"{camel}Callback",
        "monitor": f"{camel}Monitor",
    }


_PYPROJECT = '''[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "A trainbus plugin: {callback} (callback) and {monitor} (monitor)"
readme = "README.md"
requires-python = ">=3.10"
# "trainbus-plugin" marks the distribution as a plugin (for people searching an index)
keywords = ["trainbus-plugin"]
dependencies = ["trainbus>=0.1,<0.2"]

[project.optional-dependencies]
# what tests/ needs beyond the dependencies: pytest (the trainer its training test runs,
# SimpleTrainer in trainbus.testing.train_tiny, is part of trainbus itself)
test = ["pytest>=8"]

# the trainbus plugin API versions it is written for: one entry per version (the value is
# the package; it is not imported)
[project.entry-points."trainbus.plugin_api"]
"{api}" = "{package}"

# one entry per exported class; the entry-point name is the exact class name
[project.entry-points."trainbus.callbacks"]
{callback} = "{package}:{callback}"
{monitor} = "{package}:{monitor}"

[tool.setuptools.packages.find]
where = ["src"]

# this directory is the tests' root, also when it sits inside another project with its own pytest config
[tool.pytest.ini_options]
testpaths = ["tests"]
'''

_INIT = '''"""{dist}: a trainbus plugin.

* ``{callback}``: after every epoch, puts the epoch's wall-clock seconds and steps per second
  as scalars ``{short}/epoch_seconds`` and ``{short}/steps_per_sec`` into the monitors.
* ``{monitor}``: appends every scalar it receives as a line ``global_step<TAB>name<TAB>value``
  to ``<log dir>/{short}-scalars.tsv`` (or to the file given as ``path``).

Users reach them as ``trainbus.callbacks.{callback}`` and ``trainbus.callbacks.{monitor}``.
"""

from __future__ import annotations

import os
import time
from typing import Any

from trainbus.callbacks import Callback, MonitorBase

__all__ = ["{callback}", "{monitor}"]


class {callback}(Callback):
    """Time every epoch and report it to the monitors.

    Nothing runs per step: only ``_before_epoch`` and ``_trigger_epoch`` are overridden.

    :param prefix: the scalar names' prefix.
    """

    def __init__(self, prefix: str = "{short}") -> None:
        if not isinstance(prefix, str) or not prefix:
            raise ValueError(f"{callback}(prefix=...) must be a non-empty string, got {{prefix!r}}")
        self.prefix = prefix
        self.history: list[tuple[int, float]] = []
        self._start = 0.0
        self._start_step = 0

    def _before_epoch(self) -> None:
        self._start = time.perf_counter()
        self._start_step = self.global_step

    def _trigger_epoch(self) -> None:
        seconds = time.perf_counter() - self._start
        steps = self.global_step - self._start_step
        self.history.append((self.epoch_num, seconds))
        self.trainer.monitors.put_scalar(f"{{self.prefix}}/epoch_seconds", seconds)
        self.trainer.monitors.put_scalar(f"{{self.prefix}}/steps_per_sec", steps / max(seconds, 1e-9))


class {monitor}(MonitorBase):
    """Write every scalar to a tab-separated file, one line per value.

    :param path: the file; default ``<log dir>/{short}-scalars.tsv``.
    """

    def __init__(self, path: str | None = None) -> None:
        self._path = path
        self._file: Any = None

    def _setup_graph(self) -> None:
        from trainbus.utils import logger

        path = self._path
        if path is None:
            logdir = logger.get_logger_dir()
            if logdir is None:
                raise ValueError(
                    "{monitor}: there is no log directory; call logger.set_logger_dir(...) first or pass path=..."
                )
            path = os.path.join(logdir, "{short}-scalars.tsv")
        self.path = path
        self._file = open(path, "a", encoding="utf-8")

    def process_scalar(self, name: str, val: Any) -> None:
        self._file.write(f"{{self.trainer.global_step}}\\t{{name}}\\t{{float(val)!r}}\\n")
        self._file.flush()

    def _after_train(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
'''

_TEST = '''"""Tests of {dist}: a real training run through the public names, and conformance."""

from __future__ import annotations

import trainbus.callbacks
from trainbus.testing import check_distribution, train_tiny
from trainbus.utils import logger


def test_distribution_conforms():
    assert check_distribution("{dist}") == []


def test_callback_and_monitor_in_a_training_run(tmp_path):
    logger.set_logger_dir(str(tmp_path / "log"), action="k")
    cb = trainbus.callbacks.{callback}()
    mon = trainbus.callbacks.{monitor}()
    trainer = train_tiny(callbacks=[cb], monitors=[mon], max_epoch=3, steps_per_epoch=4)
    assert [epoch for epoch, _ in cb.history] == [1, 2, 3]
    assert trainer.monitors.get_latest("{short}/steps_per_sec") > 0
    rows = [line.split("\\t") for line in (tmp_path / "log" / "{short}-scalars.tsv").read_text().splitlines()]
    timed = [(int(step), name) for step, name, _ in rows if name == "{short}/epoch_seconds"]
    assert timed == [(4, "{short}/epoch_seconds"), (8, "{short}/epoch_seconds"), (12, "{short}/epoch_seconds")]


def test_bad_prefix_is_refused_at_construction():
    import pytest

    with pytest.raises(ValueError, match="prefix"):
        trainbus.callbacks.{callback}(prefix="")
'''

_README = '''# {dist}

A trainbus plugin distribution (it needs `trainbus` installed; its tests also need `pytest`).

| name | kind | what it does |
| --- | --- | --- |
| `{callback}` | callback | puts the seconds and steps/second of every epoch into the monitors |
| `{monitor}` | monitor | appends every scalar to `<log dir>/{short}-scalars.tsv` |

## Install and use

```bash
pip install -e .            # in an environment where trainbus is installed
trainbus plugins            # lists {dist} and its names
```

trainbus and its plugin distributions are installed from a trainbus checkout's wheelhouse
(`tools/build_wheels.sh`, then `pip install --find-links <checkout>/dist "trainbus[standard]"`);
add `--find-links <checkout>/dist` to the `pip install` commands here if trainbus is not installed yet.

```python
import trainbus.callbacks as cbs

config = TrainConfig(..., callbacks=[cbs.{callback}()], monitors=[cbs.{monitor}()])
```

## Test

```bash
pip install -e ".[test]"    # pytest (the trainer of the training test comes with trainbus)
pytest
```

`tests/test_{package}.py` trains a tiny model for real with both classes (`trainbus.testing.train_tiny`)
and checks the distribution with `trainbus.testing.check_distribution`.
'''


def scaffold_plugin(name: str, directory: str | pathlib.Path | None = None) -> pathlib.Path:
    """Write the plugin distribution for ``name`` into ``directory`` (default ``./trainbus-<name>``).

    :return: the directory written.
    :raises ValueError: the name is not usable.
    :raises FileExistsError: the directory exists and is not empty.
    """
    from trainbus.bus.registry import PLUGIN_API_VERSION

    n = names_for(name)
    root = pathlib.Path(directory) if directory is not None else pathlib.Path.cwd() / n["dist"]
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} exists and is not empty; choose another --dir or remove it")
    fields = dict(n, api=PLUGIN_API_VERSION)
    files = {
        "pyproject.toml": _PYPROJECT.format(**fields),
        "README.md": _README.format(**fields),
        f"src/{n['package']}/__init__.py": _INIT.format(**fields),
        f"src/{n['package']}/py.typed": "",
        f"tests/test_{n['package']}.py": _TEST.format(**fields),
    }
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
