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
from trainbus.callbacks.monitor import MonitorBase, Monitors

_CORE_ALL = ["Callback", "ProxyCallback", "CallbackFactory", "Callbacks", "PeriodicTrigger", "PeriodicCallback",
           "EnableCallbackIf", "MonitorBase", "Monitors"]

#: core names imported from their module on first use (a training whose callbacks use none of
#: them does not import it)
_LAZY = {"Callbacks": "trainbus.callbacks.group", "PeriodicTrigger": "trainbus.callbacks.trigger",
         "PeriodicCallback": "trainbus.callbacks.trigger", "EnableCallbackIf": "trainbus.callbacks.trigger"}

# ``__all__`` is computed on access: the names above, then every installed plugin's names
__getattr__, __dir__ = _registry.make_module_getattr(__name__, (__name__,), globals(), _CORE_ALL, lazy=_LAZY)
