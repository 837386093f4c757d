"""``Callbacks``: a list of callbacks that acts as one."""

from __future__ import annotations

from typing import Any, Iterable

from trainbus.callbacks.base import Callback, ensure_callback
from trainbus.callbacks.run_values import RunValuesByRequester

__all__ = ["Callbacks"]


class Callbacks(Callback):
    """A container that calls its callbacks in order at every method.

    The trainer does not need it (each callback is registered on the bus on its own, in
    order); it is kept for code that drives a group of callbacks by hand.
    """

    def __init__(self, cbs: Iterable[Callback]) -> None:
        self.cbs = [ensure_callback(cb, "Callbacks(cbs)") for cb in cbs]
        self._chief_only = False

    def hooks_used(self) -> frozenset[str]:
        used: set[str] = {"setup_graph"}
        for cb in self.cbs:
            used |= cb.hooks_used()
        return frozenset(used)

    def _setup_graph(self) -> None:
        for cb in self.cbs:
            cb.setup_graph(self.trainer)

    def _before_train(self) -> None:
        for cb in self.cbs:
            cb.before_train()

    def _before_epoch(self) -> None:
        for cb in self.cbs:
            cb.before_epoch()

    def _after_epoch(self) -> None:
        for cb in self.cbs:
            cb.after_epoch()

    def _before_run(self, ctx: Any) -> Any:
        from trainbus.utils import lazytf as _tf

        requests = [r for r in (cb.before_run(ctx) for cb in self.cbs) if r is not None]
        if not requests:
            self._requests = ()
            return None
        self._requests = tuple(req for req, _ in requests)
        return _tf.tf1().train.SessionRunArgs(fetches=[a.fetches for _, a in requests],
                                              feed_dict=_merge_feeds([a.feed_dict for _, a in requests]))

    def _after_run(self, ctx: Any, run_values: Any) -> None:
        requests = [(req, None) for req in self._requests] if run_values.results is not None else []
        by_cb = RunValuesByRequester.pack(requests, run_values.results or (), run_values.options,
                                          run_values.run_metadata)
        for cb in self.cbs:
            if "after_run" in cb.hooks_used():
                cb.after_run(ctx, by_cb)

    def _trigger_step(self) -> None:
        for cb in self.cbs:
            cb.trigger_step()

    def _trigger_epoch(self) -> None:
        for cb in self.cbs:
            cb.trigger_epoch()

    def _after_train(self) -> None:
        for cb in self.cbs:
            cb.after_train()


def _merge_feeds(feeds: list[Any]) -> dict | None:
    merged: dict = {}
    for f in feeds:
        if f:
            merged.update(f)
    return merged or None
