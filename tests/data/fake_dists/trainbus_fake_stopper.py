"""An ambient plugin that calls ``run_context.request_stop()`` in ``before_run`` (from the
second step on) and in ``after_run`` (every step): it must not stop training."""

from trainbus.plugin_api import hookimpl


class _Ambient:
    def __init__(self):
        self.calls = {"before_run": 0, "after_run": 0}

    @hookimpl
    def before_run(self, trainer, run_context):
        self.calls["before_run"] += 1
        if self.calls["before_run"] >= 2:
            run_context.request_stop()
        return None

    @hookimpl
    def after_run(self, trainer, run_context, run_values):
        self.calls["after_run"] += 1
        run_context.request_stop()


_ambient = _Ambient()
