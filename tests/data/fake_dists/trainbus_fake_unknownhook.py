"""An ambient plugin implementing a hook that does not exist (a typo)."""

from trainbus.hookspecs import hookimpl


@hookimpl
def trigger_epochs(trainer):
    pass
