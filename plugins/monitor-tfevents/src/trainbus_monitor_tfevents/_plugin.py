"""Contribution of ``trainbus-monitor-tfevents`` to ``DEFAULT_MONITORS()`` (slot 10).

Loaded at every trainer setup, so it imports nothing heavy: ``TFEventWriter`` is imported only when
``DEFAULT_MONITORS()`` makes one.
"""

from trainbus.plugin_api import default_monitor

default_monitors = default_monitor(10, "trainbus_monitor_tfevents:TFEventWriter")
