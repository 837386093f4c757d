"""The Trainer: builds nothing itself, runs the loop and fires the bus.

The per-step work goes through ``trainer.hooked_sess`` (:mod:`trainbus.session`): one
``Session.run`` per step. Strategies (multi-GPU, distributed, Horovod) build the graph in
subclasses and plug into the loop through the public seams ``agree_stop``/``confirm_stop``
(every process stops after the same step), ``after_session_init``, ``broadcast_variables``
and ``before_session_close``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
import time
import weakref
from typing import Any, Callable, Iterable, Iterator, Sequence

from trainbus import checkpoint as _ckpt
from trainbus._gcfreeze import freeze_tensorflow_objects
from trainbus.bus.dispatch import Bus, HookProfile, origin_of, profiling_requested
from trainbus.bus.manager import TrainbusPluginManager
from trainbus.callbacks.base import Callback, ensure_callback
from trainbus.callbacks.monitor import MonitorBase, Monitors
from trainbus.exceptions import StopTraining
from trainbus.session.hooked import HookedSession
from trainbus.train.resumable import ResumableTrainer
from trainbus.utils import lazytf as _tf
from trainbus.utils import logger
from trainbus.utils.timefmt import human_seconds

__all__ = ["Trainer", "StopTraining", "TrainLoop", "HookedSession", "Bus"]

log = logging.getLogger("trainbus.train")


#: makes TrainLoop.first_step_ready's hand-over of its waiters one step (steps may run in threads)
_FIRST_STEP_LOCK = threading.Lock()


class BesideSteps:
    """Work started when the first step is prepared, in its own thread (``TrainLoop.beside_steps``)."""

    def __init__(self, loop: TrainLoop, fn: Callable[[], None], name: str) -> None:
        self._fn, self._name = fn, name
        self._pending = True
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        loop.on_first_step_ready(self._start)

    def _start(self) -> None:
        if self._pending:
            self._pending = False
            self._thread = threading.Thread(target=self._run, daemon=True, name=self._name)
            self._thread.start()

    def _run(self) -> None:
        try:
            self._fn()
        except BaseException as e:  # noqa: BLE001 - returned by wait(), in the training's thread
            self._error = e

    def wait(self) -> BaseException | None:
        """Wait for the work (run it now if no step was prepared); what it raised, once, or None.
        Run now, in the training's thread, an interrupt or exit request is not caught."""
        if self._pending:
            self._pending = False
            try:
                self._fn()
            except Exception as e:  # noqa: BLE001 - returned to the caller, which reports it
                self._error = e
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()
        error, self._error = self._error, None
        return error


class TrainLoop:
    """Counters of the running loop (``trainer.loop``): anyone reads them; the trainer advances
    them (``epochs()``, ``steps()``), and its hooked session counts each step
    (``advance_step()``)."""

    def __init__(self) -> None:
        self._epoch_num = 0
        self._global_step = 0
        self._local_step = -1
        self.steps_per_epoch = 0
        self.starting_epoch = 1
        self.max_epoch = 0
        self._first_step_waiters: list[Callable[[], None]] | None = []

    def on_first_step_ready(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` once, in the training's thread, when the first step's TensorFlow work is
        prepared and about to run (its callable made by ``trainer.hooked_sess``): the moment to
        start background work that should overlap the steps rather than delay the first one
        (``TFEventWriter`` starts writing the graph then). Never called if no step is prepared
        (training ends before, or a ``run_step`` that does not go through ``hooked_sess``); called
        at once if that moment has passed."""
        with _FIRST_STEP_LOCK:
            waiters = self._first_step_waiters
            if waiters is not None:
                waiters.append(fn)
                return
        fn()

    def first_step_ready(self) -> None:
        """Called by the hooked session when it has prepared a step (the first call counts, also
        when several threads run steps)."""
        with _FIRST_STEP_LOCK:
            waiters, self._first_step_waiters = self._first_step_waiters, None
        for fn in waiters or ():
            fn()

    def beside_steps(self, fn: Callable[[], None], name: str) -> BesideSteps:
        """Run ``fn()`` in a thread named ``name``, started when the first step is prepared
        (:meth:`on_first_step_ready`), so that it overlaps the steps instead of delaying the
        first one: for writing files of the finalized graph (``TFEventWriter``'s graph,
        ``ModelSaver``'s ``graph-*.meta``). The returned object's ``wait()`` waits for it, runs
        ``fn()`` there and then if no step was prepared, and returns what it raised (or None),
        for the caller to report in the training's thread."""
        return BesideSteps(self, fn, name)

    @property
    def epoch_num(self) -> int:
        """The current epoch (``starting_epoch - 1`` before the first)."""
        return self._epoch_num

    @property
    def global_step(self) -> int:
        """Steps run so far, restored ones included."""
        return self._global_step

    @property
    def local_step(self) -> int:
        """Steps finished in the current epoch, counting from 0 (``-1`` before the first)."""
        return self._local_step

    def config(self, steps_per_epoch: int, starting_epoch: int, max_epoch: int) -> None:
        for label, v in (("steps_per_epoch", steps_per_epoch), ("starting_epoch", starting_epoch), ("max_epoch", max_epoch)):
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if label == "starting_epoch" else 1):
                raise ValueError(f"{label} must be a positive integer, got {v!r}")
        self.steps_per_epoch = int(steps_per_epoch)
        self.starting_epoch = int(starting_epoch)
        self.max_epoch = int(max_epoch)
        self._epoch_num = self.starting_epoch - 1

    def set_global_step(self, step: int) -> None:
        """Set the step count (to the ``global_step`` variable's value, when resuming)."""
        self._global_step = int(step)

    def advance_step(self) -> None:
        """Count one more step run."""
        self._global_step += 1

    def epochs(self) -> Iterator[int]:
        """Each epoch from ``starting_epoch`` to ``max_epoch``, ``epoch_num`` set to it."""
        for self._epoch_num in range(self.starting_epoch, self.max_epoch + 1):
            yield self._epoch_num

    def steps(self, first: int = 0) -> Iterator[int]:
        """Each step of the current epoch from ``first``, ``local_step`` set to it."""
        for self._local_step in range(first, self.steps_per_epoch):
            yield self._local_step


def _graph_for_new_trainer() -> Any:
    """The graph a new trainer builds in: the default graph in graph mode, a fresh graph when
    eager execution is on (so trainers work whether or not eager was disabled)."""
    tf = _tf.tf()
    if tf.executing_eagerly():
        return tf.Graph()
    return _tf.tf1().get_default_graph()


def _constructs_in_graph(init: Any) -> Any:
    """Wrap a trainer's ``__init__`` so that the outermost one of a construction runs with a
    graph entered (the default graph in graph mode, a fresh one under eager execution): a
    subclass that builds its graph in its own ``__init__`` (as tensorpack's GAN trainers do)
    builds in graph mode. The signature stays the wrapped one's."""

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if self.__dict__.get("_constructing"):  # a super().__init__ inside the same construction
            init(self, *args, **kwargs)
            return
        self.__dict__["_constructing"] = True
        try:
            with _graph_for_new_trainer().as_default():
                init(self, *args, **kwargs)
        finally:
            del self.__dict__["_constructing"]

    _IN_GRAPH.add(__init__)
    return __init__


#: the ``__init__`` functions ``_constructs_in_graph`` made
_IN_GRAPH: weakref.WeakSet = weakref.WeakSet()


class Trainer(ResumableTrainer):
    """Base class of trainers: runs the training loop and fires the hooks of the bus.

    A subclass (or ``setup_graph``) builds the graph and sets ``train_op``; ``train()`` then
    does ``setup_callbacks`` / ``initialize`` / ``main_loop``. The constructor runs with the
    trainer's graph as the default graph (``self.graph``), so a subclass may build there.
    What it resumes besides variables (callback states, the position in an epoch) is
    :class:`trainbus.train.resumable.ResumableTrainer`'s.
    """

    #: Whether this process is the chief worker; chief-only callbacks run only where True.
    is_chief = True
    #: Time every hook of every callback and monitor, and log the table (slowest first) when
    #: training ends. None (the default): as the ``TRAINBUS_PROFILE_HOOKS`` environment variable
    #: says. Set it before ``train()``/``setup_callbacks()``.
    profile_hooks: bool | None = None
    _hook_profile: HookProfile | None = None
    _setup_phase: str | None = None
    #: The ``tf.compat.v1.Session``; available after ``initialize()``.
    sess: Any = None
    #: The session whose ``run()`` fires the callbacks' ``before_run``/``after_run``;
    #: running it is a training iteration (takes input, increments ``global_step``).
    hooked_sess: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is not None and init not in _IN_GRAPH:
            cls.__init__ = _constructs_in_graph(init)  # type: ignore[method-assign]

    @_constructs_in_graph
    def __init__(self, *, autoload_plugins: bool = True, disable_plugins: Iterable[str] = ()) -> None:
        self.loop = TrainLoop()
        self.graph = _tf.tf1().get_default_graph()  # the graph _constructs_in_graph entered
        freeze_tensorflow_objects()  # see trainbus._gcfreeze
        self._callbacks: list[Callback] = []
        self._callbacks_setup = False
        self._training_started = False
        self._pm: TrainbusPluginManager | None = None
        self._bus: Bus | None = None
        self.monitors: Monitors | None = None
        self.train_op: Any = None
        self._autoload_plugins = autoload_plugins
        self._disable_plugins = tuple(disable_plugins)
        self._stop_reason: str | None = None
        self._input_source: Any = None
        self._step_feed: Any = None  # the input source's step_feed(), taken when the graph is set up
        self._step_incr_op: Any = None
        #: (global step, the session's runs then) when initialize() knew it without a read
        self._step_after_init: tuple[int, int] | None = None
        self._start_global_step: int | None = None
        # checkpoint commits (list + callback states) waiting for every callback to handle the
        # triggers of the step: trainbus.checkpoint.defer_commit / flush_commits
        self._pending_commits: list[Any] = []
        self._defer_commits = False

    # ------------------------------------------------------------------ state
    @property
    def epoch_num(self) -> int:
        """The current epoch: from before ``before_epoch`` to after ``trigger_epoch`` of epoch
        3, ``epoch_num`` is 3."""
        return self.loop.epoch_num

    @property
    def global_step(self) -> int:
        """How many times ``hooked_sess.run`` has been called (restored from the checkpoint's
        ``global_step`` variable when resuming); incremented after each call returns."""
        return self.loop.global_step

    @property
    def local_step(self) -> int:
        """Steps finished in the current epoch, counting from 0 (``-1`` before the first)."""
        return self.loop.local_step

    @property
    def start_global_step(self) -> int | None:
        """The global step this run's training started at (the restored one when resuming), set
        once every ``before_train`` ran; None before. ``global_step`` equal to it: no step of this
        run has finished."""
        return self._start_global_step

    @property
    def steps_per_epoch(self) -> int:
        return self.loop.steps_per_epoch

    @property
    def starting_epoch(self) -> int:
        return self.loop.starting_epoch

    @property
    def max_epoch(self) -> int:
        return self.loop.max_epoch

    @property
    def stop_reason(self) -> str | None:
        """Why training was asked to stop (a signal, ``request_stop``, a session hook), once every
        process agreed; None while it goes on. Training ends after the current step."""
        return self._stop_reason

    @property
    def stop_requested(self) -> bool:
        """Whether a stop was agreed (see ``stop_reason``)."""
        return self._stop_reason is not None

    @property
    def plugin_manager(self) -> TrainbusPluginManager | None:
        """The pluggy manager of this run (after ``setup_callbacks``)."""
        return self._pm

    @property
    def setup_phase(self) -> str | None:
        """What the trainer is doing before its first step, in a few words ("setting up the
        callbacks", "creating the session", "initializing the session"), while one of its
        setup methods runs; None otherwise. Read by the handlers of
        ``interrupts_before_training``."""
        return self._setup_phase

    @contextlib.contextmanager
    def _phase(self, what: str) -> Iterator[None]:
        before = self._setup_phase
        self._setup_phase = what
        try:
            yield
        finally:
            self._setup_phase = before

    # ------------------------------------------------------------------ callbacks
    def register_callback(self, cb: Callback | Sequence[Callback]) -> bool:
        """Register a callback (or a list) before training starts; returns whether it was
        registered (a chief-only callback is not registered on a non-chief worker)."""
        if isinstance(cb, (list, tuple)):
            results = [self.register_callback(x) for x in cb]
            return all(results)
        if self._callbacks_setup:
            raise RuntimeError(
                f"register_callback({cb}) was called after the callbacks were set up (training started); "
                "register every callback before train()/setup_callbacks()"
            )
        ensure_callback(cb, "callbacks")
        if not self.is_chief and cb.chief_only:
            logger.warning(f"Callback {cb} is chief-only, skipped on this non-chief worker.")
            return False
        self._callbacks.append(cb)
        return True

    def _extra_members(self) -> list[Callback]:
        """Callbacks a trainer strategy adds after the user's (none by default)."""
        return []

    def setup_callbacks(self, callbacks: Sequence[Callback] | None, monitors: Sequence[MonitorBase] | None) -> None:
        """Register ``callbacks`` and ``monitors`` on the bus (in order) and fire
        ``setup_graph``. Must be called after the main graph is built."""
        if self._callbacks_setup:
            raise RuntimeError("setup_callbacks() was already called for this trainer")
        with self._phase("setting up the callbacks"):
            self._setup_callbacks(callbacks, monitors)

    def _setup_callbacks(self, callbacks: Sequence[Callback] | None, monitors: Sequence[MonitorBase] | None) -> None:
        callbacks = _as_list(callbacks, "callbacks")
        monitors = _as_list(monitors, "monitors")
        for cb in callbacks:
            if isinstance(cb, MonitorBase):
                raise TypeError(f"{cb} is a monitor (MonitorBase); pass it in monitors=[...], not callbacks=[...]")
            self.register_callback(cb)
        for m in monitors:
            ensure_callback(m, "monitors")
        self.monitors = Monitors(monitors)
        active_monitors = [m for m in self.monitors.monitors if self.is_chief or not m.chief_only]
        members = list(self._callbacks) + self._extra_members() + active_monitors
        with self.graph.as_default():
            self._step_incr_op = self._make_step_incr_op()
        pm = TrainbusPluginManager()
        if self._autoload_plugins:
            pm.load_ambient(self._disable_plugins)
        pm.register_ordered(members)
        self._pm = pm
        profile = self.profile_hooks if self.profile_hooks is not None else profiling_requested()
        self._hook_profile = HookProfile() if profile else None
        self._bus = Bus(pm, self._hook_profile)
        self._callbacks_setup = True
        self.monitors.bind(self, pm.hook)
        self._stateful_members()  # two stateful callbacks with one state key: an error before any graph work
        try:
            if self.is_chief:
                # the log directory is this training's alone until it ends (set_logger_dir took
                # the lock when the directory existed; a new one is locked once created)
                taken = logger.take_run_dir_lock()
                if taken is not None:
                    self.__dict__.setdefault("_run_dir_locks", []).append(taken)
            # every check of the run passed: now the log directory's action (delete, back up,
            # create) is carried out, before any callback writes into it
            logger.commit_logger_dir()
            if self.is_chief:
                _ckpt.lock_run_dir(self, logger.get_logger_dir())
            with self.graph.as_default(), pm.deferring_drops():
                self._bus.setup_graph(trainer=self)
            if self.is_chief:  # a checkpoint directory other than the log directory is locked too
                for w in _ckpt.find_writers(self):
                    _ckpt.lock_run_dir(self, getattr(w, "checkpoint_dir", None))
        except BaseException:
            _ckpt.release_run_dirs(self)
            raise
        # bind again: a callback may leave per-step hooks it turned out not to need while
        # setting up its graph (Callback._drop_hooks), which then cost nothing per step
        self._bus = Bus(pm, self._hook_profile)

    def _make_step_incr_op(self) -> Any:
        from trainbus.tfutils import _step_graph
        from trainbus.tfutils.common import get_global_step_var

        tf1 = _tf.tf1()
        if _step_graph.usable(self.graph):
            # no global step yet: the variable and its increment as one imported GraphDef,
            # TensorFlow's graph node for node (None: a name taken, the import refused)
            op = _step_graph.build(self.graph)
            if op is not None:
                return op
        gs = get_global_step_var()
        try:
            return self.graph.get_operation_by_name("global_step_incr")
        except KeyError:
            pass
        with tf1.name_scope(None):
            if gs.dtype._is_ref_dtype:
                return tf1.assign_add(gs, 1, name="global_step_incr").op
            # a resource variable: the increment alone, without the read of the new value that
            # tf.assign_add adds and nothing fetches. It keeps the default name tf.assign_add gives
            # it (which ignores ``name`` here): named otherwise, the executor ran it before a read
            # of global_step that a callback fetches in before_run, which then saw the new value
            return gs.assign_add(1, read_value=False)

    def describe_hooks(self) -> str:
        """The effective calling order of every hook (after ``setup_callbacks``)."""
        if self._pm is None:
            raise RuntimeError("describe_hooks() needs setup_callbacks() first")
        return self._pm.describe_hooks()

    # ------------------------------------------------------------------ session
    def initialize(self, session_creator: Any, session_init: Any) -> None:
        """Create the session (``self.sess``), hook it (``self.hooked_sess``), run the
        ``session_init`` (chief only) and finalize the graph. Call after ``setup_callbacks``."""
        from trainbus.tfutils.sessinit import JustCurrentSession, SessionInit

        if not self._callbacks_setup:
            raise RuntimeError("initialize() must be called after setup_callbacks()")
        if session_init is None:
            session_init = JustCurrentSession()
        if not isinstance(session_init, SessionInit):
            raise TypeError(f"session_init must be a SessionInit (e.g. SmartInit(path)), got {session_init!r}")
        with self.graph.as_default(), self._phase("creating the session"):
            session_init._setup_graph()
            logger.info("Creating the session ...")
            self.sess = session_creator.create_session()
            self.initialize_hooks()
            self._setup_phase = "initializing the session"
            if self.is_chief:
                logger.info("Initializing the session ...")
                session_init._run_init(self.sess)
            elif not isinstance(session_init, JustCurrentSession):
                logger.warning("This is not a chief worker, 'session_init' was ignored!")
            self.after_session_init()
            self._read_resume_states(getattr(session_init, "checkpoint_path", None) if self.is_chief else None)
            self._step_after_init = self._global_step_after_init(session_creator, session_init)
        self.sess.graph.finalize()
        logger.info("Graph Finalized.")

    def _global_step_after_init(self, session_creator: Any, session_init: Any) -> tuple[int, int] | None:
        """(the global step's value, the session's ``runs`` then) when ``initialize`` can tell
        the value without reading it: this process made the session with a local
        ``NewSessionCreator`` (its initializer assigned every global variable), restored nothing
        (``JustCurrentSession``), its strategy changed nothing after (``after_session_init`` is
        the trainer's own), and the global step's initial value is a constant. Else None."""
        from trainbus.tfutils.sesscreate import CountingSession, NewSessionCreator
        from trainbus.tfutils.sessinit import JustCurrentSession

        sess = self.sess
        if not (self.is_chief and type(session_creator) is NewSessionCreator and not session_creator.target
                and type(sess) is CountingSession and sess.runs_after_init and sess.runs == sess.runs_after_init
                and type(session_init) is JustCurrentSession
                and type(self).after_session_init is Trainer.after_session_init):
            return None
        keys = _tf.tf1().GraphKeys
        found = self.graph.get_collection(keys.GLOBAL_STEP)  # looked up, never made here
        if len(found) != 1 or not any(v is found[0] for v in self.graph.get_collection(keys.GLOBAL_VARIABLES)):
            return None
        gs = found[0]
        value = _tf.tf().get_static_value(gs.initial_value)
        if value is None or getattr(value, "shape", None) != ():
            return None
        return int(value), sess.runs

    def _global_step_now(self) -> int:
        """The global step's value in ``self.sess``: read, unless the session ran nothing since
        ``initialize`` knew it (a read makes TensorFlow prepare a run of its own, milliseconds
        before the first step)."""
        from trainbus.tfutils.common import get_global_step_value

        known = getattr(self, "_step_after_init", None)
        if known is not None and getattr(self.sess, "runs", None) == known[1]:
            return known[0]
        self._step_after_init = None
        return get_global_step_value()

    # ------------------------------------------------------------------ strategy seams
    def after_session_init(self) -> None:
        """Seam for strategies: runs once the session is created and ``session_init`` ran
        (restored), before the graph is finalized; e.g. ``self.broadcast_variables(...)``."""

    def before_session_close(self) -> None:
        """Seam for strategies: runs at the very end of training (also after a failure), once
        every callback's ``after_train`` ran and the last checkpoint is committed, before the
        session closes; e.g. telling the parameter servers this worker is done with them."""

    def broadcast_variables(self, when: str) -> None:
        """Seam for strategies: make every process's variables equal to the chief's (``when``
        names the moment for the log). A single process has nothing to do."""

    def agree_stop(self, cause: str) -> bool:
        """Seam for strategies: a stop cause arose in this process (``request_stop``, a signal,
        ``run_context.request_stop()``, or ``StopTraining`` raised by a callback). Return True
        to stop after the current step (the default: one process agrees with itself), or False
        when the strategy lets the other processes agree first; it then calls
        ``confirm_stop(reason)`` once every process knows, so that all stop after the same step."""
        return True

    def confirm_stop(self, reason: str) -> None:
        """Stop after the current step, for ``reason`` (agreed by every process)."""
        self._stop_reason = reason

    def initialize_hooks(self) -> None:
        """Create ``self.hooked_sess`` over ``self.sess`` with the callbacks' run hooks and the
        per-step feed of the trainer's input source (``InputSource.step_feed()``, taken by
        ``setup_graph``)."""
        self.hooked_sess = HookedSession(self.sess, self, self._bus, self._step_incr_op, feed=self._step_feed)

    # ------------------------------------------------------------------ loop
    def run_step(self) -> None:
        """One iteration: ``self.hooked_sess.run(self.train_op)`` by default. Change it by
        setting ``trainer.train_op`` or overriding this method."""
        self.hooked_sess.run(self.train_op)

    def request_stop(self, reason: str = "requested") -> None:
        """Stop after the current step, once every process agreed (``agree_stop``); thread-safe
        (signal handlers call it)."""
        if self.agree_stop(reason):
            self.confirm_stop(reason)

    def main_loop(self, steps_per_epoch: int, starting_epoch: int, max_epoch: int) -> None:
        """Run the training loop."""
        bus = self._bus
        if bus is None or self.sess is None:
            raise RuntimeError("main_loop() needs setup_callbacks() and initialize() first")
        self._training_started = True
        tf = _tf.tf()
        primary: BaseException | None = None
        loop = self.loop
        with self.graph.as_default(), self.sess.as_default():
            loop.config(steps_per_epoch, starting_epoch, max_epoch)
            loop.set_global_step(self._global_step_now())
            self._defer_commits = True
            try:
                self._restore_callback_states()
                data_policy = self._skip_consumed_datapoints()
                bus.before_train(trainer=self)
                loop.set_global_step(self._global_step_now())
                self._start_global_step = loop.global_step
                run_step = self.run_step
                trigger_step = bus.trigger_step
                hooked = self.hooked_sess
                pending = self._pending_commits
                last = steps_per_epoch - 1
                first_step = self._first_local_step(data_policy)
                for epoch in loop.epochs():
                    logger.info(f"Start Epoch {epoch} ...")
                    bus.before_epoch(trainer=self)
                    start = time.perf_counter()
                    for step in loop.steps(first_step):
                        if self._stop_reason is not None:
                            raise StopTraining(self._stop_reason)
                        if hooked.should_stop():
                            self._stop_from_session(hooked, "a session hook requested stop")
                            if self._stop_reason is not None:
                                raise StopTraining(self._stop_reason)
                        try:
                            run_step()
                            if trigger_step is not None:
                                trigger_step(trainer=self)
                                # a checkpoint saved by a step trigger is committed once every
                                # callback handled this step (at an epoch's end: after trigger_epoch)
                                if pending and step != last:
                                    _ckpt.flush_commits(self)
                        except StopTraining as e:
                            if self.agree_stop(_reason_of(e)):
                                raise
                    first_step = 0
                    bus.after_epoch(trainer=self)
                    logger.info(
                        f"Epoch {epoch} (global_step {loop.global_step}) finished, "
                        f"time:{human_seconds(time.perf_counter() - start, 2)}."
                    )
                    self._pm.hook_times.clear()
                    try:
                        bus.trigger_epoch(trainer=self)
                    except StopTraining as e:
                        if self.agree_stop(_reason_of(e)):
                            raise
                    finally:
                        # checkpoints of this epoch get the callbacks' states after every trigger
                        _ckpt.flush_commits(self)
                    self._log_slow_callbacks()
                    if self._stop_reason is not None:
                        raise StopTraining(self._stop_reason)
                logger.info("Training has finished!")
            except StopTraining as e:
                logger.info(f"Training was stopped by StopTraining: {e}")
            except tf.errors.OutOfRangeError:
                failure = self._input_failure()
                if failure is not None:
                    primary = failure
                    raise failure from None  # the input's own error, not the queue running dry
                logger.info("Training was stopped by the input running out of data (OutOfRangeError).")
            except KeyboardInterrupt as e:
                primary = e
                logger.info("Detected Ctrl-C and exiting main loop.")
                raise
            except BaseException as e:
                primary = e
                origin = origin_of(e)
                if origin is not None:
                    logger.error(f"Training failed in callback {origin[0]} ({origin[1]}): {type(e).__name__}: {e}")
                raise
            finally:
                self._finish(primary)

    def _stop_from_session(self, hooked: Any, cause: str) -> None:
        take = getattr(hooked, "take_stop_request", None)
        if take is not None:
            take()
        if self.agree_stop(cause):
            self.confirm_stop(cause)

    def _input_failure(self) -> BaseException | None:
        src = self._input_source
        fail = getattr(src, "failure", None)
        return fail() if callable(fail) else None

    def _finish(self, primary: BaseException | None) -> None:
        """after_train for everyone, close the session; re-raise after_train errors."""
        self._pm.take_after_train_errors()
        try:
            self._bus.after_train(trainer=self)
        finally:
            if self._hook_profile is not None:
                logger.info(self._hook_profile.table())
            try:
                _ckpt.flush_commits(self)  # the final checkpoint, with the states after after_train
            except Exception as e:  # noqa: BLE001 - the commits report their own write failures
                logger.error(f"Committing the last checkpoint failed: {type(e).__name__}: {e}")
            self._defer_commits = False
            _ckpt.release_run_dirs(self)
            try:
                self.before_session_close()
            except Exception as e:  # noqa: BLE001 - the outcome of the training matters more
                logger.warning(f"{type(self).__name__}.before_session_close failed: {type(e).__name__}: {e}")
            try:
                if self.hooked_sess is not None:
                    self.hooked_sess.close()
                elif self.sess is not None:
                    self.sess.close()
            except Exception as e:  # noqa: BLE001
                logger.warning(f"Closing the session failed: {e}")
        errors = self._pm.take_after_train_errors()
        if errors:
            for e in errors:
                logger.error(f"after_train failed in {origin_of(e)[0] if origin_of(e) else '?'}: {type(e).__name__}: {e}")
            if primary is None:
                raise errors[0]

    def _log_slow_callbacks(self) -> None:
        times = self._pm.hook_times
        total = sum(times.values())
        if total >= 1.0:
            parts = sorted(times.items(), key=lambda kv: -kv[1])
            logger.info("Callbacks took {:.3f} sec in total. {}".format(
                total, "; ".join(f"{cb}: {t:.3f} sec" for cb, t in parts if t > 0.1 * total)))

    def train(
        self,
        callbacks: Sequence[Callback] | None,
        monitors: Sequence[MonitorBase] | None,
        session_creator: Any,
        session_init: Any,
        steps_per_epoch: int,
        starting_epoch: int = 1,
        max_epoch: int = 9999999,
    ) -> None:
        """``setup_callbacks`` + ``initialize`` + ``main_loop``."""
        from trainbus.train._signals import graceful_signals

        self._check_loop_args(steps_per_epoch, starting_epoch, max_epoch)
        self.setup_callbacks(callbacks, monitors)
        try:
            self.initialize(session_creator, session_init)
        except BaseException:
            # before_train never ran, so no after_train is due; only release the session
            _ckpt.release_run_dirs(self)
            if self.sess is not None:
                try:
                    self.sess.close()
                except Exception as e:  # noqa: BLE001 - the original error matters more
                    logger.warning(f"Closing the session failed: {e}")
            raise
        with graceful_signals(self):
            self.main_loop(steps_per_epoch, starting_epoch, max_epoch)

    def _check_loop_args(self, steps_per_epoch: Any, starting_epoch: Any, max_epoch: Any) -> None:
        TrainLoop().config(steps_per_epoch, starting_epoch, max_epoch)

    def _default_steps_per_epoch(self) -> int:
        src = self._input_source
        if src is None:
            raise ValueError("steps_per_epoch is required: this trainer has no input source to count steps from")
        try:
            return int(src.size())
        except Exception as e:
            raise ValueError(
                f"steps_per_epoch was not given and the size of the input ({src}) is unknown ({e}). "
                "Pass steps_per_epoch=N, or give the dataflow a __len__."
            ) from e

    def train_with_defaults(
        self,
        _sentinel: Any = None,
        callbacks: Sequence[Callback] | None = None,
        monitors: Sequence[MonitorBase] | None = None,
        session_creator: Any = None,
        session_init: Any = None,
        steps_per_epoch: int | None = None,
        starting_epoch: int = 1,
        max_epoch: int = 9999999,
        extra_callbacks: Sequence[Callback] | None = None,
    ) -> None:
        """``train()`` with defaults: ``extra_callbacks`` defaults to ``DEFAULT_CALLBACKS()``
        and is appended to ``callbacks``; ``monitors`` defaults to ``DEFAULT_MONITORS()``; every
        other option has a default except ``steps_per_epoch``, which must be given (as in
        tensorpack; ``TrainConfig`` is what defaults it to the size of the data)."""
        from trainbus.train.config import DEFAULT_CALLBACKS, DEFAULT_MONITORS
        from trainbus.tfutils.sesscreate import NewSessionCreator
        from trainbus.tfutils.sessinit import JustCurrentSession

        if _sentinel is not None:
            raise TypeError("train_with_defaults() takes keyword arguments only, e.g. train_with_defaults(callbacks=[...])")
        callbacks = list(_as_list(callbacks, "callbacks"))
        monitors = DEFAULT_MONITORS() if monitors is None else monitors
        extra_callbacks = DEFAULT_CALLBACKS() if extra_callbacks is None else extra_callbacks
        callbacks.extend(_as_list(extra_callbacks, "extra_callbacks"))
        if steps_per_epoch is None:
            raise ValueError(
                f"{type(self).__name__}.train_with_defaults() needs steps_per_epoch: it has a default for every "
                "other option, not for this one. Pass steps_per_epoch=N (e.g. len(dataflow) for one pass over "
                "the data), or train with launch_train_with_config(TrainConfig(...), trainer), which defaults "
                "it to the size of the data."
            )
        session_creator = session_creator or NewSessionCreator()
        session_init = session_init or JustCurrentSession()
        self.train(callbacks, monitors, session_creator, session_init, steps_per_epoch, starting_epoch, max_epoch)

    def train_with_config(self, config: Any) -> None:
        """Train with the options of a ``TrainConfig``."""
        steps = config.steps_per_epoch
        if steps is None:
            steps = self._default_steps_per_epoch()
        self.train_with_defaults(
            callbacks=config.callbacks, monitors=config.monitors, session_creator=config.session_creator,
            session_init=config.session_init, steps_per_epoch=steps, starting_epoch=config.starting_epoch,
            max_epoch=config.max_epoch, extra_callbacks=config.extra_callbacks,
        )

    def __str__(self) -> str:
        return type(self).__name__


def _reason_of(e: StopTraining) -> str:
    return str(e) or f"{type(e).__name__} raised"


def _as_list(x: Any, label: str) -> list:
    if x is None:
        return []
    if isinstance(x, (list, tuple)):
        return list(x)
    if isinstance(x, Callback):
        return [x]
    raise TypeError(f"{label} must be a list of callbacks, got {x!r} of type {type(x).__name__}")
