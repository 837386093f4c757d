"""The Callback contract: public hook methods owned by trainbus, underscore methods for users.

No TensorFlow import at module level: the event core must import without it.
"""

from __future__ import annotations

import inspect
import logging
import types
from typing import TYPE_CHECKING, Any, Callable

from trainbus.bus.dispatch import annotate as _annotate
from trainbus.bus.dispatch import member_method
from trainbus.bus.dispatch import origin_of  # noqa: F401 - re-exported
from trainbus.bus.hookspecs import hookimpl

if TYPE_CHECKING:  # pragma: no cover
    from trainbus.bus.protocols import TrainerView as Trainer

__all__ = ["Callback", "ProxyCallback", "CallbackFactory", "RunValuesByRequester", "HOOK_USES"]

log = logging.getLogger("trainbus.callbacks")

#: loop hook -> the underscore methods whose override means "this callback needs the hook".
#: ``setup_graph`` is always registered: it hands the trainer to the callback.
HOOK_USES: dict[str, tuple[str, ...]] = {
    "setup_graph": (),
    "before_train": ("_before_train",),
    "before_epoch": ("_before_epoch",),
    "before_run": ("_before_run",),
    "after_run": ("_after_run",),
    "trigger_step": ("_trigger_step",),
    "after_epoch": ("_after_epoch",),
    "trigger_epoch": ("_trigger_epoch", "_trigger"),
    "after_train": ("_after_train",),
}
#: Public methods that subclasses must not override (their underscore twins are the API).
PROTECTED = frozenset({*HOOK_USES, "trigger"})
#: The methods a subclass overrides -> the arguments trainbus passes them, positionally (so a
#: subclass may name its parameters as it likes; their number is checked when the class is made).
USER_METHOD_PARAMS: dict[str, tuple[str, ...]] = {
    "_setup_graph": (),
    "_before_train": (),
    "_before_epoch": (),
    "_before_run": ("ctx",),
    "_after_run": ("run_context", "run_values"),
    "_trigger_step": (),
    "_after_epoch": (),
    "_trigger_epoch": (),
    "_trigger": (),
    "_after_train": (),
    "_state_dict": (),
    "_load_state_dict": ("state",),
}


from trainbus.callbacks.run_values import RunValuesByRequester  # noqa: E402,F401 - re-exported here


def _positional_arity(fn: Any) -> tuple[int, float, list[str]] | None:
    """``(required, most, required keyword-only names)`` of the positional arguments a class
    attribute takes when called on an instance; None if it is not a function we can inspect."""
    drop_first = True
    if isinstance(fn, staticmethod):
        fn, drop_first = fn.__func__, False
    elif isinstance(fn, classmethod):
        fn = fn.__func__
    if not isinstance(fn, types.FunctionType):
        return None
    if not _SIGNATURE_ATTRS & fn.__dict__.keys():
        return _code_arity(fn, drop_first)
    return _signature_arity(fn, drop_first)


def _signature_arity(fn: types.FunctionType, drop_first: bool) -> tuple[int, float, list[str]]:
    """``_positional_arity`` from ``inspect.signature`` (which follows ``__wrapped__``)."""
    params = list(inspect.signature(fn).parameters.values())
    if drop_first:
        if not params or params[0].kind not in (params[0].POSITIONAL_ONLY, params[0].POSITIONAL_OR_KEYWORD):
            return 0, float("inf") if any(p.kind is p.VAR_POSITIONAL for p in params) else 0, []
        params = params[1:]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = sum(1 for p in positional if p.default is p.empty)
    most = float("inf") if any(p.kind is p.VAR_POSITIONAL for p in params) else len(positional)
    kwonly = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    return required, most, kwonly


#: function attributes through which ``inspect.signature`` gives another signature than the code's
_SIGNATURE_ATTRS = frozenset({"__wrapped__", "__signature__", "_partialmethod", "__partialmethod__"})


def _code_arity(fn: types.FunctionType, drop_first: bool) -> tuple[int, float, list[str]]:
    """``_signature_arity`` of a plain function, read from its code object (what
    ``inspect.signature`` reads, without building a Signature: every callback class that is
    defined is checked)."""
    code = fn.__code__
    npos = code.co_argcount
    varargs = bool(code.co_flags & inspect.CO_VARARGS)
    first = 1 if drop_first else 0
    if drop_first and not npos:
        return 0, float("inf") if varargs else 0, []
    with_default = len(fn.__defaults__ or ())
    required = max(0, npos - with_default - first)
    most = float("inf") if varargs else npos - first
    kwdefaults = fn.__kwdefaults__ or {}
    kwonly = [n for n in code.co_varnames[npos:npos + code.co_kwonlyargcount] if n not in kwdefaults]
    return required, most, kwonly


def check_overrides(cls: type, table: dict[str, tuple[str, ...]]) -> None:
    """TypeError if a method of ``table`` defined by ``cls`` cannot be called with the number
    of arguments trainbus passes it (positionally: the parameter names are the class's own)."""
    for name, params in table.items():
        fn = vars(cls).get(name)
        arity = _positional_arity(fn) if fn is not None else None
        if arity is None:
            continue
        required, most, kwonly = arity
        n = len(params)
        if required <= n <= most and not kwonly:
            continue
        expected = f"def {name}(self{''.join(', ' + p for p in params)})"
        if kwonly:
            got = f"required keyword-only parameter(s) {', '.join(kwonly)}"
        elif most == required:
            got = f"{required} argument(s) besides self"
        elif most == float("inf"):
            got = f"at least {required} argument(s) besides self"
        else:
            got = f"{required} to {most} argument(s) besides self"
        raise TypeError(
            f"{cls.__module__}.{cls.__qualname__}.{name}() takes {got}, but trainbus calls it with {n}: "
            f"expected {expected}. The parameters may have any names (they are passed by position); "
            "their number must match."
        )


class Callback:
    """Base class of all callbacks.

    Override the underscore methods (``_setup_graph``, ``_before_train``, ``_before_epoch``,
    ``_before_run``, ``_after_run``, ``_trigger_step``, ``_after_epoch``, ``_trigger_epoch``,
    ``_trigger``, ``_after_train``); the public methods of the same names are the hooks the
    trainer fires, and overriding one of them raises ``TypeError`` when the class is defined.

    Only the hooks whose underscore method a class overrides are registered on the bus, so a
    callback that does nothing per step costs nothing per step.

    Example::

        class PrintLoss(Callback):
            def _setup_graph(self):
                self._loss = self.get_tensors_maybe_in_tower(["loss"])[0]

            def _before_run(self, ctx):
                return tf.compat.v1.train.SessionRunArgs(fetches=self._loss)

            def _after_run(self, ctx, values):
                print(self.global_step, values.results)
    """

    _chief_only = True
    #: per-step hook -> the method the dispatcher calls directly (see ``trainbus.bus.protocols.Member``)
    hook_direct_methods = {"trigger_step": "_trigger_step", "before_run": "_before_run", "after_run": "_after_run"}
    #: Name scope of the ops created in ``_setup_graph``; defaults to the class name.
    name_scope: str = ""

    trainer: Trainer
    graph: Any

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        overridden = sorted(PROTECTED & vars(cls).keys())
        if overridden:
            hook = overridden[0]
            raise TypeError(
                f"{cls.__module__}.{cls.__qualname__} overrides Callback.{hook}(); override "
                f"_{hook}() instead. The public method is the hook the trainer calls and it must "
                "stay trainbus's (it keeps the call order, timing and error reporting)."
            )
        check_overrides(cls, USER_METHOD_PARAMS)

    # ------------------------------------------------------------------ registration
    def hooks_used(self) -> frozenset[str]:
        """The loop hooks to register this callback for (the others never reach it)."""
        cls = type(self)
        cache = cls.__dict__.get("_trainbus_hooks_used")
        if cache is None:
            cache = frozenset(
                hook for hook, privates in HOOK_USES.items()
                if not privates or any(getattr(cls, p) is not getattr(Callback, p) for p in privates)
            )
            setattr(cls, "_trainbus_hooks_used", cache)
        return cache

    # ------------------------------------------------------------------ state
    @property
    def epoch_num(self) -> int:
        """The trainer's current epoch (see ``Trainer.epoch_num``)."""
        return self.trainer.epoch_num

    @property
    def global_step(self) -> int:
        """The trainer's global step (see ``Trainer.global_step``)."""
        return self.trainer.global_step

    @property
    def local_step(self) -> int:
        """The trainer's step within the epoch (see ``Trainer.local_step``)."""
        return self.trainer.local_step

    @property
    def chief_only(self) -> bool:
        """Only run this callback in the chief training process."""
        return self._chief_only

    @chief_only.setter
    def chief_only(self, v: bool) -> None:
        self._chief_only = bool(v)

    def set_chief_only(self, v: bool = True) -> Callback:
        """Set ``chief_only`` and return the callback itself."""
        self._chief_only = bool(v)
        return self

    # ------------------------------------------------------------------ hooks (trainbus's)
    @hookimpl
    def setup_graph(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self.graph = trainer.graph
        try:
            from trainbus.utils import lazytf as _tf

            tf1 = _tf.tf1()
            scope = (self.name_scope or type(self).__name__).replace("_", "")
            with self.graph.as_default(), tf1.variable_scope(tf1.get_variable_scope()), tf1.name_scope(scope + "/"):
                self._setup_graph()
        except BaseException as e:
            _annotate(e, self, "setup_graph")
            raise

    # the other hooks: what the bus means by each (trainbus.bus.dispatch.member_method), for
    # this callback; the dispatcher calls the per-step ones' underscore methods directly
    before_run = member_method("before_run", "_before_run")
    after_run = member_method("after_run", "_after_run")
    before_train = member_method("before_train", "_before_train")
    before_epoch = member_method("before_epoch", "_before_epoch")
    after_epoch = member_method("after_epoch", "_after_epoch")
    trigger_step = member_method("trigger_step", "_trigger_step")
    trigger_epoch = member_method("trigger_epoch", "_trigger_epoch")
    after_train = member_method("after_train", "_after_train")
    trigger = member_method("trigger", "_trigger", marked=False)
    trigger.__doc__ = "Run ``_trigger()``; schedulers such as ``PeriodicTrigger`` call this."

    # ------------------------------------------------------------------ user API
    def _setup_graph(self) -> None:
        """Create the ops and tensors the callback needs; the graph is finalized afterwards."""

    def _before_train(self) -> None:
        """Called once before the first step, with the session created and initialized."""

    def _after_train(self) -> None:
        """Called once after training, also after an error: release resources here."""

    def _before_epoch(self) -> None:
        """Called right before each epoch; keep it fast."""

    def _after_epoch(self) -> None:
        """Called right after each epoch's last step; keep it fast."""

    def _before_run(self, ctx: Any) -> Any:
        """Return ``SessionRunArgs`` (or a list of tensors / tensor names) to run along with
        the step, or None. Same contract as ``tf.compat.v1.train.SessionRunHook.before_run``."""
        return None

    def _after_run(self, run_context: Any, run_values: Any) -> None:
        """Receive the values requested by ``_before_run`` (``run_values.results``)."""

    def _trigger_step(self) -> None:
        """Called after each step finished."""

    def _trigger_epoch(self) -> None:
        """Called after each epoch; calls ``self.trigger()`` by default."""
        self.trigger()

    def _trigger(self) -> None:
        """What to do when triggered: after each epoch by default, or as scheduled by a
        ``PeriodicTrigger`` (which may call it within an epoch)."""

    # ------------------------------------------------------------------ resumable state
    def _state_dict(self) -> dict | None:
        """Return this callback's JSON-serializable state to save with each checkpoint, or
        None (the default) if it has none. A resumed run passes it to ``_load_state_dict``."""
        return None

    def _load_state_dict(self, state: dict) -> None:
        """Restore what ``_state_dict`` returned (called before ``before_train`` on resume)."""
        raise TypeError(f"{type(self).__name__} returns a _state_dict() but does not implement _load_state_dict()")

    def _state_key_args(self) -> tuple:
        """What tells this callback apart from others of its class (e.g. the statistic it
        watches); part of the default ``state_key``. Stateful subclasses override it."""
        return ()

    def _has_state(self) -> bool:
        """Whether this callback saves state with checkpoints (its class overrides ``_state_dict``)."""
        return type(self)._state_dict is not Callback._state_dict

    @property
    def state_key(self) -> str:
        """The name this callback's state is saved and looked up under in a checkpoint's
        ``.trainbus.json`` file. Default: the class name, followed by the identifying
        constructor arguments in parentheses, e.g. ``EarlyStopping(val-error)``. Set it (or use
        ``set_state_key``) to tell apart two callbacks whose default keys are equal, or to keep
        the saved state of a callback whose class or arguments were renamed."""
        key = self.__dict__.get("_state_key")
        if key is not None:
            return key
        args = self._state_key_args()
        name = type(self).__name__
        return f"{name}({','.join(str(a) for a in args)})" if args else name

    @state_key.setter
    def state_key(self, key: str) -> None:
        if not isinstance(key, str) or not key.strip():
            raise ValueError(f"{self}: state_key must be a non-empty string, got {key!r}")
        self._state_key = key

    def set_state_key(self, key: str) -> Callback:
        """Set ``state_key`` and return the callback itself."""
        self.state_key = key
        return self

    # ------------------------------------------------------------------ helpers
    def _drop_hooks(self, *hooks: str) -> None:
        """Call from ``_setup_graph`` to stop receiving some hooks, e.g. a per-step hook that
        turned out to have nothing to run (an empty collection): the trainer binds its hooks
        again after ``setup_graph``, so a dropped per-step hook costs nothing per step.
        A callback wrapped by another (``PeriodicTrigger``...) is not registered itself; then
        this does nothing and the wrapper keeps forwarding (the underscore method still runs)."""
        unknown = [h for h in hooks if h not in HOOK_USES or h == "setup_graph"]
        if unknown:
            raise ValueError(f"{self}: cannot drop hook(s) {unknown}; droppable: {sorted(set(HOOK_USES) - {'setup_graph'})}")
        pm = getattr(getattr(self, "trainer", None), "plugin_manager", None)
        if pm is not None:
            pm.drop(self, hooks)

    def run_request(self, fetches: Any) -> Any:
        """The ``SessionRunArgs`` the session runs for what ``_before_run`` answered (a
        ``SessionRunArgs``, a tensor or tensor name, or a list of them; names are looked up
        with ``get_tensors_maybe_in_tower``)."""
        from trainbus.utils import lazytf as _tf

        tf1 = _tf.tf1()
        if isinstance(fetches, tf1.train.SessionRunArgs):
            return fetches
        cached = getattr(self, "_trainbus_last_args", None)
        if cached is not None and cached[0] is fetches:
            return cached[1]
        if isinstance(fetches, (list, tuple)):
            resolved = [f if not isinstance(f, str) else self.get_tensors_maybe_in_tower([f])[0] for f in fetches]
        elif isinstance(fetches, str):
            resolved = self.get_tensors_maybe_in_tower([fetches])[0]
        else:
            resolved = fetches
        args = tf1.train.SessionRunArgs(fetches=resolved)
        self._trainbus_last_args = (fetches, args)
        return args

    def get_tensors_maybe_in_tower(self, names: list[str]) -> list[Any]:
        """Tensors by name; a name not found in the graph is looked up in the first
        training tower (so ``"loss"`` finds ``"tower0/loss:0"``)."""
        from trainbus.tfutils.common import get_op_tensor_name

        graph = self.graph
        out = []
        for name in names:
            _, tname = get_op_tensor_name(name)
            try:
                out.append(_variable_value(graph.get_tensor_by_name(tname)))
                continue
            except KeyError:
                pass
            towers = getattr(self.trainer, "towers", None)
            if towers is not None:
                try:
                    out.append(towers.training()[0][name])
                    continue
                except (KeyError, IndexError):
                    pass
            raise KeyError(
                f"{self}: no tensor named {name!r} in the graph, nor in the first training tower. "
                "Check the name (ops print their names with tf.compat.v1.get_default_graph().get_operations())."
            )
        return out

    def __str__(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.{type(self).__qualname__} at {id(self):#x}>"


class ProxyCallback(Callback):
    """A callback that forwards every method to another callback ``cb``.

    The base of callbacks that decorate other callbacks (schedulers, conditions).
    """

    def __init__(self, cb: Callback) -> None:
        if not isinstance(cb, Callback):
            raise TypeError(f"{type(self).__name__} wraps a Callback, got {cb!r} ({type(cb).__name__})")
        self.cb = cb
        self._chief_only = cb.chief_only

    def hooks_used(self) -> frozenset[str]:
        # register only what the wrapped callback needs, plus what this class adds itself
        own = Callback.hooks_used(self)
        inner = self.cb.hooks_used()
        mine = {h for h in own if h not in _PROXY_FORWARDERS or h in inner}
        return frozenset(mine | inner | self._extra_hooks())

    def _extra_hooks(self) -> frozenset[str]:
        return frozenset()

    @property
    def chief_only(self) -> bool:
        return self._chief_only

    @chief_only.setter
    def chief_only(self, v: bool) -> None:
        self._chief_only = bool(v)
        self.cb.chief_only = v

    def set_chief_only(self, v: bool = True) -> Callback:
        self.chief_only = v
        return self

    # the wrapped callback's state is saved and restored through its wrapper, under its own key
    @property
    def state_key(self) -> str:
        return self.cb.state_key

    @state_key.setter
    def state_key(self, key: str) -> None:
        self.cb.state_key = key

    def _has_state(self) -> bool:
        return self.cb._has_state()

    def _state_dict(self) -> dict | None:
        return self.cb._state_dict()

    def _load_state_dict(self, state: dict) -> None:
        self.cb._load_state_dict(state)

    def _setup_graph(self) -> None:
        self.cb.setup_graph(self.trainer)

    def _before_train(self) -> None:
        self.cb.before_train()

    def _before_epoch(self) -> None:
        self.cb.before_epoch()

    def _after_epoch(self) -> None:
        self.cb.after_epoch()

    def _before_run(self, ctx: Any) -> Any:
        return self.cb._before_run(ctx)

    def _after_run(self, ctx: Any, run_values: Any) -> None:
        self.cb._after_run(ctx, run_values)

    def _trigger_step(self) -> None:
        self.cb.trigger_step()

    def _trigger_epoch(self) -> None:
        self.cb.trigger_epoch()

    def _trigger(self) -> None:
        self.cb.trigger()

    def _after_train(self) -> None:
        self.cb.after_train()

    def __str__(self) -> str:
        return f"Proxy-{self.cb}"


#: Hooks that ProxyCallback forwards: registered only when the wrapped callback uses them.
_PROXY_FORWARDERS = frozenset(HOOK_USES) - {"setup_graph"}


class CallbackFactory(Callback):
    """A callback made of functions: each takes the callback itself as its only argument."""

    def __init__(
        self,
        setup_graph: Callable[[Callback], Any] | None = None,
        before_train: Callable[[Callback], Any] | None = None,
        trigger: Callable[[Callback], Any] | None = None,
        after_train: Callable[[Callback], Any] | None = None,
    ) -> None:
        for label, fn in (("setup_graph", setup_graph), ("before_train", before_train),
                          ("trigger", trigger), ("after_train", after_train)):
            if fn is not None and not callable(fn):
                raise TypeError(f"CallbackFactory({label}=...) needs a callable taking the callback, got {fn!r}")
        self._cb_setup_graph = setup_graph
        self._cb_before_train = before_train
        self._cb_trigger = trigger
        self._cb_after_train = after_train

    def hooks_used(self) -> frozenset[str]:
        used = {"setup_graph"}
        if self._cb_before_train:
            used.add("before_train")
        if self._cb_trigger:
            used.add("trigger_epoch")
        if self._cb_after_train:
            used.add("after_train")
        return frozenset(used)

    def _setup_graph(self) -> None:
        if self._cb_setup_graph:
            self._cb_setup_graph(self)

    def _before_train(self) -> None:
        if self._cb_before_train:
            self._cb_before_train(self)

    def _trigger(self) -> None:
        if self._cb_trigger:
            self._cb_trigger(self)

    def _after_train(self) -> None:
        if self._cb_after_train:
            self._cb_after_train(self)

    def __str__(self) -> str:
        names = [f.__name__ for f in (self._cb_setup_graph, self._cb_before_train, self._cb_trigger, self._cb_after_train)
                 if f is not None and hasattr(f, "__name__")]
        return f"CallbackFactory({', '.join(names)})"


def _variable_value(t: Any) -> Any:
    """For the handle of a resource variable (``"W:0"`` names the handle, not the value as
    with the reference variables of TF1), the tensor that reads the variable's value."""
    if t.op.type != "VarHandleOp":
        return t
    for key in ("variables", "local_variables"):  # GLOBAL_VARIABLES, LOCAL_VARIABLES
        for v in t.graph.get_collection(key):
            if getattr(v, "handle", None) is t:
                elem = getattr(v, "_graph_element", None)
                if elem is not None:
                    return elem
    return t


def ensure_callback(obj: Any, where: str) -> Callback:
    """TypeError naming ``obj`` unless it is a Callback."""
    if not isinstance(obj, Callback):
        hint = ""
        if isinstance(obj, type) and issubclass(obj, Callback):
            hint = f" (it is the class; pass an instance: {obj.__name__}(...))"
        elif hasattr(obj, "before_run") and hasattr(obj, "after_run"):
            hint = " (it looks like a tf SessionRunHook; wrap it: trainbus.callbacks.HookToCallback(hook))"
        raise TypeError(f"{where} must contain trainbus Callback instances; got {obj!r} of type {type(obj).__name__}{hint}")
    return obj
