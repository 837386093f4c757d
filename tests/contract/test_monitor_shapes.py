"""What monitor backends share lives in the core once: ``MonitorBase.enabled`` and
``_hooks_turned_off()`` decide what a backend is registered for, and
``plugin_api.default_monitor`` is a plugin's contribution to ``DEFAULT_MONITORS()``."""

from __future__ import annotations

import sys

import pytest

from trainbus import plugin_api
from trainbus.callbacks.monitor import MonitorBase


class Backend(MonitorBase):
    def __init__(self, enabled=True, images=True):
        self.enabled = enabled
        self._images = images

    def process_scalar(self, name, val):
        pass

    def process_image(self, name, val):
        pass

    def _hooks_turned_off(self):
        return () if self._images else ("process_image",)


def test_enabled_and_turned_off_hooks_decide_the_registration():
    assert {"setup_graph", "process_scalar", "process_image"} <= Backend().hooks_used()
    assert "process_image" not in Backend(images=False).hooks_used()
    assert "process_scalar" in Backend(images=False).hooks_used()
    assert Backend(enabled=False).hooks_used() == frozenset({"setup_graph"})


def test_the_first_party_file_writers_use_the_shared_shape(tmp_path):
    from trainbus.utils import logger
    from trainbus_monitor_csv import CSVWriter
    from trainbus_monitor_json import JSONWriter
    from trainbus_monitor_tfevents import TFEventWriter

    assert logger.get_logger_dir() is None  # tests start without one
    for cls in (CSVWriter, JSONWriter, TFEventWriter):
        assert "hooks_used" not in vars(cls)
        assert cls().hooks_used() == frozenset({"setup_graph"})  # no logger directory: disabled
    assert "process_event" in TFEventWriter(logdir=str(tmp_path)).hooks_used()


def test_default_monitor_contributes_a_lazily_imported_monitor(tmp_path, monkeypatch):
    (tmp_path / "lazy_backend_mod.py").write_text(
        "from trainbus.callbacks.monitor import MonitorBase\n"
        "class LazyWriter(MonitorBase):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    impl = plugin_api.default_monitor(25, "lazy_backend_mod:LazyWriter")
    assert impl.__name__ == "default_monitors" and hasattr(impl, f"{plugin_api.hookimpl.project_name}_impl")
    ((slot, factory),) = impl()
    assert slot == 25 and factory.__name__ == "LazyWriter"
    assert "lazy_backend_mod" not in sys.modules  # imported only when a monitor is made
    made = factory()
    assert type(made).__name__ == "LazyWriter" and "lazy_backend_mod" in sys.modules
    for bad in ((25, "no_colon"), (25, "mod:"), ("25", "mod:Cls"), (True, "mod:Cls")):
        with pytest.raises(ValueError, match=r"give an int slot and the monitor class as \"package.module:Class\""):
            plugin_api.default_monitor(*bad)
