"""``launch_train_with_config``: the classic one-call training interface."""

from __future__ import annotations

from typing import Any

__all__ = ["launch_train_with_config", "apply_default_prefetch"]


def apply_default_prefetch(input_source_or_dataflow: Any, trainer: Any) -> Any:
    """Turn a DataFlow into an InputSource fit for ``trainer``: ``QueueInput`` by default,
    staged (``StagingInput``) for trainers with several towers."""
    from trainbus.dataflow import is_dataflow
    from trainbus.input_source import InputSource

    if isinstance(input_source_or_dataflow, InputSource):
        return input_source_or_dataflow
    if not is_dataflow(input_source_or_dataflow):
        raise TypeError(f"expected a DataFlow or an InputSource, got {input_source_or_dataflow!r}")
    from trainbus.input_source import QueueInput, StagingInput

    inp = QueueInput(input_source_or_dataflow)
    if len(getattr(trainer, "devices", None) or []) > 1:
        inp = StagingInput(inp)
    return inp


def launch_train_with_config(config: Any, trainer: Any) -> None:
    """Train ``config.model`` with ``trainer``: set up the input (``config.data``, or
    ``config.dataflow`` with default prefetching), call ``trainer.setup_graph`` with the
    model, then ``trainer.train_with_config(config)``.

    The log directory's action (``logger.set_logger_dir(dir, action)``: delete, back up,
    create) is carried out only when training starts, after the graph and the callbacks are
    checked: a run that fails before leaves the file system as it was.

    SIGINT, SIGTERM or SIGHUP before the first step (while the input, the graph, the callbacks
    or the session are set up) stops at once with
    :class:`~trainbus.train._signals.InterruptedBeforeTraining` (a ``TrainingInterrupted``:
    one line on stderr, status ``128 + signum``); during training they stop gracefully after
    the current step (see ``Trainer.train``).

    With ``config.seed`` the random number generators are seeded and TensorFlow's op
    determinism turned on before the graph is built (:func:`trainbus.utils.seed.seed_everything`).
    Once the graph is built, the table of trainable variables is logged (as tensorpack does at
    setup); after training, a summary (:mod:`trainbus.train.summary`): time, epochs and steps,
    why it stopped, each scalar's last and best value, the checkpoints kept, the log directory.
    A config whose ``starting_epoch`` is past its ``max_epoch`` (an ``AutoResumeTrainConfig``
    of a run that already finished) trains nothing: one line says so and how to go on."""
    from trainbus.train.config import TrainConfig
    from trainbus.train.tower import SingleCostTrainer

    if not isinstance(config, TrainConfig):
        raise TypeError(f"launch_train_with_config: config must be a TrainConfig, got {config!r}")
    if not isinstance(trainer, SingleCostTrainer):
        raise TypeError(f"launch_train_with_config: trainer must be a SingleCostTrainer (e.g. SimpleTrainer()), got {trainer!r}")
    if config.model is None:
        raise ValueError("launch_train_with_config: the TrainConfig has no model=")
    if config.data is None and config.dataflow is None:
        raise ValueError("launch_train_with_config: the TrainConfig has neither dataflow= nor data=")
    from trainbus.train._signals import TrainingInterrupted, interrupts_before_training
    from trainbus.train.summary import RunSummary, finished_message
    from trainbus.utils import logger

    if config.starting_epoch > config.max_epoch:
        logger.info(finished_message(logger.get_logger_dir(), config.starting_epoch - 1, config.max_epoch,
                                     "give a larger max_epoch"))
        return
    model = config.model
    resume_from = getattr(config.session_init, "checkpoint_path", None)
    summary = RunSummary(config, trainer)
    try:
        with interrupts_before_training(trainer, checkpoint=resume_from if isinstance(resume_from, str) else None) \
                as setup:
            seed = getattr(config, "seed", None)
            if seed is not None:
                from trainbus.utils.seed import seed_everything

                setup.during = "seeding"
                seed_everything(seed, graph=trainer.graph)
            setup.during = "preparing the input"
            inp = apply_default_prefetch(config.data if config.data is not None else config.dataflow, trainer)
            setup.during = "building the graph"
            trainer.setup_graph(model.get_input_signature(), inp, model.build_graph, model.get_optimizer)
            _describe_variables(trainer)
            setup.during = "setting up the callbacks"
            trainer.train_with_config(config)
    except TrainingInterrupted as e:
        _say_logdir_untouched(logger)
        if getattr(trainer, "_training_started", False):
            _log_summary(logger, summary, e)
        summary.close()
        raise
    except BaseException:
        summary.close()
        _say_logdir_untouched(logger)  # only while the action is still pending (nothing trained)
        raise
    _log_summary(logger, summary, None)


def _describe_variables(trainer: Any) -> None:
    """The table of trainable variables (names, shapes, sizes, totals) in the log, as tensorpack
    prints it when a trainer is set up."""
    from trainbus.tfutils.model_utils import describe_trainable_vars

    with trainer.graph.as_default():
        describe_trainable_vars()


def _log_summary(logger: Any, summary: Any, error: BaseException | None) -> None:
    try:
        text = summary.text(error)
    except Exception as e:  # noqa: BLE001 - the training is done; a summary that fails must not hide that
        logger.warning(f"The end-of-run summary could not be made: {type(e).__name__}: {e}")
        return
    logger.info(text)


def _say_logdir_untouched(logger: Any) -> None:
    """After a failure before training started: tell that the log directory's action (chosen
    by ``set_logger_dir``) was not carried out, so nothing there was deleted or moved."""
    action = logger.pending_logger_dir_action()
    if action is not None:
        logger.info(f"The run failed before training started; the log directory {logger.get_logger_dir()} was left "
                    f"as it was (its action {action!r} happens only when training starts).")
