"""An ambient plugin implementing a hook that does not exist (a typo)."""

from trainbus.plugin_api import hookimpl


@hookimpl
def trigger_epochs(trainer):
    pass
