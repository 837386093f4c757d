"""One of two distributions that export the same names."""

from trainbus.callbacks.base import Callback
from trainbus.plugin_api import hookimpl


class FakeDuplicated(Callback):
    origin = "b"


@hookimpl
def before_train(trainer):
    raise AssertionError("a duplicated ambient plugin must not be loaded")
