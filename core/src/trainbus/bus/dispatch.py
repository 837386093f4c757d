"""The dispatcher: how a run's hooks reach its members.

pluggy stays the registry and the authority on order (``HookCaller.get_hookimpls()``). Every
per-step hook (``before_run``, ``after_run``, ``trigger_step``) is compiled here, once per
registration change (``Bus(pm)``), into one function that calls the implementations from a
plain tuple in pluggy's order. A member whose class declares a direct method for the hook
(``Member.hook_direct_methods``) and implements the hook with the bus's own
:func:`member_method` has its direct method called, with the hook's meaning:

``trigger_step``
    ``method()``
``before_run``
    ``answer = method(run_context)``; a non-None answer becomes the request
    ``(member, member.run_request(answer))``
``after_run``
    ``method(run_context, run_values.values_for(member))``

:func:`member_method` is the same thing for one member (what pluggy calls when it dispatches
itself, and what a caller such as ``CallbackGroup`` calls): one definition of what a hook
means for a member, here. Any other implementation (an ambient plugin's) is called with the
arguments it names, as pluggy would. When a hook has a wrapper, or tracing is on, pluggy calls
it itself.

The dispatcher always knows which member it is calling: an exception raised there is
annotated with that member and the hook (:func:`annotate`, :func:`origin_of`).

With a :class:`HookProfile` (``TRAINBUS_PROFILE_HOOKS=1``, or ``trainer.profile_hooks = True``),
every loop hook is compiled here with a clock around each member's call; without one, the
per-step functions are the plain ones and the other hooks are pluggy's own callers.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable

from trainbus.bus import hookspecs
from trainbus.bus.protocols import direct_methods, is_member
from trainbus.exceptions import StopTraining

__all__ = ["Bus", "HookProfile", "annotate", "origin_of", "compile_hook", "implemented", "member_method",
           "profiling_requested", "PER_STEP_HOOKS"]

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


# ---------------------------------------------------------------------- one member
#: the functions :func:`member_method` made -> (hook, direct method name)
_MEMBER_METHODS: dict[Any, tuple[str, str]] = {}


def member_method(hook: str, method: str, marked: bool = True) -> Callable[..., Any]:
    """The hook method of a member class that runs the member's ``method`` with the hook's
    meaning (see the module doc), naming the member in an exception. A class that uses it for
    a per-step hook and lists ``{hook: method}`` in ``hook_direct_methods`` is dispatched
    without this extra call. ``marked=False``: a plain method, not a hook implementation."""
    if hook == "before_run":
        def run(self: Any, run_context: Any) -> Any:
            try:
                answer = getattr(self, method)(run_context)
                return None if answer is None else (self, self.run_request(answer))
            except BaseException as e:
                annotate(e, self, hook)
                raise
    elif hook == "after_run":
        def run(self: Any, run_context: Any, run_values: Any) -> None:  # type: ignore[misc]
            try:
                # a plain SessionRunValues (a callback run by a tf SessionRunHook) is its own
                values_for = getattr(run_values, "values_for", None)
                getattr(self, method)(run_context, run_values if values_for is None else values_for(self))
            except BaseException as e:
                annotate(e, self, hook)
                raise
    else:
        def run(self: Any) -> None:  # type: ignore[misc]
            try:
                getattr(self, method)()
            except BaseException as e:
                annotate(e, self, hook)
                raise
    run.__name__ = run.__qualname__ = hook
    _MEMBER_METHODS[run] = (hook, method)
    return hookspecs.hookimpl(run) if marked else run


def _direct_method(impl: Any, hook: str) -> Callable[..., Any] | None:
    """The member's direct method for ``hook`` when calling it is what its registered hook
    method would do (it is the bus's :func:`member_method` for that very method)."""
    plugin = impl.plugin
    if not is_member(plugin):
        return None
    name = direct_methods(plugin).get(hook)
    if name is None or _MEMBER_METHODS.get(getattr(impl.function, "__func__", None)) != (hook, name):
        return None
    return getattr(plugin, name)


# ---------------------------------------------------------------------- compiling a hook
def implemented(caller: Any) -> bool:
    """Whether anybody implements ``caller``'s hook (e.g. ``pm.hook.process_summary``)."""
    return bool(caller.get_hookimpls())


def _calls(hook: str, impls: list, params: tuple[str, ...]) -> tuple[tuple[Any, Callable[[tuple], Any], Any], ...]:
    """``(plugin, call(args), direct method or None)`` per implementation, in pluggy's order:
    ``call`` takes the hook's arguments as a tuple in ``params`` order."""
    out = []
    for impl in reversed(impls):  # pluggy calls the last registered first
        plugin = impl.plugin
        f = _direct_method(impl, hook) if hook in PER_STEP_HOOKS else None
        if f is not None:
            if hook == "before_run":
                def call(args: tuple, f: Any = f, m: Any = plugin) -> Any:
                    r = f(args[1])
                    return None if r is None else (m, m.run_request(r))
            elif hook == "after_run":
                def call(args: tuple, f: Any = f, m: Any = plugin) -> Any:  # type: ignore[misc]
                    return f(args[1], args[2].values_for(m))
            else:
                def call(args: tuple, f: Any = f) -> Any:  # type: ignore[misc]
                    return f()
        else:
            fn = impl.function
            pick = tuple(params.index(a) for a in impl.argnames)

            def call(args: tuple, fn: Any = fn, pick: tuple = pick) -> Any:  # type: ignore[misc]
                return fn(*[args[i] for i in pick])
        out.append((plugin, call, f))
    return tuple(out)


def _with_signature(params: tuple[str, ...], run: Callable[[tuple], Any]) -> Callable[..., Any]:
    """``run(args_tuple)`` as a function taking the hook's arguments by position or by name."""
    if params == ("trainer",):
        return lambda trainer=None: run((trainer,))
    if params == ("trainer", "run_context"):
        return lambda trainer, run_context: run((trainer, run_context))
    if params == ("trainer", "run_context", "run_values"):
        return lambda trainer, run_context, run_values: run((trainer, run_context, run_values))

    def any_args(*args: Any, **kwargs: Any) -> Any:
        return run(tuple(args) + tuple(kwargs[p] for p in params[len(args):]))
    return any_args


def _general(hook: str, calls: tuple, profile: HookProfile | None) -> Callable[[tuple], list]:
    """The loop over any mix of implementations, results collected like pluggy's (non-None,
    in order), with a clock around each call when profiling."""
    if profile is None:
        def run(args: tuple) -> list:
            out = []
            who = None
            try:
                for who, call, _ in calls:
                    r = call(args)
                    if r is not None:
                        out.append(r)
            except BaseException as e:
                if is_member(who):
                    annotate(e, who, hook)
                raise
            return out
        return run
    clock = time.perf_counter
    add = profile.add

    def run_timed(args: tuple) -> list:
        out = []
        for who, call, _ in calls:
            start = clock()
            try:
                r = call(args)
            except BaseException as e:
                if is_member(who):
                    annotate(e, who, hook)
                raise
            finally:
                add(who, hook, clock() - start)
            if r is not None:
                out.append(r)
        return out
    return run_timed


def _all_direct(hook: str, calls: tuple) -> Callable[..., Any]:
    """The per-step loops when every implementation is a member's direct method: the hot path.
    The loops hold the bound methods alone; the member of a method (the one that raised, or
    answered) is looked up by the method's id (``fns`` keeps each method alive)."""
    members = tuple(m for m, _, _ in calls)
    fns = tuple(f for _, _, f in calls)
    owner_of = {id(f): m for m, f in zip(members, fns)}

    def owner(f: Any) -> Any:
        return owner_of.get(id(f))

    if hook == "trigger_step":
        def trigger_step(trainer: Any = None) -> None:
            f = None
            try:
                for f in fns:
                    f()
            except BaseException as e:
                annotate(e, owner(f), hook)
                raise
        return trigger_step
    if hook == "before_run":
        def before_run(trainer: Any, run_context: Any) -> Any:
            answers = None
            f = None
            try:
                for f in fns:
                    r = f(run_context)
                    if r is not None:
                        if answers is None:
                            answers = []
                        answers.append((f, r))
            except BaseException as e:
                annotate(e, owner(f), hook)
                raise
            if answers is None:
                return ()
            out = []
            for f, r in answers:
                m = owner_of[id(f)]
                try:
                    out.append((m, m.run_request(r)))
                except BaseException as e:
                    annotate(e, m, hook)
                    raise
            return out
        return before_run

    def after_run(trainer: Any, run_context: Any, run_values: Any) -> list:
        f = None
        try:
            if run_values:
                values_for = run_values.values_for
                for m, f in zip(members, fns):
                    f(run_context, values_for(m))
            else:
                empty = run_values.empty
                for f in fns:
                    f(run_context, empty)
        except BaseException as e:
            annotate(e, owner(f), hook)
            raise
        return []
    return after_run


def compile_hook(caller: Any, traced: bool = False, profile: HookProfile | None = None) -> Callable[..., Any] | None:
    """One function firing every implementation of ``caller``'s hook in pluggy's order, taking
    the hook's arguments by position or by name and returning the non-None results (a list, or
    an empty tuple), or None when nobody implements the hook. pluggy's own caller (called by
    name) when a wrapper is registered or tracing is on."""
    impls = caller.get_hookimpls()
    if not impls:
        return None
    params = tuple(caller.spec.argnames)
    if traced or any(i.wrapper or i.hookwrapper for i in impls):
        def through_pluggy(*args: Any, **kwargs: Any) -> Any:
            return caller(**dict(zip(params, args)), **kwargs)
        return through_pluggy
    hook = caller.name
    calls = _calls(hook, impls, params)
    if profile is not None:
        return _with_signature(params, _general(hook, calls, profile))
    if hook in PER_STEP_HOOKS and all(f is not None for _, _, f in calls):
        return _all_direct(hook, calls)
    return _with_signature(params, _general(hook, calls, None))


# ---------------------------------------------------------------------- timing
def profiling_requested() -> bool:
    """Whether ``TRAINBUS_PROFILE_HOOKS`` asks for per-hook timing (any value but empty, ``0``,
    ``false``, ``no``, ``off``)."""
    return os.environ.get("TRAINBUS_PROFILE_HOOKS", "").strip().lower() not in ("", "0", "false", "no", "off")


class HookProfile:
    """Seconds and calls per member and hook, filled by the functions :func:`compile_hook`
    makes with it; ``table()`` reports them slowest first."""

    def __init__(self) -> None:
        self._entries: dict[tuple[int, str], list] = {}

    def add(self, member: Any, hook: str, seconds: float) -> None:
        entry = self._entries.get((id(member), hook))
        if entry is None:
            self._entries[(id(member), hook)] = [member, hook, seconds, 1]
        else:
            entry[2] += seconds
            entry[3] += 1

    def rows(self) -> list[tuple[Any, str, float, int]]:
        """``(member, hook, total seconds, calls)``, slowest first."""
        return sorted((tuple(e) for e in self._entries.values()), key=lambda r: -r[2])  # type: ignore[misc]

    def table(self) -> str:
        """The rows as a text table (member, hook, calls, total and mean time)."""
        rows = self.rows()
        if not rows:
            return "Hook timing: no hook of a member was called."
        names = [str(r[0]) for r in rows]
        w = max(len("callback"), *(len(n) for n in names))
        h = max(len("hook"), *(len(r[1]) for r in rows))
        lines = [f"Hook timing (slowest first; {sum(r[2] for r in rows):.3f} s in all):",
                 f"  {'callback':<{w}}  {'hook':<{h}}  {'calls':>8}  {'total s':>10}  {'mean us':>10}"]
        for name, (_, hook, total, calls) in zip(names, rows):
            lines.append(f"  {name:<{w}}  {hook:<{h}}  {calls:>8}  {total:>10.4f}  {total / calls * 1e6:>10.1f}")
        return "\n".join(lines)


# ---------------------------------------------------------------------- a run's bus
class Bus:
    """A run's hook callers, bound once per registration change: ``bus.before_train(trainer=...)``.

    The per-step hooks are compiled (:func:`compile_hook`), None when nobody implements them;
    the others are pluggy's callers, or compiled too when ``profile`` times every hook."""

    def __init__(self, pm: Any, profile: HookProfile | None = None) -> None:
        self.pm = pm
        self.profile = profile
        traced = bool(getattr(pm, "tracing", False))
        for name in hookspecs.LOOP_HOOKS:
            caller = getattr(pm.hook, name)
            if name in PER_STEP_HOOKS:
                setattr(self, name, compile_hook(caller, traced, profile))
            elif profile is not None:
                setattr(self, name, compile_hook(caller, traced, profile) or caller)
            else:
                setattr(self, name, caller)
