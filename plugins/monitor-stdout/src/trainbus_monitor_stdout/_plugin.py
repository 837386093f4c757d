"""Contribution of ``trainbus-monitor-stdout`` to ``DEFAULT_MONITORS()`` (slot 30).

Loaded at every trainer setup, so it imports nothing heavy: ``ScalarPrinter`` is imported only when
``DEFAULT_MONITORS()`` makes one.
"""

from trainbus.plugin_api import default_monitor

default_monitors = default_monitor(30, "trainbus_monitor_stdout:ScalarPrinter")
