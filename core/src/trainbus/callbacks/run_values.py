"""The run-values protocol between a session that runs the step and the callbacks that asked
for extra fetches: one module packs and unpacks it.

``before_run`` of a callback answers ``(requester, SessionRunArgs)`` or None; the session runs
every request in the step's ``Session.run`` and passes ``after_run`` one
:class:`RunValuesByRequester`, from which each requester takes its own values (``values_for``).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from trainbus.utils import lazytf as _tf

__all__ = ["RunValuesByRequester"]


class RunValuesByRequester(dict):
    """``after_run``'s ``run_values``: requester -> ``tf.compat.v1.train.SessionRunValues``,
    with the step's ``options`` and ``run_metadata``."""

    __slots__ = ("options", "run_metadata", "_empty")

    def __init__(self, options: Any = None, run_metadata: Any = None) -> None:
        super().__init__()
        self.options = options
        self.run_metadata = run_metadata
        self._empty = None

    @classmethod
    def pack(cls, requests: Sequence[tuple[Any, Any]], results: Iterable[Any], options: Any,
             run_metadata: Any) -> RunValuesByRequester:
        """The values of one step: ``requests`` as ``before_run`` answered them, ``results``
        the fetched values of each request, in the same order."""
        if not requests and options is None and run_metadata is None and cls is RunValuesByRequester:
            return _nothing()  # the usual step: nobody asked for anything
        values = cls(options, run_metadata)
        if requests:
            Values = _tf.tf1().train.SessionRunValues
            for (req, _), res in zip(requests, results):
                values[req] = Values(results=res, options=options, run_metadata=run_metadata)
        return values

    @property
    def empty(self) -> Any:
        """``SessionRunValues`` without results (for a requester that asked for nothing),
        made once per step."""
        if self._empty is None:
            self._empty = _tf.tf1().train.SessionRunValues(results=None, options=self.options,
                                                           run_metadata=self.run_metadata)
        return self._empty

    def values_for(self, requester: Any) -> Any:
        """The ``SessionRunValues`` of ``requester`` (``empty`` when it asked for nothing)."""
        mine = self.get(requester)
        return self.empty if mine is None else mine


_NOTHING: list[RunValuesByRequester] = []


def _nothing() -> RunValuesByRequester:
    """The values of a step where nobody asked for anything and no options were set: one
    object, shared by every such step (its ``empty`` is an immutable ``SessionRunValues``)."""
    if not _NOTHING:
        values = RunValuesByRequester()
        values.empty  # noqa: B018 - made once, here
        _NOTHING.append(values)
    return _NOTHING[0]
