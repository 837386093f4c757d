"""A plugin whose callback overrides a public hook method (forbidden)."""

from trainbus.callbacks.base import Callback


class FakeOverride(Callback):
    def trigger_epoch(self):
        pass
