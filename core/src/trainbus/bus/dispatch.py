"""Firing hooks: the bound callers of a run, the flat per-step dispatch, and naming the
member an exception came from.

pluggy stays the registry and the authority on order (``HookCaller.get_hookimpls``); for the
hooks fired every step, the implementations are called from a plain tuple in that order,
without pluggy's per-call machinery, whenever that is equivalent (no wrappers, no tracing).
"""

from __future__ import annotations

from typing import Any, Callable

from trainbus.bus import hookspecs
from trainbus.bus.protocols import direct_methods, is_member
from trainbus.exceptions import StopTraining

__all__ = ["Bus", "annotate", "annotate_from_traceback", "origin_of", "flat_caller", "PER_STEP_HOOKS"]

#: the hooks fired at every step: a hook nobody implements is bound to None (the loop skips it)
PER_STEP_HOOKS = ("before_run", "after_run", "trigger_step")


def annotate(exc: BaseException, member: object, hook: str) -> None:
    """Record the member and hook an exception was raised in, once (the innermost wins), and
    add a note naming them and the member's distribution."""
    if isinstance(exc, StopTraining) or getattr(exc, "_trainbus_origin", None) is not None:
        return
    try:
        exc._trainbus_origin = (member, hook)  # type: ignore[attr-defined]
        from trainbus.bus.registry import distribution_of

        cls = type(member)
        dist = distribution_of(cls.__module__)
        where = f"; distribution {dist}" if dist else ""
        exc.add_note(f"[trainbus] raised in callback {member} ({cls.__module__}.{cls.__qualname__}{where}) during {hook}()")
    except (AttributeError, TypeError):  # exceptions with __slots__ or frozen
        pass


def origin_of(exc: BaseException) -> tuple[object, str] | None:
    """The ``(member, hook)`` an exception was raised in, if it came from a member."""
    return getattr(exc, "_trainbus_origin", None)


def annotate_from_traceback(exc: BaseException) -> None:
    """Name the member for an exception raised in a method the bus calls directly (see
    ``Member.hook_direct_methods``) when the dispatch could not: the deepest such frame of a
    member in the traceback is the origin."""
    if origin_of(exc) is not None or isinstance(exc, StopTraining):
        return
    found = None
    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        obj = frame.f_locals.get("self")
        if obj is not None and is_member(obj):
            for hook, method in direct_methods(obj).items():
                if frame.f_code.co_name == method:
                    found = (obj, hook)
        tb = tb.tb_next
    if found is not None:
        annotate(exc, *found)


def flat_caller(caller: Any, traced: bool = False) -> Callable[..., None] | None:
    """For a result-less hook whose only possible argument is ``trainer``: a function calling
    its implementations in pluggy's order from a plain tuple, naming the member of an
    exception. None when that would not be equivalent (a wrapper, another argument, tracing)."""
    if traced:
        return None
    hook = caller.name
    plain = []
    for impl in reversed(caller.get_hookimpls()):  # pluggy calls the last registered first
        if impl.wrapper or impl.hookwrapper or set(impl.argnames) - {"trainer"}:
            return None
        plain.append((impl.function, "trainer" in impl.argnames, impl.plugin))
    if all(not needs for _, needs, _ in plain):
        fns = tuple(f for f, _, _ in plain)
        owner_of = {id(f): p for f, _, p in plain}

        def call_all(trainer: Any = None) -> None:
            f = None
            try:
                for f in fns:
                    f()
            except BaseException as e:
                owner = owner_of.get(id(f))
                if owner is not None and is_member(owner):
                    annotate(e, owner, hook)
                raise
        return call_all
    ordered = tuple(plain)

    def call_some(trainer: Any = None) -> None:
        for f, needs, owner in ordered:
            try:
                if needs:
                    f(trainer)
                else:
                    f()
            except BaseException as e:
                if is_member(owner):
                    annotate(e, owner, hook)
                raise
    return call_some


class Bus:
    """A run's hook callers, bound once: ``bus.before_train(trainer=...)``. A per-step hook
    nobody implements is None; ``trigger_step`` is flat-dispatched when possible."""

    def __init__(self, pm: Any) -> None:
        self.pm = pm
        h = pm.hook
        traced = bool(getattr(pm, "tracing", False))
        for name in hookspecs.LOOP_HOOKS:
            caller = getattr(h, name)
            if name in PER_STEP_HOOKS and not caller.get_hookimpls():
                caller = None
            setattr(self, name, caller)
        if self.trigger_step is not None:
            self.trigger_step = flat_caller(self.trigger_step, traced) or self.trigger_step
