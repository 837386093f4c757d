"""What the bus expects of the objects it dispatches to, as typing protocols.

The bus never imports the callback or trainer classes: a *member* (a callback or monitor of a
run) is anything with ``hooks_used()``; a *trainer view* is what hooks receive as ``trainer``.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, runtime_checkable


@runtime_checkable
class Member(Protocol):
    """A callback or monitor registered on a run's bus.

    ``hooks_used()`` names the hooks to register it for; the others never reach it.

    A member class may declare, for the per-step hooks, the methods the dispatcher calls
    directly (:mod:`trainbus.bus.dispatch`), e.g. ``hook_direct_methods = {"trigger_step":
    "_trigger_step", "before_run": "_before_run", "after_run": "_after_run"}``, when it
    implements those hooks with ``trainbus.bus.dispatch.member_method(hook, method)``: one
    Python call less per member and step. A direct ``before_run`` method answers None or what
    the member's ``run_request(answer)`` turns into the request the session runs.
    """

    def hooks_used(self) -> frozenset[str]: ...


class TrainerView(Protocol):
    """The trainer as hooks, callbacks and monitors see it."""

    is_chief: bool

    @property
    def epoch_num(self) -> int: ...

    @property
    def global_step(self) -> int: ...

    @property
    def local_step(self) -> int: ...

    graph: Any
    sess: Any
    hooked_sess: Any
    monitors: Any

    def request_stop(self, reason: str = ...) -> None: ...


def direct_methods(member: Any) -> Mapping[str, str]:
    """``{hook: method name}`` the member's class asks to be registered directly (empty when none)."""
    return getattr(type(member), "hook_direct_methods", None) or {}


def is_member(obj: Any) -> bool:
    """Whether ``obj`` is a member (has a callable ``hooks_used``), without calling anything."""
    return callable(getattr(type(obj), "hooks_used", None))
