"""The event bus: hook specifications, the plugin manager, name resolution and dispatch.

This layer is the bottom of trainbus's core: it imports pluggy and importlib-metadata and
nothing from ``callbacks``, ``train``, ``session``, ``input_source`` or ``tfutils``. The objects
it dispatches to are described by the protocols of :mod:`trainbus.bus.protocols`.
"""
