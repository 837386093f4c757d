"""A well-behaved plugin: proves that the broken ones do not disturb the others.

The ambient part counts its hooks in ``EVENTS`` and, when ``TRAINBUS_FAKE_GOOD_LOG`` is set,
appends them to that file.
"""

import os

from trainbus.callbacks.base import Callback
from trainbus.plugin_api import hookimpl

EVENTS = []


def _log(ev):
    EVENTS.append(ev)
    path = os.environ.get("TRAINBUS_FAKE_GOOD_LOG")
    if path:
        with open(path, "a") as f:
            f.write(ev + "\n")


class FakeGoodCallback(Callback):
    def __init__(self):
        self.epochs = 0

    def _trigger(self):
        self.epochs += 1


class _Ambient:
    @hookimpl
    def before_train(self, trainer):
        _log("before_train")

    @hookimpl
    def trigger_epoch(self, trainer):
        _log("trigger_epoch")

    @hookimpl
    def after_train(self, trainer):
        _log("after_train")


_ambient = _Ambient()
