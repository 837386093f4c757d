"""The checked plan of a run file: described (``--dry-run``), built and trained; the entry
points :func:`load_run_file` and :func:`train_from_file`."""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Any, Iterator, Sequence

from trainbus.runfile.check import (Component, _build_collect, _Checker, _clean_of, _import_path,
                                    _state_key_problems)
from trainbus.runfile.scan import Problem, RunConfigError, _line_order, read_run_file

__all__ = ["RunPlan", "FinishedRun", "load_run_file", "train_from_file"]

@dataclasses.dataclass
class RunPlan:
    """A checked run file: every component resolved, nothing built or started yet."""

    model: Component | None
    data: Component | None
    trainer: Component | None
    session_init: Component | None
    callbacks: list[Component]
    monitors: list[Component] | None  # None: DEFAULT_MONITORS()
    loop: dict[str, Any]
    filename: str = "<run file>"
    loop_lines: dict[str, int] = dataclasses.field(default_factory=dict)  # [train] key -> its line

    def components(self) -> Iterator[Component]:
        for c in (self.model, self.data, self.trainer, self.session_init, *self.callbacks, *(self.monitors or [])):
            if c is not None:
                yield c

    def _build_all(self, comps: list[Component]) -> list[Any]:
        """Build components, collecting every construction error (with its line) before raising."""
        built, problems = _build_collect(comps)
        if problems:
            raise RunConfigError(self.filename, problems)
        return built

    def construction_problems(self, skip: list[Problem] = ()) -> list[Problem]:
        """Build the callbacks, monitors, session initializer and model as the run would, in
        a throwaway log directory, and return what their constructors reject (wrong types,
        values out of range, unsorted schedules ...). Components under a place that already
        has a problem in ``skip`` are not built. Neither the data nor the trainer is built:
        they may be expensive or start services."""
        clean = _clean_of(skip)
        cbs = [c for c in (*self.callbacks, *(self.monitors or [])) if clean(c)]
        comps = [*cbs, *[c for c in (self.session_init, self.model) if c is not None and clean(c)]]
        with _quiet_plugin_log(), _stand_in_logdir(True):
            built, problems = _build_collect(comps)
            extra = _default_callbacks_of(self.loop)
        pairs = [*zip(cbs, built), *((None, cb) for cb in extra)]
        return problems + _state_key_problems(pairs) + _saver_problems(pairs, self.loop, [*skip, *problems])

    def build_callbacks(self) -> tuple[list[Any], list[Any], list[Any] | None]:
        """(callbacks, extra_callbacks, monitors or None for the defaults), constructed."""
        monitors_c = self.monitors or []
        built = self._build_all([*self.callbacks, *monitors_c])
        callbacks = built[:len(self.callbacks)]
        monitors = built[len(self.callbacks):] if self.monitors is not None else None
        return callbacks, _default_callbacks_of(self.loop), monitors

    def describe(self, callbacks: list[Any] | None = None, extra: list[Any] | None = None,
                 monitors: list[Any] | None = None) -> str:
        """The resolved plan: each component, who provides it, the loop options and (when the
        callbacks are given) the callback order per hook."""
        from trainbus.bus.order import describe_order

        rows: list[tuple[str, str, str]] = []
        if self.model:
            rows.append(("model", self.model.describe(), self.model.provider))
        if self.data:
            rows.append(("data", self.data.describe(), self.data.provider + "; not called in a dry run"))
        if self.trainer:
            rows.append(("trainer", self.trainer.describe(), self.trainer.provider))
        if self.session_init:
            rows.append(("session_init", self.session_init.describe(), self.session_init.provider))
        else:
            rows.append(("session_init", "JustCurrentSession()", "default"))
        for c in self.callbacks:
            rows.append((c.label, c.describe(), c.provider))
        if extra:
            for i, cb in enumerate(extra):
                name = type(cb).__name__
                rows.append((f"extra_callbacks[{i}]", f"{name}()", _provider_of_instance(cb) + "; DEFAULT_CALLBACKS"))
        elif not self.loop.get("default_callbacks", True):
            rows.append(("extra_callbacks", "(none: default_callbacks = false)", ""))
        if self.monitors is None:
            for i, m in enumerate(monitors or []):
                rows.append((f"monitors[{i}]", f"{type(m).__name__}()",
                             _provider_of_instance(m) + "; DEFAULT_MONITORS"))
        else:
            for c in self.monitors:
                rows.append((c.label, c.describe(), c.provider))
        w1 = max(len(r[0]) for r in rows)
        w2 = min(max(len(r[1]) for r in rows), 60)
        lines = [f"run plan of {self.filename}"]
        lines += [f"  {a:<{w1}}  {b:<{w2}}  {c}".rstrip() for a, b, c in rows]
        loop = {k: self.loop.get(k) for k in ("steps_per_epoch", "starting_epoch", "max_epoch")}
        loop["steps_per_epoch"] = loop["steps_per_epoch"] or "(size of the data)"
        loop["starting_epoch"] = loop["starting_epoch"] or 1
        loop["max_epoch"] = loop["max_epoch"] or 99999
        lines.append(f"  {'loop':<{w1}}  " + " ".join(f"{k}={v}" for k, v in loop.items()))
        if self.loop.get("seed") is not None:
            lines.append(f"  {'seed':<{w1}}  {self.loop['seed']} (Python, NumPy, DataFlow RNGs, TensorFlow; op "
                         "determinism on)")
        if self.loop.get("logdir"):
            lines.append(f"  {'logdir':<{w1}}  {self.loop['logdir']}: {_logdir_fate(self.loop)}")
        if callbacks is not None:
            lines.append("")
            lines.append("callback order per hook:")
            order = describe_order([*callbacks, *(extra or [])], monitors or [])
            lines += ["  " + line for line in order.splitlines()]
        return "\n".join(lines)

    def dry_run(self) -> str:
        """Build the callbacks and monitors (not the model input, nothing trains) and describe the plan."""
        from trainbus.train.config import DEFAULT_MONITORS

        with _quiet_plugin_log(), _stand_in_logdir(bool(self.loop.get("logdir"))):
            callbacks, extra, monitors = self.build_callbacks()
            self._build_all([c for c in (self.trainer, self.session_init, self.model) if c is not None])
            return self.describe(callbacks, extra, monitors if monitors is not None else DEFAULT_MONITORS())

    def train(self, problems: list[Problem] | None = None) -> Any:
        """Build everything and check the run, reporting every problem at once (with lines),
        with ``problems`` (those the file's check found, if it was not raised); then train.
        Each component is built once. Nothing is deleted, moved or created in the log
        directory before every check passed: ``logdir_action`` is carried out when training
        starts. With ``resume`` (the default) and a log directory, the run continues from the
        newest checkpoint there (``AutoResumeTrainConfig``). Returns the trainer."""
        from trainbus.utils import logger

        problems = list(problems or [])
        prev_dir = logger.get_logger_dir()
        logdir = self.loop.get("logdir")
        # the INFO lines from here ("Argv: ...", the resume lines) are said once the run is known
        # to train: a run that already finished says only that, in one line
        with _held_info_lines() as held:
            if logdir and not any(p.where.startswith("train.logdir") for p in problems):
                # chosen now (constructors read it), acted on when training starts
                try:
                    if self.filename:
                        logger.protect_path(self.filename)  # action "d" never deletes the run file's directory
                    logger.set_logger_dir(logdir, action=self.loop.get("logdir_action"))
                except (OSError, ValueError) as e:
                    problems.append(Problem(self.loop_lines.get("logdir_action", self.loop_lines.get("logdir")),
                                            "train.logdir", f"{type(e).__name__}: {e}"))
            try:
                return self._check_and_train(problems, held)
            except _Finished as done:
                held.records = []
                logger._drop_pending()  # nothing happens on disk
                logger.LOG_DIR = prev_dir
                return done.run
            except RunConfigError:
                logger._drop_pending()  # nothing happened on disk; forget the chosen directory
                logger.LOG_DIR = prev_dir
                raise
            finally:
                held.replay()  # what was held, on any other way out (a no-op once replayed)

    def _check_and_train(self, problems: list[Problem], held: "_held_info_lines") -> Any:
        """The rest of :meth:`train`; ``held`` holds the INFO lines until it is known that the
        run trains (not a finished run): it is replayed then."""
        from trainbus.dataflow import is_dataflow
        from trainbus.input_source import InputSource
        from trainbus.train.config import AutoResumeTrainConfig, TrainConfig
        from trainbus.train.interface import launch_train_with_config
        from trainbus.train.model_desc import ModelDescBase
        from trainbus.train.tower import SingleCostTrainer
        from trainbus.utils import logger

        if (self.model is None or self.data is None or self.trainer is None) and not problems:
            raise RunConfigError(self.filename, [Problem(None, "(file)", "the plan has no model, data or trainer")])
        n_cb = len(self.callbacks)
        monitors_c = self.monitors or []
        comps = [*self.callbacks, *monitors_c, self.trainer, self.model, self.session_init]
        # a component under a place that already has a problem is not built (its error would
        # only repeat that problem)
        clean = _clean_of(problems)
        built, build_problems = _build_collect([c if c is not None and clean(c) else None for c in comps])
        problems += build_problems
        extra = _default_callbacks_of(self.loop)
        pairs = [*zip([*self.callbacks, *monitors_c], built), *((None, cb) for cb in extra)]
        problems += _state_key_problems(pairs) + _saver_problems(pairs, self.loop, problems)
        callbacks, monitors = built[:n_cb], (built[n_cb:n_cb + len(monitors_c)] if self.monitors is not None else None)
        trainer, model, sessinit = built[n_cb + len(monitors_c):]
        if model is not None and not isinstance(model, ModelDescBase):
            problems.append(Problem(self.model.line, "model", f"{self.model.name} built {model!r}, which is not a "
                                                              "ModelDesc; name a ModelDesc subclass"))
        if trainer is not None and not isinstance(trainer, SingleCostTrainer):
            problems.append(Problem(self.trainer.line, "trainer", f"{self.trainer.name} is not a single-cost trainer; "
                                                                  "a run file needs one such as SimpleTrainer"))
        if problems:  # the data may be expensive to make: only once everything else is right
            raise RunConfigError(self.filename, sorted(problems, key=_line_order))
        data = self._build_all([self.data])[0]
        if not (is_dataflow(data) or isinstance(data, InputSource)):
            raise RunConfigError(self.filename, [Problem(self.data.line, "data", f"{self.data.describe()} returned "
                                                 f"{data!r}; it must return a DataFlow or an InputSource")])
        max_epoch = self.loop.get("max_epoch", 99999)
        kw = dict(model=model, callbacks=callbacks, extra_callbacks=extra, monitors=monitors,
                  starting_epoch=self.loop.get("starting_epoch", 1),
                  steps_per_epoch=self.loop.get("steps_per_epoch"), max_epoch=max_epoch, seed=self.loop.get("seed"))
        kw["data" if isinstance(data, InputSource) else "dataflow"] = data
        if sessinit is not None:
            kw["session_init"] = sessinit
        resume = bool(self.loop.get("logdir")) and self.loop.get("resume", True)
        try:
            if resume:
                ckpt_dir = _checkpoint_dir_of(callbacks, logger.get_logger_dir())
                # resumed past max_epoch: a finished run (told apart from a file whose own
                # starting_epoch is past max_epoch, which the file's check reports)
                config = AutoResumeTrainConfig(always_resume=True, checkpoint_dir=ckpt_dir,
                                               **{**kw, "max_epoch": max(max_epoch, _FAR)})
                if config.starting_epoch > max_epoch:
                    raise _Finished(FinishedRun(self.filename, logger.get_logger_dir(), config.starting_epoch - 1,
                                                max_epoch))
                held.replay()
                config.max_epoch = max_epoch
            else:
                held.replay()
                config = TrainConfig(**kw)
        except (TypeError, ValueError) as e:
            from trainbus.checkpoint import DamagedCheckpointError
            from trainbus.utils.stats import CorruptStatsError

            if resume and isinstance(e, (DamagedCheckpointError, CorruptStatsError)):
                # nothing of the log directory can be resumed from: say so, and how to start over
                problem = Problem(self.loop_lines.get("logdir"), "train.logdir",
                                  f"cannot resume from the log directory: {e} (or set resume = false, or "
                                  "logdir_action = \"b\" to start over with the old content backed up)")
            else:
                problem = Problem(None, "train", str(e))
            raise RunConfigError(self.filename, [problem]) from e
        launch_train_with_config(config, trainer)
        return trainer


def _logdir_fate(loop: dict[str, Any]) -> str:
    """What the real run will do with its log directory, as it is now."""
    import sys

    from trainbus.utils.stats import CorruptStatsError, load_existing_epoch_number

    logdir = loop["logdir"]
    action = loop.get("logdir_action")
    if not os.path.isdir(logdir):
        return "does not exist; created when training starts"
    if not any(not n.startswith(".") for n in os.listdir(logdir)):
        return "empty; used as it is"
    if action in ("d", "b"):
        verb = "deleted" if action == "d" else "moved to a time-stamped backup beside it"
        return f"not empty; its content is {verb} when training starts (logdir_action = \"{action}\"), then the run " \
               "starts from epoch 1"
    if action == "n":
        return "not empty; the run writes into a new directory beside it (logdir_action = \"n\")"
    if action == "q":
        return "not empty; the run refuses to start (logdir_action = \"q\")"
    if action is None:
        if not (sys.stdin and sys.stdin.isatty()):
            return "not empty and no logdir_action: the run refuses to start"
        return "not empty and no logdir_action: the run asks what to do"
    if not loop.get("resume", True):
        return "not empty; kept (logdir_action = \"k\"), and the run starts over (resume = false)"
    try:
        last = load_existing_epoch_number(logdir)
    except CorruptStatsError:
        last = None
    max_epoch = loop.get("max_epoch", 99999)
    if last is not None and last >= max_epoch:
        return (f"not empty; kept (logdir_action = \"k\"): the run there already reached max_epoch = {max_epoch} "
                f"(epoch {last}), so training does nothing; raise max_epoch to go on")
    where = f"after epoch {last}" if last is not None else "from its newest checkpoint"
    return f"not empty; kept (logdir_action = \"k\"): the run resumes {where}"


class _held_info_lines:
    """Hold back the trainbus logger's INFO lines (warnings pass) until :meth:`replay`; lines
    not replayed are dropped."""

    def __enter__(self) -> "_held_info_lines":
        import logging

        self.log = logging.getLogger("trainbus")
        self.records: list[Any] = []

        def hold(record: Any) -> bool:
            if record.levelno <= logging.INFO:
                self.records.append(record)
                return False
            return True

        self.filter = hold
        self.log.addFilter(hold)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.log.removeFilter(self.filter)

    def replay(self) -> None:
        """Stop holding and say what was held, in order."""
        self.log.removeFilter(self.filter)
        for record in self.records:
            self.log.handle(record)
        self.records = []


_FAR = 2 ** 31 - 1  # a max_epoch no resumed run is past


@dataclasses.dataclass
class FinishedRun:
    """What ``train_from_file`` returns for a run whose log directory shows it already reached
    ``max_epoch``: nothing was trained or changed."""

    filename: str
    logdir: str | None
    last_epoch: int
    max_epoch: int

    def message(self) -> str:
        from trainbus.train.summary import finished_message

        how = f"trainbus train {self.filename} --set train.max_epoch={self.last_epoch + self.max_epoch}"
        return finished_message(self.logdir, self.last_epoch, self.max_epoch, how)


class _Finished(Exception):
    def __init__(self, run: FinishedRun) -> None:
        super().__init__(run.message())
        self.run = run


def _inside(cb: Any) -> Iterator[Any]:
    """A callback and those it wraps (``PeriodicTrigger``, ``EnableCallbackIf``: ``.cb``)."""
    seen = 0
    while cb is not None and seen < 16:
        yield cb
        inner = getattr(cb, "cb", None)
        cb = inner if inner is not cb else None
        seen += 1


def _saver_problems(pairs: list[tuple[Component | None, Any]], loop: dict[str, Any],
                    known: list[Problem] = ()) -> list[Problem]:
    """Checkpoint callbacks that would fail when training starts: one that writes or copies
    checkpoints into the log directory while the run file sets none, and one that copies the
    checkpoints of a writer (``MinSaver``/``MaxSaver`` copy ``ModelSaver``'s) placed before any
    writer of its directory. Writers are found by the ``CheckpointWriter`` protocol (a
    ``checkpoint_dir`` and ``latest()``), copiers by a ``checkpoint_dir`` and a ``monitor_stat``.
    The order is not judged while an entry of the lists has a problem of its own (``known``): a
    writer missing for that reason would only be reported twice."""
    from trainbus.checkpoint import CheckpointWriter

    problems: list[Problem] = []
    writer_dirs: list[str] = []
    lists_broken = any(p.where.startswith(("callbacks", "monitors")) for p in known)
    for i, (comp, obj) in enumerate(pairs):
        if comp is None or obj is None:
            continue
        for x in _inside(obj):
            if not hasattr(x, "checkpoint_dir"):
                continue
            is_writer = isinstance(x, CheckpointWriter)
            is_copier = not is_writer and hasattr(x, "monitor_stat")
            if not (is_writer or is_copier):
                continue
            given = _given_dir(comp, x)
            if not loop.get("logdir") and not given:
                problems.append(Problem(comp.line, comp.label, f"{type(x).__name__} writes checkpoints into the log "
                                        "directory, but the run file sets none: add logdir = \"train_log/<name>\" to "
                                        "[train], or give checkpoint_dir in its args"))
                continue
            d = os.path.realpath(x.checkpoint_dir) if getattr(x, "checkpoint_dir", None) else None
            if is_writer:
                if d:
                    writer_dirs.append(d)
            elif d and d not in writer_dirs and not lists_broken:
                later = [c for c, o in pairs[i + 1:]
                         if c is not None and o is not None and any(isinstance(y, CheckpointWriter) for y in _inside(o))]
                fix = (f"move this entry after {later[0].label} (line {later[0].line})" if later
                       else "add a ModelSaver entry before it")
                problems.append(Problem(comp.line, comp.label, f"{comp.describe()} copies the checkpoints a ModelSaver "
                                        "writes, but no ModelSaver writing into the same directory comes before it "
                                        f"(callbacks are called in their order): {fix}"))
    return problems


def _given_dir(comp: Component, obj: Any) -> bool:
    """Whether the entry gives the callback its own checkpoint directory."""
    if obj is not None and getattr(obj, "_given_dir", None):
        return True
    args = comp.args
    return bool(args.get("checkpoint_dir")) or any(
        isinstance(v, Component) and v.args.get("checkpoint_dir") for v in args.values())


def _default_callbacks_of(loop: dict[str, Any]) -> list[Any]:
    """``DEFAULT_CALLBACKS()`` unless the run file says ``default_callbacks = false``."""
    from trainbus.train.config import DEFAULT_CALLBACKS

    return DEFAULT_CALLBACKS() if loop.get("default_callbacks", True) else []


def _checkpoint_dir_of(callbacks: list[Any], logdir: str | None) -> str | None:
    """Where the run's checkpoints are: the directory of its first checkpoint writer (``ModelSaver``) when that is
    not the log directory (None: the log directory)."""
    from trainbus.checkpoint import CheckpointWriter

    for cb in callbacks:
        if isinstance(cb, CheckpointWriter) and getattr(cb, "checkpoint_dir", None):
            d = os.path.abspath(cb.checkpoint_dir)
            return None if logdir and d == os.path.abspath(logdir) else d
    return None


def _provider_of_instance(obj: Any) -> str:
    """The distribution that defines the class of ``obj`` (``"trainbus-summary 0.1.0"``)."""
    from trainbus.bus.registry import provider_of

    return provider_of(type(obj).__module__) or f"module {type(obj).__module__}"


class _stand_in_logdir:
    """In a dry run, let constructors that read the log directory see a throwaway one, so the
    plan is built as the run would build it, without creating the run's directory."""

    def __init__(self, active: bool) -> None:
        self.active = active

    def __enter__(self) -> None:
        import tempfile

        from trainbus.utils import logger

        self.prev = logger.LOG_DIR
        if self.active:
            self.tmp = tempfile.TemporaryDirectory(prefix="trainbus-dry-run-")
            logger.LOG_DIR = self.tmp.name

    def __exit__(self, *exc: Any) -> None:
        from trainbus.utils import logger

        if self.active:
            logger.LOG_DIR = self.prev
            self.tmp.cleanup()


class _quiet_plugin_log:
    """Silence the "loaded plugin ..." info lines while a plan is printed."""

    def __enter__(self) -> None:
        import logging

        self.log = logging.getLogger("trainbus.plugins")
        self.level = self.log.level
        self.log.setLevel(logging.WARNING)

    def __exit__(self, *exc: Any) -> None:
        self.log.setLevel(self.level)


def load_run_file(path: str | os.PathLike, overrides: Sequence[str] = ()) -> RunPlan:
    """Read and check a run file (with ``overrides``: ``"PATH=VALUE"`` texts as ``--set`` takes
    them, see :mod:`trainbus.runfile.overrides`); every problem is reported at once
    (:class:`RunConfigError`), including what the constructors of its callbacks, monitors,
    session initializer and model reject (they are built in a throwaway log directory, then
    dropped)."""
    with _marking_overrides() as applied:
        plan, problems = _check_file(path, overrides, applied)
        p = pathlib.Path(path)
        # what the constructors reject belongs to the same report (one pass, not one per fix)
        with _import_path(p.resolve().parent):
            problems += plan.construction_problems(skip=problems)
        if problems:
            raise RunConfigError(plan.filename, sorted(problems, key=_line_order))
    return plan


def _check_file(path: str | os.PathLike, overrides: Sequence[str] = (),
                applied: list[Any] | None = None) -> tuple[RunPlan, list[Problem]]:
    """The checked plan and the problems of the file's text (names, signatures, annotated
    types, loop options), ``overrides`` applied first; raises only when the file cannot be read
    or parsed, or an override cannot be applied."""
    from trainbus.runfile.overrides import apply_overrides

    doc, lines = read_run_file(path)
    if overrides:
        done = apply_overrides(doc, lines, overrides, str(path))
        if applied is not None:
            applied.extend(done)
    checker = _Checker(doc, lines, pathlib.Path(path).resolve().parent)
    plan = RunPlan(**checker.check(), filename=str(path))
    return plan, list(checker.problems)


class _marking_overrides:
    """Re-raise a :class:`RunConfigError` with each problem at a place a ``--set`` changed
    marked with that ``--set``."""

    def __enter__(self) -> list[Any]:
        self.applied: list[Any] = []
        return self.applied

    def __exit__(self, typ: Any, exc: Any, tb: Any) -> None:
        if isinstance(exc, RunConfigError) and self.applied:
            from trainbus.runfile.overrides import mark_override_problems

            raise RunConfigError(exc.filename, mark_override_problems(exc.problems, self.applied)) from None


def train_from_file(path: str | os.PathLike, dry_run: bool = False, overrides: Sequence[str] = ()) -> Any:
    """Check the run file (``overrides``: ``"PATH=VALUE"`` texts, as ``trainbus train --set``),
    then train (returns the trainer) or, with ``dry_run``, return the plan's description without
    training. Either way every mistake is reported at once; a real run builds each component
    once (with the run's log directory chosen, not acted on). A run whose log directory shows it
    already reached ``max_epoch`` trains nothing: the trainer is None and a line says how to go
    on (:class:`FinishedRun` is logged)."""
    if dry_run:
        return load_run_file(path, overrides).dry_run()
    with _marking_overrides() as applied:
        plan, problems = _check_file(path, overrides, applied)
        with _import_path(pathlib.Path(path).resolve().parent):
            return plan.train(problems)
