"""Callbacks and monitors (tensorpack's ``callbacks``).

The core provides the contract (``Callback``, ``ProxyCallback``, ``CallbackFactory``,
``Callbacks``), the schedulers (``PeriodicTrigger``, ``PeriodicCallback``,
``EnableCallbackIf``) and the monitor bases (``MonitorBase``, ``Monitors``). Every other
callback or monitor comes from an installed plugin distribution and resolves here by name,
e.g. ``trainbus.callbacks.ModelSaver``. No TensorFlow import here.
"""

from __future__ import annotations

from trainbus.bus import registry as _registry
from trainbus.callbacks.base import Callback, CallbackFactory, ProxyCallback
from trainbus.callbacks.group import Callbacks
from trainbus.callbacks.monitor import MonitorBase, Monitors
from trainbus.callbacks.trigger import EnableCallbackIf, PeriodicCallback, PeriodicTrigger

_CORE_ALL = ["Callback", "ProxyCallback", "CallbackFactory", "Callbacks", "PeriodicTrigger", "PeriodicCallback",
           "EnableCallbackIf", "MonitorBase", "Monitors"]

# ``__all__`` is computed on access: the names above, then every installed plugin's names
__getattr__, __dir__ = _registry.make_module_getattr(__name__, (__name__,), globals(), _CORE_ALL)
