"""Contribution of ``trainbus-monitor-json`` to ``DEFAULT_MONITORS()`` (slot 20).

Loaded at every trainer setup, so it imports nothing heavy: ``JSONWriter`` is imported only when
``DEFAULT_MONITORS()`` makes one.
"""

from trainbus.plugin_api import default_monitor

default_monitors = default_monitor(20, "trainbus_monitor_json:JSONWriter")
