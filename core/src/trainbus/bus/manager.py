"""The plugin manager: pluggy plus trainbus's ordering and validation rules.

Two kinds of manager exist: one per run (a trainer's callbacks and monitors, the *members*,
registered in order, plus the ambient plugins), and one per process for the contribution hooks
(``contribution_manager()``: default callbacks and monitors, session initializers). Members are
known by their protocol (:mod:`trainbus.bus.protocols`), never by class.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import time
import warnings
from typing import Any, Iterable, Iterator, Sequence

import pluggy

from trainbus.bus import hookspecs
from trainbus.bus.protocols import is_member
from trainbus.exceptions import PluginLoadError

log = logging.getLogger("trainbus.plugins")

_DEFAULT_OPTS: dict[str, Any] = dict(
    wrapper=False, hookwrapper=False, optionalhook=False, tryfirst=False, trylast=False, specname=None
)
_ORDER_OPTS = ("tryfirst", "trylast", "wrapper", "hookwrapper")


#: (spec class of hookspecs.ALL_SPECS, attribute name) -> pluggy's reading of its hookspec options
_SPEC_OPTS: dict[tuple[type, str], Any] = {}


class PluginWarning(UserWarning):
    """A plugin was skipped or misbehaved; training goes on."""


def strict_plugins() -> bool:
    """``TRAINBUS_STRICT_PLUGINS=1`` turns plugin warnings into errors (for CI)."""
    return os.environ.get("TRAINBUS_STRICT_PLUGINS", "") not in ("", "0", "false", "False")


class TrainbusPluginManager(pluggy.PluginManager):
    """pluggy's manager with trainbus's rules:

    * callbacks and monitors are registered once, in order (``register_ordered``), so pluggy's
      last-registered-first calling order gives back the user's order;
    * a callback is registered only for the hooks it uses, and may not use
      ``tryfirst``/``trylast``/wrappers (its position in the list is its priority);
    * registration is frozen once training is set up.
    """

    def __init__(self) -> None:
        super().__init__(hookspecs.PROJECT)
        for spec in hookspecs.ALL_SPECS:
            self.add_hookspecs(spec)
        self._ordered: list[Any] | None = None
        self._plugin_dists: dict[str, str] = {}
        self._dropped: dict[int, frozenset[str]] = {}
        self._defer_drops = 0
        self._drops_pending = False
        #: the highest position (in the members' order) of a member whose drops are pending
        self._drops_upto = -1
        #: (member, the hooks it is registered for) while ``register`` registers it
        self._registering: tuple[Any, frozenset[str]] | None = None
        #: errors raised by members in ``after_train``, collected so that every member's
        #: ``after_train`` runs (see ``take_after_train_errors``)
        self.after_train_errors: list[BaseException] = []
        #: seconds each member spent in ``trigger_epoch`` since the last ``hook_times.clear()``
        self.hook_times: dict[Any, float] = {}
        #: whether hook calls are traced (``TRAINBUS_TRACE_HOOKS``): then every call goes through pluggy
        self.tracing = False
        if os.environ.get("TRAINBUS_TRACE_HOOKS"):
            self.trace.root.setwriter(lambda msg: log.info("hook trace: %s", msg.rstrip()))
            self.enable_tracing()
            self.tracing = True

    def parse_hookspec_opts(self, module_or_class: Any, name: str) -> Any:
        if module_or_class not in hookspecs.ALL_SPECS:
            return super().parse_hookspec_opts(module_or_class, name)
        # trainbus's spec classes are read once per process, not once per manager
        key = (module_or_class, name)
        if key not in _SPEC_OPTS:
            _SPEC_OPTS[key] = super().parse_hookspec_opts(module_or_class, name)
        return _SPEC_OPTS[key]

    def _hooks_to_register(self, plugin: Any) -> frozenset[str]:
        return plugin.hooks_used() - self._dropped.get(id(plugin), frozenset())

    def _member_impl_opts(self, plugin: Any) -> dict[str, dict[str, Any]]:
        """Attribute name -> hookimpl options, for each hook the member ``plugin`` is registered
        for (its adapter's name where the bus installed one): what ``parse_hookimpl_opts`` says
        of every attribute, worked out once per registration. A hook method's options are read
        once per class (unless the instance has an attribute of that name)."""
        own = vars(plugin)
        cls = type(plugin)
        per_class = cls.__dict__.get("_trainbus_impl_opts")
        if per_class is None:
            per_class = {}
            setattr(cls, "_trainbus_impl_opts", per_class)
        out = {}
        for hook in self._hooks_to_register(plugin):
            adapter = _ADAPTER_PREFIX + hook
            if hook in own:
                opts = self._check_order_opts(plugin, hook)
            else:
                opts = per_class.get(hook)
                if opts is None:
                    opts = per_class[hook] = self._check_order_opts(plugin, hook)
            if adapter in own:
                out[adapter] = dict(_DEFAULT_OPTS, specname=hook)
            else:
                out[hook] = opts
        return out

    def parse_hookimpl_opts(self, plugin: Any, name: str) -> Any:
        registering = self._registering
        if registering is not None and registering[0] is plugin:
            # pluggy asks about every attribute of the member being registered: answered from
            # what register() worked out once (a copy: pluggy fills in the options' defaults)
            opts = registering[1].get(name)
            return None if opts is None else dict(opts)
        if is_member(plugin):
            # asked outside a registration: the same answer, worked out for this one question
            # (by the hooks' names only: properties such as Callback.epoch_num are never read)
            opts = self._member_impl_opts(plugin).get(name)
            return None if opts is None else dict(opts)
        if type(plugin) is _Guarded and name not in plugin.__dict__:
            return None  # its hooks are instance attributes; the class has none
        return super().parse_hookimpl_opts(plugin, name)

    def _check_order_opts(self, plugin: Any, name: str) -> dict[str, Any]:
        opts = super().parse_hookimpl_opts(plugin, name)
        if opts is None:
            return dict(_DEFAULT_OPTS)  # MonitorBase.process_* are plain methods
        bad = [k for k in _ORDER_OPTS if opts.get(k)]
        if bad:
            raise pluggy.PluginValidationError(
                plugin,
                f"{plugin}.{name} uses {', '.join(bad)}: a callback cannot; its position in the "
                "callbacks list is its order. Move it in the list instead.",
            )
        return opts

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        if not is_member(plugin):
            return super().register(plugin, name)
        _install_adapters(self, plugin)
        # pluggy asks parse_hookimpl_opts about every attribute of the member: the hooks it is
        # registered for, and their options, are worked out here, once
        self._registering = (plugin, self._member_impl_opts(plugin))
        try:
            return super().register(plugin, name)
        finally:
            self._registering = None

    def register_ordered(self, members: Sequence[Any]) -> None:
        """Register callbacks and monitors so that every hook calls them in this order."""
        if self._ordered is not None:
            raise RuntimeError("callbacks are already registered; the order is fixed once training is set up")
        seen: set[int] = set()
        for m in members:
            if id(m) in seen:
                raise ValueError(f"the callback {m} appears twice in the callbacks/monitors list; pass it once")
            seen.add(id(m))
        for index in reversed(range(len(members))):  # pluggy is LIFO: reverse in, in order out
            self.register(members[index], name=f"callback[{index}]:{members[index]}")
        self._ordered = list(members)
        self.check_pending()

    @property
    def ordered(self) -> list[Any]:
        return list(self._ordered or [])

    # ------------------------------------------------------------------ dropping hooks
    def drop(self, member: Any, hooks: Iterable[str]) -> None:
        """Stop calling ``member`` for ``hooks`` (e.g. a per-step hook it found it does not
        need while setting up its graph). The order of every hook stays the registered one.
        Inside ``deferring_drops()`` the change is made once, when the block ends."""
        hooks = frozenset(hooks)
        unknown = sorted(hooks - set(hookspecs.LOOP_HOOKS) - set(hookspecs.MONITOR_HOOKS))
        if unknown:
            raise ValueError(f"cannot drop unknown hook(s) {unknown} of {member}; the hooks are "
                             f"{', '.join(hookspecs.LOOP_HOOKS + hookspecs.MONITOR_HOOKS)}")
        index = next((i for i, m in enumerate(self._ordered or ()) if m is member), None)
        if index is None:
            return  # not a member of this run (e.g. wrapped by another callback): nothing to drop
        self._dropped[id(member)] = self._dropped.get(id(member), frozenset()) | hooks
        self._drops_pending = True
        self._drops_upto = max(self._drops_upto, index)
        if not self._defer_drops:
            self._apply_drops()

    @contextlib.contextmanager
    def deferring_drops(self) -> Iterator[None]:
        """Collect ``drop()`` calls and re-register the members once at the end."""
        self._defer_drops += 1
        try:
            yield
        finally:
            self._defer_drops -= 1
            if not self._defer_drops and self._drops_pending:
                self._apply_drops()

    def _apply_drops(self) -> None:
        # pluggy has no public way to remove one implementation; unregistering and registering
        # members again, in the same order, keeps the calling order exact. The members are
        # registered last one first: those after the last member that dropped hooks were
        # registered before it and keep their registration; it and those before it are
        # registered again
        members = list(self._ordered or ())[:self._drops_upto + 1]
        names = {id(m): self.get_name(m) for m in members}
        for m in members:
            self.unregister(m)
        for m in reversed(members):
            self.register(m, name=names[id(m)])
        self._drops_pending = False
        self._drops_upto = -1

    def take_after_train_errors(self) -> list[BaseException]:
        """The errors members raised in ``after_train`` since the last call, in calling order."""
        errors, self.after_train_errors = self.after_train_errors, []
        return errors

    def dist_of(self, plugin_name: str) -> str | None:
        return self._plugin_dists.get(plugin_name)

    def describe_hooks(self, hooks: Iterable[str] = hookspecs.LOOP_HOOKS + hookspecs.MONITOR_HOOKS) -> str:
        """The effective calling order, per hook."""
        lines = []
        for h in hooks:
            impls = list(reversed(getattr(self.hook, h).get_hookimpls()))
            names = [impl.plugin_name + _opts_suffix(impl) for impl in impls]
            lines.append(f"{h}: " + (" -> ".join(names) if names else "(nobody)"))
        return "\n".join(lines)

    # ------------------------------------------------------------------ ambient plugins
    def load_ambient(self, disabled: Iterable[str] = ()) -> list[str]:
        """Load and register the plugins of entry-point group ``trainbus.plugins``.

        A plugin that fails to load is a warning naming its distribution (an error with
        ``TRAINBUS_STRICT_PLUGINS=1``). Their plain hook implementations are guarded: an
        exception inside one is reported and does not stop training.
        """
        from trainbus.bus import registry as _registry

        if os.environ.get("TRAINBUS_DISABLE_PLUGIN_AUTOLOAD", "") not in ("", "0"):
            return []
        disabled = set(disabled) | {x.strip() for x in os.environ.get("TRAINBUS_DISABLE_PLUGINS", "").split(",") if x.strip()}
        loaded = []
        by_name = _registry.index(_registry.PLUGIN_GROUP)
        eps = sorted((eps[0] for eps in by_name.values() if len(eps) == 1), key=lambda e: e.name)
        for name, dups in sorted(by_name.items()):
            if len(dups) > 1 and name not in disabled:
                # ambiguous: load none of them (as name resolution refuses to pick one)
                listing = "; ".join(_registry.describe(ep) for ep in dups)
                msg = (f"the trainbus plugin name {name!r} is provided by more than one distribution ({listing}); "
                       "none of them was loaded. Uninstall all but one.")
                if strict_plugins():
                    raise PluginLoadError(msg + " (TRAINBUS_STRICT_PLUGINS is set)")
                warnings.warn(msg, PluginWarning, stacklevel=2)
        for ep in reversed(eps):  # LIFO: reverse in, name order out
            pname = f"plugin:{ep.name}"
            if ep.name in disabled:
                self.set_blocked(pname)
                continue
            if self.has_plugin(pname) or self.is_blocked(pname):
                continue
            try:
                guarded = _guarded_ambient(self, ep, _registry.describe(ep))
                unknown = sorted(set(guarded._trainbus_hooks) - _KNOWN_HOOKS)
                if unknown:
                    raise pluggy.PluginValidationError(
                        guarded, f"it implements unknown hook(s) {', '.join(unknown)}; the hooks are "
                                 f"{', '.join(sorted(_KNOWN_HOOKS))}")
                self.register(guarded, name=pname)
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not brick training
                msg = f"the trainbus plugin {_registry.describe(ep)} was skipped: {type(exc).__name__}: {exc}"
                if strict_plugins():
                    raise PluginLoadError(msg + " (TRAINBUS_STRICT_PLUGINS is set)") from exc
                warnings.warn(msg, PluginWarning, stacklevel=2)
                continue
            self._plugin_dists[pname] = _registry.describe(ep)
            loaded.append(ep.name)
            log.debug("loaded plugin %s", _registry.describe(ep))
        return loaded[::-1]  # in name order, the order their plain impls run


# ---------------------------------------------------------------------- renamed parameters
#: instance attribute under which a callback's adapter for a hook is registered
_ADAPTER_PREFIX = "_trainbus_adapter__"

#: hook -> adapter factory: the adapter's parameters carry the hook's names (pluggy passes the
#: arguments by name) and it calls the user's method with them by position, as tensorpack does.
#: Only the monitor hooks need one: the loop hooks reach the user's underscore methods through
#: trainbus's own methods, which already call them positionally.
_ADAPTERS: dict[str, Any] = {
    "process_scalar": lambda method: lambda name, val: method(name, val),
    "process_image": lambda method: lambda name, val: method(name, val),
    "process_summary": lambda method: lambda summary: method(summary),
    "process_event": lambda method: lambda evt: method(evt),
}


def _renamed_hooks(pm: TrainbusPluginManager, cls: type) -> frozenset[str]:
    """The hooks of ``_ADAPTERS`` for which ``cls`` defines a method whose positional
    parameters are not the hook's own names (cached on the class)."""
    cached = cls.__dict__.get("_trainbus_renamed_hooks")
    if cached is not None:
        return cached
    import inspect

    renamed = set()
    for hook in _ADAPTERS:
        fn = inspect.getattr_static(cls, hook, None)
        if fn is None:
            continue
        expected = [a for a in getattr(pm.hook, hook).spec.argnames if a != "trainer"]
        try:
            params = list(inspect.signature(getattr(cls, hook)).parameters.values())
        except (TypeError, ValueError):
            continue
        if not isinstance(fn, staticmethod) and params:
            params = params[1:]  # self (or cls)
        names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if names[: len(expected)] != expected or any(p.kind is p.POSITIONAL_ONLY for p in params):
            renamed.add(hook)
    cached = frozenset(renamed)
    setattr(cls, "_trainbus_renamed_hooks", cached)
    return cached


def _collecting(pm: TrainbusPluginManager, member: Any, method: Any) -> Any:
    """``after_train``: an error of one member is kept, and every other member's runs too."""
    def after_train() -> None:
        try:
            method()
        except BaseException as e:  # noqa: BLE001 - re-raised by the trainer after the hook
            pm.after_train_errors.append(e)
    return after_train


def _timed(pm: TrainbusPluginManager, member: Any, method: Any) -> Any:
    """``trigger_epoch``: the time each member takes, for the trainer's slow-callback report."""
    def trigger_epoch() -> None:
        start = time.perf_counter()
        try:
            method()
        finally:
            times = pm.hook_times
            times[member] = times.get(member, 0.0) + time.perf_counter() - start
    return trigger_epoch


#: hooks whose member implementations the manager itself wraps (when they take no argument)
_RUN_ADAPTERS = {"after_train": _collecting, "trigger_epoch": _timed}


def _takes_no_argument(method: Any) -> bool:
    import inspect

    try:
        return not inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


def _install_adapters(pm: TrainbusPluginManager, plugin: Any) -> None:
    """Before ``plugin`` is registered: an adapter, built once, for each hook method it names
    differently, and the manager's own wrappers of ``after_train``/``trigger_epoch``; pluggy
    then registers the adapter in place of the method."""
    used = plugin.hooks_used()
    renamed = _renamed_hooks(pm, type(plugin))
    for hook in _ADAPTERS:
        attr = _ADAPTER_PREFIX + hook
        if hook in renamed and hook in used:
            plugin.__dict__[attr] = _ADAPTERS[hook](getattr(plugin, hook))
        else:
            plugin.__dict__.pop(attr, None)
    for hook, wrap in _RUN_ADAPTERS.items():
        attr = _ADAPTER_PREFIX + hook
        method = getattr(plugin, hook, None) if hook in used else None
        if method is not None and _takes_no_argument(method):
            plugin.__dict__[attr] = wrap(pm, plugin, method)
        else:
            plugin.__dict__.pop(attr, None)


def contribution_manager() -> TrainbusPluginManager:
    """The process's manager for the contribution hooks (``default_callbacks``,
    ``default_monitors``, ``sessinit_for``): the ambient plugins, loaded once per set of
    installed distributions and plugin switches."""
    from trainbus.bus import registry

    key = (id(registry.index(registry.PLUGIN_GROUP)),
           *(os.environ.get(v, "") for v in ("TRAINBUS_DISABLE_PLUGIN_AUTOLOAD", "TRAINBUS_DISABLE_PLUGINS",
                                             "TRAINBUS_STRICT_PLUGINS")))
    pm = _CONTRIBUTION_MANAGERS.get(key)
    if pm is None:
        pm = TrainbusPluginManager()
        pm.load_ambient()
        _CONTRIBUTION_MANAGERS.clear()
        _CONTRIBUTION_MANAGERS[key] = pm
    return pm


_CONTRIBUTION_MANAGERS: dict[tuple, TrainbusPluginManager] = {}


@functools.lru_cache(maxsize=None)
def _load_ambient_cached(ep: Any) -> Any:
    from trainbus.bus import registry as _registry

    return _registry.load(ep, f"{_registry.PLUGIN_GROUP}.{ep.name}")


#: id(loaded plugin object) -> (the object, the description its messages use, its guarded
#: stand-in): an ambient plugin that is a module or an object is looked through and guarded
#: once per process, and every manager (the contribution manager, each training's) registers
#: the same stand-in; one that is a class is made and guarded again for each manager
_GUARDED: dict[int, tuple[Any, str, Any]] = {}


def _guarded_ambient(pm: TrainbusPluginManager, ep: Any, who: str) -> Any:
    obj = _load_ambient_cached(ep)
    if isinstance(obj, type):
        return _guard(pm, obj(), who)  # a class: one instance per manager
    hit = _GUARDED.get(id(obj))
    if hit is not None and hit[0] is obj and hit[1] == who:
        return hit[2]
    guarded = _guard(pm, obj, who)
    _GUARDED[id(obj)] = (obj, who, guarded)
    return guarded


class _Guarded:
    """Stand-in registered for an ambient plugin: same hooks, errors reported not raised.
    The hooks are instance attributes, named in ``_trainbus_hooks``."""

    def __init__(self, target: Any, hooks: tuple[str, ...] = ()) -> None:
        self._target = target
        self._trainbus_hooks: tuple[str, ...] = tuple(hooks)

    def __repr__(self) -> str:
        return f"<guarded {self._target!r}>"


#: every hook name an ambient plugin may implement
_KNOWN_HOOKS = frozenset(
    name for spec in hookspecs.ALL_SPECS for name in vars(spec) if not name.startswith("_")
)


def _hook_names(pm: TrainbusPluginManager, obj: Any) -> list[str]:
    return [name for name in dir(obj) if pluggy.PluginManager.parse_hookimpl_opts(pm, obj, name) is not None]


def _guard(pm: TrainbusPluginManager, obj: Any, who: str) -> Any:
    guarded = _Guarded(obj, tuple(_hook_names(pm, obj)))
    for name in guarded._trainbus_hooks:
        opts = pluggy.PluginManager.parse_hookimpl_opts(pm, obj, name)
        method = getattr(obj, name)
        if opts.get("wrapper") or opts.get("hookwrapper") or name == "sessinit_for":
            # wrappers run as written; sessinit_for errors are about the user's object
            setattr(guarded, name, method)
            continue
        if name in ("default_callbacks", "default_monitors"):
            setattr(guarded, name, _guarded_contribution(method, who, name))
            continue
        setattr(guarded, name, _guarded_call(method, who, name))
    return guarded


def _report(who: str, what: str, exc: BaseException | None) -> None:
    msg = f"the trainbus plugin {who} {what}; training goes on"
    if strict_plugins():
        err = PluginLoadError(msg.replace("; training goes on", " (TRAINBUS_STRICT_PLUGINS is set)"))
        if exc is not None:
            raise err from exc
        raise err
    warnings.warn(msg, PluginWarning, stacklevel=3)


class _NoStopRunContext:
    """The ``run_context`` an ambient plugin sees in ``before_run``/``after_run``: the real
    one, except that ``request_stop()`` is reported (a warning naming the distribution)
    instead of stopping training."""

    __slots__ = ("_ctx", "_who", "_hook")

    def __init__(self, ctx: Any, who: str, hook: str) -> None:
        self._ctx = ctx
        self._who = who
        self._hook = hook

    @property
    def original_args(self) -> Any:
        return self._ctx.original_args

    @property
    def session(self) -> Any:
        return self._ctx.session

    @property
    def stop_requested(self) -> bool:
        return self._ctx.stop_requested

    def request_stop(self) -> None:
        _report(self._who, f"tried to stop training in {self._hook}() (run_context.request_stop()); an ambient "
                           "plugin cannot stop training, put a callback in the callbacks list for that", None)


def _ctx_position(method: Any) -> int | None:
    import inspect

    try:
        names = [p.name for p in inspect.signature(method).parameters.values()]
    except (TypeError, ValueError):
        return None
    return names.index("run_context") if "run_context" in names else None


def _guarded_call(method: Any, who: str, hook: str) -> Any:
    from trainbus.exceptions import StopTraining

    ctx_pos = _ctx_position(method) if hook in ("before_run", "after_run") else None

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        if ctx_pos is not None:
            # pluggy passes the hook's arguments positionally, by the implementation's names
            if "run_context" in kwargs:
                kwargs["run_context"] = _NoStopRunContext(kwargs["run_context"], who, hook)
            elif ctx_pos < len(args):
                args = args[:ctx_pos] + (_NoStopRunContext(args[ctx_pos], who, hook),) + args[ctx_pos + 1:]
        try:
            return method(*args, **kwargs)
        except (StopTraining, SystemExit) as exc:
            # only the callbacks the user listed may end training
            _report(who, f"tried to stop training in {hook}() ({type(exc).__name__}: {exc}); an ambient plugin "
                         "cannot stop training, put a callback in the callbacks list for that", exc)
            return None
        except Exception as exc:  # noqa: BLE001
            _report(who, f"raised in {hook}(): {type(exc).__name__}: {exc}", exc)
            return None

    return call


def _guarded_contribution(method: Any, who: str, hook: str) -> Any:
    """``default_callbacks``/``default_monitors``: errors and malformed answers are reported
    and dropped; each factory is guarded too (a failing one contributes nothing)."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            entries = list(method(*args, **kwargs) or [])
            checked = []
            for entry in entries:
                slot, factory = entry
                if isinstance(slot, bool) or not isinstance(slot, (int, float)) or not callable(factory):
                    raise TypeError(f"{entry!r} is not a (slot number, factory) pair")
                checked.append((slot, _guarded_factory(factory, who, hook)))
            return checked
        except Exception as exc:  # noqa: BLE001
            _report(who, f"gave no usable answer to {hook}(): {type(exc).__name__}: {exc}", exc)
            return None

    return call


def _guarded_factory(factory: Any, who: str, hook: str) -> Any:
    @functools.wraps(factory)
    def make() -> Any:
        try:
            made = factory()
            if not is_member(made):
                raise TypeError(f"{factory!r}() returned {made!r}, not a Callback")
            return made
        except Exception as exc:  # noqa: BLE001
            _report(who, f"contributed a default to {hook}() that could not be made: {type(exc).__name__}: {exc}", exc)
            return None

    return make


def _opts_suffix(impl: Any) -> str:
    flags = [k for k in ("tryfirst", "trylast", "wrapper", "hookwrapper") if getattr(impl, k, False)]
    return f" [{','.join(flags)}]" if flags else ""
