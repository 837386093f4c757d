"""Monitors: ``MonitorBase`` for backends, ``Monitors`` as the hub on ``trainer.monitors``.

``trainer.monitors.put_*`` fires the monitor hooks of the bus (``process_scalar``, ...), so
every installed backend, and any ambient plugin, receives the data in the order the monitors
were given. The hub keeps the scalar history itself, whatever backends are installed.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any, Iterable

from trainbus.bus.dispatch import implemented
from trainbus.callbacks.base import Callback, check_overrides, ensure_callback

if TYPE_CHECKING:  # pragma: no cover
    from trainbus.bus.protocols import TrainerView as Trainer

__all__ = ["MonitorBase", "Monitors", "MONITOR_METHODS", "MONITOR_METHOD_PARAMS"]

#: monitor hook -> the MonitorBase methods whose override means "I need this hook"
MONITOR_METHODS: dict[str, tuple[str, ...]] = {
    "process_scalar": ("process_scalar", "process"),
    "process_image": ("process_image", "process"),
    "process_summary": ("process_summary",),
    "process_event": ("process_event",),
}

#: MonitorBase methods -> the arguments trainbus passes them, positionally (a backend may name
#: its parameters as it likes: the bus registers an adapter carrying the hook's names)
MONITOR_METHOD_PARAMS: dict[str, tuple[str, ...]] = {
    "process": ("name", "val"),
    "process_scalar": ("name", "val"),
    "process_image": ("name", "val"),
    "process_summary": ("summary",),
    "process_event": ("evt",),
}

_TOWER_PREFIX = re.compile(r"tower[0-9]+/")

#: what a disabled monitor (``enabled`` False) is registered for
_DISABLED_HOOKS = frozenset({"setup_graph"})


class MonitorBase(Callback):
    """Base class of monitor backends.

    Override ``_setup_graph`` to set up, and any of ``process_scalar(name, val)``,
    ``process_image(name, val)``, ``process_summary(summary)``, ``process_event(evt)`` (or the
    generic ``process(name, val)``, which the default scalar/image methods call) to receive data.
    Only the methods a backend overrides are registered on the bus. Their parameters may have
    any names: trainbus passes the values by position, as in ``process_summary(self, s)``.
    """

    #: Whether the backend has somewhere to write. A backend without one (e.g. a file writer
    #: constructed without a logger directory) sets or overrides it to be False: it is then
    #: registered for ``setup_graph`` only and receives nothing.
    enabled: bool = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_overrides(cls, MONITOR_METHOD_PARAMS)

    def hooks_used(self) -> frozenset[str]:
        if not self.enabled:
            return _DISABLED_HOOKS
        cls = type(self)
        cache = cls.__dict__.get("_trainbus_monitor_hooks")
        if cache is None:
            cache = frozenset(
                hook for hook, methods in MONITOR_METHODS.items()
                if any(getattr(cls, m) is not getattr(MonitorBase, m) for m in methods)
            )
            setattr(cls, "_trainbus_monitor_hooks", cache)
        used = super().hooks_used() | cache
        off = self._hooks_turned_off()
        return used - frozenset(off) if off else used

    def _hooks_turned_off(self) -> Iterable[str]:
        """Hooks this instance does not need although its class implements them (an option
        turned off, e.g. ``log_images=False`` drops ``process_image``): they are not
        registered, so they cost nothing. Default: none."""
        return ()

    def process(self, name: str, val: Any) -> None:
        """Process one key-value pair (scalars and images by default come here)."""

    def process_scalar(self, name: str, val: Any) -> None:
        """One scalar."""
        self.process(name, val)

    def process_image(self, name: str, val: Any) -> None:
        """``val``: 4D NHWC ``numpy`` array in [0, 255]; 3 channels are RGB."""
        self.process(name, val)

    def process_summary(self, summary: Any) -> None:
        """A ``tf.compat.v1.Summary``."""

    def process_event(self, evt: Any) -> None:
        """A ``tf.compat.v1.Event``: it may hold a Summary, RunMetadata, a LogMessage, ..."""


class Monitors(Callback):
    """Merges monitors for the trainer: ``trainer.monitors`` dispatches to every backend.

    Use ``trainer.monitors.put_scalar`` and friends for all logging. The history of scalars
    is kept here (``get_history``/``get_latest``); in multi-process training it exists on the
    processes that run the monitors (the chief, by default).
    """

    _chief_only = False

    def __init__(self, monitors: Iterable[MonitorBase]) -> None:
        self._monitors = []
        for m in monitors:
            ensure_callback(m, "monitors")
            if not isinstance(m, MonitorBase):
                raise TypeError(f"monitors must be MonitorBase instances; {m} ({type(m).__name__}) is a plain Callback: put it in callbacks")
            self._monitors.append(m)
        self._history: dict[str, list[tuple[int, Any]]] = {}
        self._hook: Any = None
        self._trainer: Trainer | None = None
        self._want_summary = False

    @property
    def monitors(self) -> list[MonitorBase]:
        return list(self._monitors)

    def bind(self, trainer: Trainer, hook_relay: Any) -> None:
        """Connect to the trainer's bus (done by the trainer after registration)."""
        self._trainer = trainer
        self._hook = hook_relay
        self._want_summary = implemented(hook_relay.process_summary)

    def _step(self) -> int:
        return self._trainer.global_step if self._trainer is not None else 0

    # ---------------------------------------------------------------- history
    def load_history(self, records: Iterable[dict]) -> None:
        """Fill the scalar history from ``stats.json``-style records (used when resuming);
        an entry that is not a record (not a dict) carries no scalars and is skipped."""
        for rec in records:
            if not isinstance(rec, dict):
                continue
            step = int(rec.get("global_step", 0))
            for k, v in rec.items():
                if k in ("global_step", "epoch_num") or not isinstance(v, (int, float)):
                    continue
                self._history.setdefault(k, []).append((step, v))

    def get_history(self, name: str) -> list[tuple[int, Any]]:
        """All ``(global_step, value)`` pairs recorded for the scalar ``name``."""
        try:
            return self._history[name]
        except KeyError:
            raise KeyError(self._missing(name)) from None

    def get_latest(self, name: str) -> Any:
        """The latest value recorded for the scalar ``name``."""
        try:
            return self._history[name][-1][1]
        except KeyError:
            raise KeyError(self._missing(name)) from None

    def _missing(self, name: str) -> str:
        known = ", ".join(sorted(self._history)) or "none yet"
        return f"no scalar named {name!r} has been put to the monitors (known: {known})"

    # ---------------------------------------------------------------- put_*
    def put_scalar(self, name: str, val: Any) -> None:
        """Put a scalar."""
        val = _to_python_number(name, val)
        self._history.setdefault(name, []).append((self._step(), val))
        if self._hook is None:
            return
        self._hook.process_scalar(trainer=self._trainer, name=name, val=val)
        if self._want_summary:
            from trainbus.utils import lazytf as _tf

            s = _tf.tf1().Summary()
            s.value.add(tag=name, simple_value=float(val))
            self._hook.process_summary(trainer=self._trainer, summary=s)

    def put_image(self, name: str, val: Any) -> None:
        """Put images: 2D (HW), 3D (HWC) or 4D (NHWC) array in [0, 255]; 3 channels are RGB."""
        import numpy as np

        arr = np.asarray(val)
        if arr.ndim == 2:
            arr = arr[np.newaxis, :, :, np.newaxis]
        elif arr.ndim == 3:
            arr = arr[np.newaxis]
        if arr.ndim != 4 or arr.shape[-1] not in (1, 3, 4):
            raise ValueError(f"put_image({name!r}): expected an HW, HWC or NHWC array with 1, 3 or 4 channels, got shape {np.shape(val)}")
        if self._hook is None:
            return
        self._hook.process_image(trainer=self._trainer, name=name, val=arr)
        if self._want_summary:
            from trainbus.utils.image import image_summary

            self._hook.process_summary(trainer=self._trainer, summary=image_summary(name, arr))

    def put_summary(self, summary: Any) -> None:
        """Put a ``tf.compat.v1.Summary`` (a serialized one is accepted too); its simple values
        are also put as scalars, without tower prefixes or ``-summary`` suffixes."""
        from trainbus.utils import lazytf as _tf

        tf1 = _tf.tf1()
        if isinstance(summary, bytes):
            summary = tf1.Summary.FromString(summary)
        for v in summary.value:
            if v.WhichOneof("value") == "simple_value":
                tag = _TOWER_PREFIX.sub("", v.tag)
                if tag.endswith("-summary"):
                    tag = tag[: -len("-summary")]
                v.tag = tag
                self._history.setdefault(tag, []).append((self._step(), float(v.simple_value)))
                if self._hook is not None:
                    self._hook.process_scalar(trainer=self._trainer, name=tag, val=float(v.simple_value))
        if self._hook is not None:
            self._hook.process_summary(trainer=self._trainer, summary=summary)

    def put_event(self, evt: Any) -> None:
        """Put a ``tf.compat.v1.Event``; its ``step`` and ``wall_time`` are filled in here."""
        evt.step = self._step()
        evt.wall_time = time.time()
        if self._hook is not None:
            self._hook.process_event(trainer=self._trainer, evt=evt)

    def __str__(self) -> str:
        return "Monitors"


#: monitor backends that tensorpack's ``callbacks.monitor`` holds; here they come from plugins
_PLUGIN_MONITORS = ("TFEventWriter", "JSONWriter", "ScalarPrinter", "SendMonitorData", "CometMLMonitor")


def __getattr__(name: str) -> Any:
    if name in _PLUGIN_MONITORS:
        from trainbus.bus import registry as _registry

        value = _registry.resolve(__name__, name, ("trainbus.callbacks",))
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _to_python_number(name: str, val: Any) -> Any:
    if isinstance(val, bool):
        return int(val)
    if isinstance(val, (int, float)):
        return val
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    if np is not None:
        if isinstance(val, np.integer):
            return int(val)
        if isinstance(val, np.floating):
            return float(val)
        if isinstance(val, np.ndarray) and val.size == 1:
            return val.item()
    raise TypeError(f"put_scalar({name!r}): the value must be a number, got {val!r} of type {type(val).__name__}")
