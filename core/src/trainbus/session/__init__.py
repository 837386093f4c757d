"""The session layer: ``HookedSession`` runs one training step, the callbacks' extra fetches,
feeds and options and the ``global_step`` increment in one ``Session.run`` (through a callable
prepared once per fetch/feed structure, :mod:`trainbus.session.fastrun`), and fires
``before_run``/``after_run`` around it."""

from trainbus.session.hooked import HookedSession

__all__ = ["HookedSession"]
