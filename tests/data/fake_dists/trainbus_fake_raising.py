"""A plugin that raises inside hooks: as a user's callback and as an ambient plugin."""

import sys

from trainbus.exceptions import StopTraining
from trainbus.callbacks.base import Callback
from trainbus.plugin_api import hookimpl


class FakeRaising(Callback):
    """Raises ValueError in its second trigger_epoch."""

    def __init__(self):
        self.n = 0

    def _trigger_epoch(self):
        self.n += 1
        if self.n == 2:
            raise ValueError("FakeRaising failed on purpose")


class _Ambient:
    @hookimpl
    def before_train(self, trainer):
        raise RuntimeError("ambient before_train failed on purpose")

    @hookimpl
    def trigger_step(self, trainer):
        raise StopTraining("an ambient plugin tried to stop training")

    @hookimpl
    def after_epoch(self, trainer):
        sys.exit("an ambient plugin called sys.exit")

    @hookimpl
    def trigger_epoch(self, trainer):
        raise KeyError("ambient trigger_epoch failed on purpose")

    @hookimpl
    def after_train(self, trainer):
        raise OSError("ambient after_train failed on purpose")

    @hookimpl
    def default_callbacks(self):
        raise RuntimeError("ambient default_callbacks failed on purpose")

    @hookimpl
    def default_monitors(self):
        return [("not-a-slot", "not-a-factory")]


_ambient = _Ambient()
