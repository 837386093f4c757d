"""Helpers for testing trainbus plugins and callbacks (import ``trainbus.testing``).

* :class:`TinyModel` / :func:`tiny_dataflow` / :func:`train_tiny`: a real (small) training run;
* :func:`points_dataflow` / :func:`batch_dataflow` / :func:`generator_dataflow` /
  :func:`forever_dataflow`: dataflows of given datapoints, arrays or generators, from the core alone;
* :class:`HookRecorder`: a callback that records every hook it receives, in order;
* :class:`RecordingMonitor`: a monitor that keeps everything it receives;
* :func:`check_distribution`: the conformance check of a plugin distribution.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import numpy as np

from trainbus.callbacks.base import Callback
from trainbus.callbacks.monitor import MonitorBase
from trainbus.exceptions import PluginLoadError

__all__ = ["TinyModel", "tiny_dataflow", "points_dataflow", "batch_dataflow", "generator_dataflow",
           "forever_dataflow", "train_tiny", "HookRecorder", "RecordingMonitor", "check_distribution",
           "DistributionCheckError"]


def generator_dataflow(make: Callable[[], Iterable[Any]], size: int | None = None) -> Any:
    """A dataflow whose every pass iterates ``make()``; ``len()`` is ``size`` (without it: no
    length, ``NotImplementedError``). The core's ``DataFlow`` alone: what ``DataFromGenerator``
    gives, without ``trainbus-dataflow``."""
    from trainbus.dataflow import DataFlow

    class Generated(DataFlow):
        def __len__(self) -> int:
            if size is None:
                return super().__len__()
            return size

        def __iter__(self) -> Any:
            yield from make()

    return Generated()


def points_dataflow(points: Sequence[Any]) -> Any:
    """A dataflow of these datapoints, in order, the same every pass (what
    ``DataFromList(points, shuffle=False)`` gives, without ``trainbus-dataflow``)."""
    points = list(points)
    return generator_dataflow(lambda: iter(points), len(points))


def forever_dataflow(df: Any) -> Any:
    """``df`` pass after pass without end (what ``RepeatedData(df, -1)`` gives, without
    ``trainbus-dataflow``)."""
    import itertools

    return generator_dataflow(lambda: itertools.chain.from_iterable(itertools.repeat(df)))


def batch_dataflow(arrays: Sequence[Any], batch: int, remainder: bool = False) -> Any:
    """A dataflow of batches ``[a[k:k + batch] for a in arrays]`` (fresh copies each pass), in
    order, the same every pass; ``remainder`` keeps a last, smaller batch (the core's
    ``DataFlow`` alone: what ``BatchData(DataFromList(...), batch)`` gives, without
    ``trainbus-dataflow``)."""
    from trainbus.dataflow import DataFlow

    arrays = [np.asarray(a) for a in arrays]
    n = len(arrays[0])
    if any(len(a) != n for a in arrays):
        raise ValueError(f"batch_dataflow: the arrays have different lengths {[len(a) for a in arrays]}")
    starts = range(0, n - (0 if remainder else batch - 1), batch)

    class Batches(DataFlow):
        def __len__(self) -> int:
            return len(starts)

        def __iter__(self) -> Any:
            for k in starts:
                yield [a[k:k + batch].copy() for a in arrays]

    return Batches()


def tiny_dataflow(n: int = 32, batch: int = 4, dim: int = 4, classes: int = 3, seed: int = 0) -> Any:
    """A deterministic dataflow of ``n // batch`` batches ``[x (batch, dim) float32, y (batch,) int32]``,
    the same every pass. Made from the core's ``DataFlow`` alone, so a plugin's tests need no
    other distribution for it."""
    rng = np.random.RandomState(seed)
    xs = rng.rand(n, dim).astype("float32")
    ys = (xs.sum(axis=1) * classes / dim).astype("int32").clip(0, classes - 1)
    return batch_dataflow([xs, ys], batch)


def _tiny_model_class() -> type:
    import tensorflow as tf

    from trainbus.tfutils.summary_min import add_scalar_summary_if_available
    from trainbus.train.model_desc import ModelDesc

    tf1 = tf.compat.v1

    class TinyModel(ModelDesc):
        """Softmax regression ``x (None, dim) -> classes``; names: ``x``, ``y``, ``logits``,
        ``cost``, ``wrong`` (per-sample 0/1 error), ``accuracy``; variable ``W``, ``b``."""

        def __init__(self, dim: int = 4, classes: int = 3, lr: float = 0.1) -> None:
            self.dim, self.classes, self.lr = dim, classes, lr

        def inputs(self) -> list:
            return [tf.TensorSpec([None, self.dim], tf.float32, "x"), tf.TensorSpec([None], tf.int32, "y")]

        def build_graph(self, x: Any, y: Any) -> Any:
            w = tf1.get_variable("W", [self.dim, self.classes], initializer=tf1.zeros_initializer())
            b = tf1.get_variable("b", [self.classes], initializer=tf1.zeros_initializer())
            logits = tf.identity(tf.matmul(x, w) + b, name="logits")
            cost = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits), name="cost")
            wrong = tf.cast(tf.not_equal(tf.argmax(logits, 1, output_type=tf.int32), y), tf.float32, name="wrong")
            tf.reduce_mean(1.0 - wrong, name="accuracy")
            add_scalar_summary_if_available(cost)
            return cost

        def optimizer(self) -> Any:
            lr = tf1.get_variable("learning_rate", initializer=float(self.lr), trainable=False)
            return tf1.train.GradientDescentOptimizer(lr)

    return TinyModel


def __getattr__(name: str) -> Any:
    if name == "TinyModel":
        cls = _tiny_model_class()
        globals()["TinyModel"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def train_tiny(callbacks: Sequence[Callback] = (), monitors: Sequence[MonitorBase] = (), max_epoch: int = 2,
               steps_per_epoch: int | None = None, trainer: Any = None, extra_callbacks: Sequence[Callback] = (),
               model: Any = None, dataflow: Any = None, session_init: Any = None, starting_epoch: int = 1,
               feed: bool = True) -> Any:
    """Train :class:`TinyModel` for real with these callbacks/monitors; returns the trainer.

    ``feed=True`` uses ``FeedInput`` (deterministic order), else ``QueueInput``.
    """
    from trainbus.input_source import FeedInput, QueueInput
    from trainbus.train.config import TrainConfig
    from trainbus.train.interface import launch_train_with_config

    if trainer is None:
        from trainbus.train.simple import SimpleTrainer

        trainer = SimpleTrainer()
    ds = dataflow if dataflow is not None else tiny_dataflow()
    cfg = TrainConfig(model=model if model is not None else globals()["__getattr__"]("TinyModel")(),
                      data=FeedInput(ds) if feed else QueueInput(ds), callbacks=list(callbacks),
                      extra_callbacks=list(extra_callbacks), monitors=list(monitors), max_epoch=max_epoch,
                      steps_per_epoch=steps_per_epoch, session_init=session_init, starting_epoch=starting_epoch)
    launch_train_with_config(cfg, trainer)
    return trainer


class HookRecorder(Callback):
    """Records ``(hook, epoch_num, global_step, local_step)`` for every hook, into
    ``self.events`` (and into a shared list ``sink`` if given, tagged with ``tag``)."""

    def __init__(self, tag: str = "rec", sink: list | None = None, fetch: Any = None) -> None:
        self.tag = tag
        self.events: list[tuple] = []
        self.sink = sink
        self._fetch = fetch

    def _rec(self, hook: str) -> None:
        tr = getattr(self, "trainer", None)
        ev = (hook, tr.epoch_num, tr.global_step, tr.local_step) if tr is not None else (hook, None, None, None)
        self.events.append(ev)
        if self.sink is not None:
            self.sink.append((self.tag,) + ev)

    def hooks(self) -> list[str]:
        """Only the hook names, in order."""
        return [e[0] for e in self.events]

    def _setup_graph(self) -> None:
        self._rec("setup_graph")

    def _before_train(self) -> None:
        self._rec("before_train")

    def _before_epoch(self) -> None:
        self._rec("before_epoch")

    def _before_run(self, ctx: Any) -> Any:
        self._rec("before_run")
        return self._fetch

    def _after_run(self, ctx: Any, values: Any) -> None:
        self._rec("after_run")
        self.last_values = values

    def _trigger_step(self) -> None:
        self._rec("trigger_step")

    def _after_epoch(self) -> None:
        self._rec("after_epoch")

    def _trigger_epoch(self) -> None:
        self._rec("trigger_epoch")
        self.trigger()

    def _trigger(self) -> None:
        self._rec("trigger")

    def _after_train(self) -> None:
        self._rec("after_train")


class RecordingMonitor(MonitorBase):
    """A monitor that keeps everything it receives: ``scalars``, ``images``, ``summaries``, ``events``."""

    def __init__(self) -> None:
        self.scalars: list[tuple[str, Any, int]] = []
        self.images: list[tuple[str, Any]] = []
        self.summaries: list[Any] = []
        self.events: list[Any] = []

    def process_scalar(self, name: str, val: Any) -> None:
        self.scalars.append((name, val, self.trainer.global_step))

    def process_image(self, name: str, val: Any) -> None:
        self.images.append((name, val))

    def process_summary(self, summary: Any) -> None:
        self.summaries.append(summary)

    def process_event(self, evt: Any) -> None:
        self.events.append(evt)


# ---------------------------------------------------------------------------------------------
# conformance of a plugin distribution
# ---------------------------------------------------------------------------------------------

class DistributionCheckError(AssertionError):
    """``check_distribution`` found problems; the message lists every one of them."""

    def __init__(self, dist: str, problems: Sequence[str]) -> None:
        self.dist = dist
        self.problems = list(problems)
        listing = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"the plugin distribution {dist!r} does not conform ({len(self.problems)} problem(s)):\n{listing}")


def _package_all(module_name: str) -> tuple[str, list[str] | None]:
    """(top-level package, its ``__all__`` or None)."""
    import importlib

    top = module_name.split(".", 1)[0]
    mod = importlib.import_module(top)
    names = getattr(mod, "__all__", None)
    return top, (list(names) if names is not None else None)


def _core_public_names() -> set[str]:
    """Names the core itself exports from the facade modules (a plugin may not reuse them)."""
    import trainbus
    import trainbus.callbacks
    import trainbus.dataflow
    import trainbus.tfutils
    import trainbus.tfutils.sessinit
    import trainbus.train

    names: set[str] = set(getattr(trainbus, "_LAZY", {}))
    for mod in (trainbus.callbacks, trainbus.train, trainbus.tfutils, trainbus.tfutils.sessinit, trainbus.dataflow):
        # a facade's own names (``_CORE_ALL`` where ``__all__`` is computed and so includes the plugins')
        names |= set(getattr(mod, "_CORE_ALL", None) or mod.__dict__.get("__all__", ()))
        names |= set(getattr(mod, "_LAZY", {}))
    return names


def _check_module_entry(ep: Any, obj: Any, where: str) -> list[str]:
    """A module path (group ``trainbus.modules``) or a module exported by name
    (``imgaug = "pkg.imgaug"`` in ``trainbus.dataflow``)."""
    import inspect

    from trainbus.bus import modpaths as _modpaths

    if not inspect.ismodule(obj):
        return [f"{where}: {obj!r} is not a module; a module path names a module (\"pkg.sub\", no \":attr\")"]
    if ep.group == _modpaths.MODULE_GROUP:
        if not ep.name.startswith("trainbus."):
            return [f"{where}: the module path {ep.name!r} is outside trainbus; declare paths like "
                    "\"trainbus.dataflow.mything\""]
        return []
    if obj.__name__.rsplit(".", 1)[-1] != ep.name:
        return [f"{where}: the module is named {obj.__name__!r}; a module exported by name must be exported under "
                f"its own last name ({obj.__name__.rsplit('.', 1)[-1]!r})"]
    return []


def check_distribution(name: str, raise_on_error: bool = True) -> list[str]:
    """Check that the installed plugin distribution ``name`` is a well-formed trainbus plugin.

    Every problem is collected, then reported at once (``DistributionCheckError``, an
    ``AssertionError`` so that it reads well in a test). The checks:

    * the distribution is installed, declares entry points in a trainbus group, and declares a
      plugin API that this trainbus supports, readably (``[project.entry-points."trainbus.plugin_api"]
      "1" = "<its package>"``);
    * every entry point loads;
    * the object is named like its entry point, or the entry point is an alias its package
      exports in ``__all__`` next to the object's own name (``PrefetchData`` for ``MultiProcessRunner``);
    * ``trainbus.callbacks``: the object and is a ``Callback`` /
      ``MonitorBase`` subclass or a factory function; another class (a helper such as
      ``HyperParam``) is allowed only if the package lists it in ``__all__``;
      ``trainbus.train``: a ``Trainer`` subclass or a factory function (``SyncMultiGPUTrainer``); ``trainbus.tfutils.sessinit``: a ``SessionInit``
      subclass or a factory function; ``trainbus.plugins``: registers on a plugin manager and
      implements only known hooks; ``trainbus.modules`` (module paths such as
      ``"trainbus.dataflow.imgaug" = "pkg.imgaug"``): a module under a ``trainbus.`` path;
      a module exported by name (``imgaug = "pkg.imgaug"``) carries its own last name;
    * every exported name is in its package's ``__all__``;
    * no class overrides a public hook method (``before_run`` instead of ``_before_run``);
    * no name is also provided by another installed distribution, or by the core itself;
    * no module of the distribution (its installed ``.py`` files, read with ``ast``, not run)
      imports a private trainbus module (``trainbus.train._signals``, ``trainbus._defaults``,
      ``from trainbus.train import _signals``) or a private module of another trainbus
      distribution: each such import is reported with its file and line, and the
      ``trainbus.plugin_api`` name to import instead where there is one.

    :param name: the distribution name, e.g. ``"trainbus-saver"``.
    :param raise_on_error: raise ``DistributionCheckError`` on problems (default); with False,
        return the list of problems instead.
    :return: the list of problems (empty when the distribution conforms).

    Example (the conformance test of a plugin package)::

        from trainbus.testing import check_distribution

        def test_conformance():
            check_distribution("trainbus-mything")
    """
    import inspect

    import importlib_metadata as md

    from trainbus.bus import registry as _registry
    from trainbus.callbacks.base import PROTECTED, Callback

    problems: list[str] = []
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        from trainbus.bus.catalogue import BUNDLES, KNOWN_PROVIDERS

        first_party = {d for names in KNOWN_PROVIDERS.values() for d in names.values()}
        first_party |= {d for members in BUNDLES.values() for d in members}
        how = (_registry.install_hint(name) if name in first_party else
               f"pip install -e <its source directory>, or pip install --find-links <a directory of its wheels> {name}")
        problems.append(f"{name!r} is not installed in this environment; install it first: {how}")
        if raise_on_error:
            raise DistributionCheckError(name, problems) from None
        return problems
    dname = dist.metadata["Name"]
    from trainbus.bus import modpaths as _modpaths

    groups = (*_registry.NAME_GROUPS, _registry.PLUGIN_GROUP, _modpaths.MODULE_GROUP)
    eps = [ep for ep in dist.entry_points if ep.group in groups]
    if not eps:
        problems.append(f"it declares no entry point in any trainbus group ({', '.join(groups)}); "
                        "add [project.entry-points.\"trainbus.callbacks\"] Name = \"package:Name\" to its pyproject.toml")
    try:
        api = _registry.declared_api(dist)
    except PluginLoadError as e:
        problems.append(str(e))
    else:
        if api is None:
            problems.append(f"it does not declare the plugin API it is written for; add [project.entry-points."
                            f"\"{_registry.API_GROUP}\"] \"{_registry.PLUGIN_API_VERSION}\" = \"<its package>\" "
                            "to its pyproject.toml")
        elif not api.supports():
            problems.append(f"it declares plugin API {api.text}, but this trainbus implements plugin API "
                            f"{_registry.PLUGIN_API_VERSION}")
    core_names = _core_public_names()
    for ep in eps:
        where = f"entry point {ep.name} = {ep.value} [group {ep.group}]"
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 - reported
            problems.append(f"{where} does not load: {type(exc).__name__}: {exc}")
            continue
        if ep.group == _registry.PLUGIN_GROUP:
            problems += _check_ambient(obj, where)
            continue
        if ep.group == _modpaths.MODULE_GROUP or inspect.ismodule(obj):
            problems += _check_module_entry(ep, obj, where)
            continue
        is_class = inspect.isclass(obj)
        is_function = inspect.isfunction(obj) or inspect.isbuiltin(obj)
        # __all__
        try:
            top, all_names = _package_all(ep.module)
        except Exception as exc:  # noqa: BLE001
            top, all_names = ep.module.split(".")[0], None
            problems.append(f"{where}: its package {top!r} does not import: {exc}")
        if all_names is None:
            problems.append(f"{where}: the package {top!r} has no __all__; list every exported name in it")
        elif ep.name not in all_names:
            problems.append(f"{where}: {ep.name!r} is missing from {top}.__all__")
        # name == class/function name, or a deliberate alias (another name the package exports for it)
        obj_name = getattr(obj, "__name__", None)
        if obj_name != ep.name and not (all_names and ep.name in all_names and obj_name in all_names):
            problems.append(f"{where}: the object is named {obj_name!r}, not {ep.name!r}; entry-point names must be the "
                            "exact class (or factory function) name users write, or an alias the package exports "
                            "in __all__ next to that name")
        # base class per group
        if ep.group == "trainbus.callbacks":
            if is_class and not issubclass(obj, Callback):
                if all_names is None or ep.name not in all_names:
                    problems.append(f"{where}: {obj!r} is neither a Callback nor a MonitorBase subclass; a helper class "
                                    f"may be exported only if it is in {top}.__all__")
            elif not is_class and not is_function:
                problems.append(f"{where}: {obj!r} is neither a class nor a factory function")
        elif ep.group in ("trainbus.train", "trainbus.tfutils.sessinit"):
            base, label = _group_base(ep.group)
            if is_class and not issubclass(obj, base):
                problems.append(f"{where}: {obj!r} is not a subclass of {label} (a factory function is also allowed)")
            elif not is_class and not is_function:
                problems.append(f"{where}: {obj!r} is neither a {label.rsplit('.', 1)[1]} subclass nor a factory function")
        # public hook methods
        if is_class and issubclass(obj, Callback):
            for klass in obj.__mro__:
                if klass is Callback or not issubclass(klass, Callback):
                    continue
                bad = sorted(PROTECTED & vars(klass).keys())
                for hook in bad:
                    problems.append(f"{where}: {klass.__qualname__} overrides the public hook {hook}(); override "
                                    f"_{hook}() instead")
        # clashes
        if ep.name in core_names:
            problems.append(f"{where}: {ep.name!r} is already a name of the trainbus core; choose another name")
        for group in _registry.NAME_GROUPS:
            for other in _registry.index(group).get(ep.name, ()):
                other_dist = _registry._dist_name(other)
                if other_dist != dname:
                    problems.append(f"{where}: {ep.name!r} is also provided by {_registry.describe(other)}; "
                                    "rename one of them (users reach both as trainbus.<Name>)")
    problems += _private_imports(dist, {ep.module.split(".")[0] for ep in dist.entry_points})
    if problems and raise_on_error:
        raise DistributionCheckError(dname, problems)
    return problems


def _is_private(dotted: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in dotted.split("."))


def _distribution_sources(dist: Any, tops: set[str]) -> list[tuple[str, Any]]:
    """``(shown name, path)`` of the distribution's installed ``.py`` files: those its metadata
    lists (``RECORD``), and for an editable install (whose metadata lists no source) the files
    of the top-level packages its entry points name, found without importing them."""
    import importlib.util
    import pathlib

    out = []
    covered: set[str] = set()
    for f in dist.files or ():
        if f.suffix != ".py" or ".." in f.parts:
            continue
        path = pathlib.Path(dist.locate_file(f))
        if path.is_file():
            out.append((str(f), path))
            covered.add(f.parts[0] if len(f.parts) > 1 else f.stem)
    for top in sorted(tops - covered):
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        if spec is None or spec.origin is None:
            continue
        origin = pathlib.Path(spec.origin)
        if spec.submodule_search_locations:
            for base in spec.submodule_search_locations:
                base = pathlib.Path(base)
                out += [(str(pathlib.Path(top, *p.relative_to(base).parts)), p) for p in sorted(base.rglob("*.py"))]
        elif origin.suffix == ".py":
            out.append((origin.name, origin))
    return out


def _imported_modules(tree: Any) -> list[tuple[int, str, list[str]]]:
    """``(line, module, names)`` for every absolute import in ``tree`` (in functions too), and
    ``importlib.import_module("...")`` with a literal name; ``names`` are a from-import's names."""
    import ast

    out: list[tuple[int, str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.append((node.lineno, node.module, [a.name for a in node.names]))
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append((node.lineno, node.args[0].value, []))
    return out


def _replacement(module: str, names: list[str]) -> str:
    import trainbus.plugin_api as api

    public = [n for n in names if n in api.__all__]
    if public:
        return "import " + ", ".join(f"trainbus.plugin_api.{n}" for n in public) + " instead"
    if module.split(".")[0] == "trainbus":
        import importlib.util

        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return (f"there is no module {module} in this trainbus: import what the plugin needs from "
                    "trainbus.plugin_api or from a public trainbus module")
        # what the plugin API shares from that module (e.g. TrainingInterrupted from trainbus.train._signals)
        shared = [n for n in api.__all__ if getattr(getattr(api, n), "__module__", None) == module]
        if shared:
            return "use " + " / ".join(f"trainbus.plugin_api.{n}" for n in shared) + " instead"
    return ("trainbus.plugin_api has no replacement for it: keep what the plugin needs in its own package, or ask "
            "for it to become part of the plugin API")


def _private_imports(dist: Any, tops: set[str]) -> list[str]:
    """The imports of private trainbus modules (or of another trainbus distribution's private
    modules) in the distribution's installed sources."""
    import ast

    problems = []
    for shown, path in _distribution_sources(dist, tops):
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except (SyntaxError, ValueError) as exc:
            problems.append(f"{shown}: cannot be read to check its imports: {type(exc).__name__}: {exc}")
            continue
        own = shown.replace("\\", "/").split("/")[0].removesuffix(".py")
        for line, module, names in _imported_modules(tree):
            top = module.split(".")[0]
            if top == own or not (top == "trainbus" or top.startswith("trainbus_")):
                continue
            # ``from trainbus.train import _signals`` imports a private module too
            privates = [module] if _is_private(module) else [f"{module}.{n}" for n in names if _is_private(n)]
            for private in privates:
                what = "a private trainbus module" if top == "trainbus" else f"a private module of {top}"
                inner = [] if private != module else names
                problems.append(f"{shown}:{line}: imports {what}, {private} (private modules are not covered by the "
                                f"plugin API version and may change in any release); {_replacement(private, inner)}")
    return problems


def _check_ambient(obj: Any, where: str) -> list[str]:
    """An ambient plugin (group ``trainbus.plugins``) must register and implement known hooks."""
    from trainbus.bus.manager import TrainbusPluginManager

    pm = TrainbusPluginManager()
    try:
        pm.register(obj() if isinstance(obj, type) else obj, name="conformance-check")
        pm.check_pending()
    except Exception as exc:  # noqa: BLE001 - reported
        return [f"{where}: it does not register as a trainbus plugin: {type(exc).__name__}: {exc}"]
    if not pm.get_hookcallers(pm.get_plugin("conformance-check")):
        return [f"{where}: it implements no trainbus hook (mark hook functions with @trainbus.hookimpl)"]
    return []


def _group_base(group: str) -> tuple[type, str]:
    """The base class every class exported in ``group`` must derive from, and its public path."""
    if group == "trainbus.train":
        from trainbus.train.base import Trainer

        return Trainer, "trainbus.train.Trainer"
    from trainbus.tfutils.sessinit import SessionInit

    return SessionInit, "trainbus.tfutils.sessinit.SessionInit"
