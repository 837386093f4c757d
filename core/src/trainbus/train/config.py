"""``TrainConfig``, ``AutoResumeTrainConfig`` and the default callbacks and monitors."""

from __future__ import annotations


import os
from typing import Any

from trainbus._defaults import DEFAULT_CALLBACKS, DEFAULT_MONITORS
from trainbus.utils import logger

__all__ = ["TrainConfig", "AutoResumeTrainConfig", "DEFAULT_CALLBACKS", "DEFAULT_MONITORS"]


class TrainConfig:
    """Options for a single-cost trainer (``launch_train_with_config``).

    :param dataflow: a DataFlow, or
    :param data: an InputSource.
    :param model: a ``ModelDesc``.
    :param callbacks: the callbacks; the run uses ``callbacks + extra_callbacks``.
    :param extra_callbacks: default ``DEFAULT_CALLBACKS()``.
    :param monitors: default ``DEFAULT_MONITORS()``, made when training starts.
    :param session_creator: default ``NewSessionCreator(config=session_config)``.
    :param session_config: a ``ConfigProto`` used when ``session_creator`` is None.
    :param session_init: a ``SessionInit``; default does nothing.
    :param starting_epoch: index of the first epoch.
    :param steps_per_epoch: steps per epoch; default the input's size.
    :param max_epoch: the last epoch.
    :param seed: seed Python, NumPy, the DataFlow RNGs and TensorFlow (and turn on op determinism)
        when training starts (``trainbus.utils.seed.seed_everything``); default: no seeding.
    """

    def __init__(self, dataflow: Any = None, data: Any = None, model: Any = None, callbacks: Any = None,
                 extra_callbacks: Any = None, monitors: Any = None, session_creator: Any = None,
                 session_config: Any = None, session_init: Any = None, starting_epoch: int = 1,
                 steps_per_epoch: int | None = None, max_epoch: int = 99999, *, seed: int | None = None,
                 **kwargs: Any) -> None:
        from trainbus._gcfreeze import freeze_tensorflow_objects
        from trainbus.callbacks.base import ensure_callback
        from trainbus.callbacks.monitor import MonitorBase
        from trainbus.dataflow import is_dataflow
        from trainbus.tfutils.sessinit import JustCurrentSession, SessionInit

        freeze_tensorflow_objects()  # a training is being set up: see trainbus._gcfreeze
        if kwargs:
            raise TypeError(f"TrainConfig got unknown arguments: {', '.join(sorted(kwargs))}")
        if dataflow is not None and data is not None:
            raise ValueError("TrainConfig: give dataflow= or data=, not both")
        if dataflow is not None and not is_dataflow(dataflow):
            raise TypeError(f"TrainConfig(dataflow=...) needs a DataFlow (with __iter__ and reset_state), got {dataflow!r}")
        if data is not None:
            from trainbus.input_source import InputSource

            if not isinstance(data, InputSource):
                raise TypeError(f"TrainConfig(data=...) needs an InputSource, got {data!r}; pass a DataFlow as dataflow=")
        self.dataflow = dataflow
        self.data = data
        if model is not None:
            from trainbus.train.model_desc import ModelDescBase

            if isinstance(model, type) and issubclass(model, ModelDescBase):
                raise TypeError(f"TrainConfig(model={model.__name__}) got the class; pass an instance: "
                                f"model={model.__name__}()")
            if not isinstance(model, ModelDescBase):
                raise TypeError(f"TrainConfig(model=...) needs a ModelDesc, got {model!r}")
        self.model = model
        self.callbacks = [ensure_callback(c, "callbacks") for c in (callbacks or [])]
        self.extra_callbacks = DEFAULT_CALLBACKS() if extra_callbacks is None else \
            [ensure_callback(c, "extra_callbacks") for c in extra_callbacks]
        # None: DEFAULT_MONITORS(), made when training starts, so that they write into the log
        # directory in force then (as tensorpack)
        self.monitors = None if monitors is None else list(monitors)
        for m in self.monitors or ():
            if not isinstance(m, MonitorBase):
                raise TypeError(f"monitors must be MonitorBase instances, got {m!r}")
        if session_creator is None:
            from trainbus.tfutils.sesscreate import NewSessionCreator

            session_creator = NewSessionCreator(config=session_config)
        elif session_config is not None:
            raise ValueError("TrainConfig: session_config is only used without session_creator; give one of them")
        self.session_creator = session_creator
        self.session_config = session_config
        if session_init is None:
            session_init = JustCurrentSession()
        if not isinstance(session_init, SessionInit):
            raise TypeError(f"TrainConfig(session_init=...) needs a SessionInit (e.g. SmartInit(path)), got {session_init!r}")
        self.session_init = session_init
        if steps_per_epoch is None:
            src = dataflow if dataflow is not None else data
            if src is not None:
                try:
                    steps_per_epoch = len(src) if dataflow is not None else src.size()
                except Exception as e:  # noqa: BLE001
                    raise ValueError(f"TrainConfig: steps_per_epoch was not given and the size of {src!r} is unknown "
                                     f"({e}); pass steps_per_epoch=N") from None
        for label, v, lo in (("steps_per_epoch", steps_per_epoch, 1), ("starting_epoch", starting_epoch, 0), ("max_epoch", max_epoch, 1)):
            if v is None and label == "steps_per_epoch":
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"TrainConfig: {label} must be an integer >= {lo}, got {v!r}")
        if max_epoch < starting_epoch:
            raise ValueError(f"TrainConfig: max_epoch ({max_epoch}) is smaller than starting_epoch ({starting_epoch})")
        self.steps_per_epoch = steps_per_epoch
        self.starting_epoch = starting_epoch
        self.max_epoch = max_epoch
        from trainbus.utils.seed import check_seed

        self.seed = check_seed(seed, "TrainConfig: seed")



class AutoResumeTrainConfig(TrainConfig):
    """``TrainConfig`` that resumes from the log directory of an earlier run: loads the
    latest checkpoint found there (``session_init``) and continues after the last epoch of
    its ``stats.json`` (``starting_epoch``).

    Only a checkpoint that reads completely is resumed from: a damaged newest checkpoint (index,
    data or callback-state file missing, truncated or failing its checksum, or a damaged
    ``checkpoint`` list) is skipped with a warning naming the file and the problem, and the newest
    intact one is used instead; the log says which. When no checkpoint of the directory reads
    completely, ``DamagedCheckpointError`` lists them all.

    :param always_resume: resume even when ``session_init``/``starting_epoch`` are given.
    :param checkpoint_dir: where to look for checkpoints (default: the log directory).
    """

    def __init__(self, always_resume: bool = True, *, checkpoint_dir: str | None = None, **kwargs: Any) -> None:
        self._checkpoint_dir = checkpoint_dir
        if logger.pending_logger_dir_action() in ("d", "b"):
            # the log directory will be emptied when training starts (set_logger_dir's action):
            # what it holds now is not this run's to resume from
            logger.info(f"The log directory {logger.get_logger_dir()} will be emptied "
                        f"(action {logger.pending_logger_dir_action()!r}); not resuming from its content.")
            stats_epoch, ckpt, ckpt_epoch = None, None, None
            if checkpoint_dir is not None:
                ckpt, ckpt_epoch = self._pick_resume_checkpoint(checkpoint_dir, None, _steps_hint(kwargs))
        else:
            stats_epoch = self.get_resume_epoch()
            ckpt, ckpt_epoch = self._pick_resume_checkpoint(checkpoint_dir, stats_epoch, _steps_hint(kwargs))
        if ckpt is not None and (always_resume or "session_init" not in kwargs):
            from trainbus.tfutils import sessinit

            if "session_init" in kwargs:
                logger.info(f"Found checkpoint at {ckpt}. session_init arguments will be overwritten.")
            else:
                logger.info(f"Will load checkpoint at {ckpt}.")
            kwargs["session_init"] = sessinit.SaverRestore(ckpt)
        if always_resume or "starting_epoch" not in kwargs:
            # the checkpoint's own step decides (the weights are what they are); stats.json
            # is the fallback when the epoch of the checkpoint cannot be told
            last_epoch = ckpt_epoch if ckpt_epoch is not None else stats_epoch
            if last_epoch is not None:
                now_epoch = last_epoch + 1
                max_epoch = kwargs.get("max_epoch", 99999)
                if isinstance(max_epoch, int) and not isinstance(max_epoch, bool) and now_epoch > max_epoch:
                    # the run already reached max_epoch: a valid config that trains nothing
                    # (launch_train_with_config says so in one line and returns)
                    kwargs["starting_epoch"] = max_epoch
                    super().__init__(**kwargs)
                    self.starting_epoch = now_epoch
                    return
                logger.info(f"Resuming after epoch {last_epoch}. Setting starting_epoch to {now_epoch}.")
                kwargs["starting_epoch"] = now_epoch
        super().__init__(**kwargs)

    @staticmethod
    def get_sessinit_resume(dir: str | None = None) -> Any:
        """A ``SaverRestore`` of the newest checkpoint in ``dir`` (default: the log dir) that reads
        completely, or None if there is no checkpoint."""
        dir = dir or logger.get_logger_dir()
        if dir is None:
            return None
        path, _ = AutoResumeTrainConfig._pick_resume_checkpoint(dir, None, None)
        if path is None:
            return None
        from trainbus.tfutils import sessinit

        return sessinit.SaverRestore(path)

    @staticmethod
    def _resume_candidates(dir: str) -> list[str]:
        """Checkpoint prefixes of ``dir`` to try, newest first: those of its ``checkpoint`` list,
        or, when the list is missing or damaged, every ``<name>-<step>.index`` file by step."""
        import glob

        from trainbus.checkpoint import DamagedCheckpointError, read_checkpoint_list
        from trainbus.checkpoint import step_of as checkpoint_step

        try:
            listed = read_checkpoint_list(dir)
        except DamagedCheckpointError as e:
            logger.warning(f"{e} Looking for checkpoints by their file names instead.")
            listed = None
        if listed is not None:
            return list(reversed(listed))
        found = [f[:-len(".index")] for f in glob.glob(os.path.join(glob.escape(dir), "*-*.index"))]
        found = [p for p in found if checkpoint_step(p) is not None]
        return sorted(found, key=lambda p: (checkpoint_step(p), p), reverse=True)

    @staticmethod
    def _pick_resume_checkpoint(dir: str | None, stats_epoch: int | None,
                                steps_per_epoch: int | None) -> tuple[str | None, int | None]:
        """``(checkpoint prefix, last epoch it completed)`` to resume from.

        Checkpoints are tried newest first; one that does not read completely is skipped with a
        warning. A process killed between writing an epoch's checkpoint and its ``stats.json``
        record leaves the newest checkpoint one epoch ahead of ``stats.json``; then the newest
        intact checkpoint that ``stats.json`` covers is chosen, so weights, ``global_step``,
        ``starting_epoch`` and the statistics agree (the lost epoch is trained again).
        """
        import tensorflow as tf

        from trainbus.tfutils import sessinit
        from trainbus.checkpoint import DamagedCheckpointError

        dir = dir or logger.get_logger_dir()
        if dir is None or not os.path.isdir(dir):
            return None, None
        candidates = AutoResumeTrainConfig._resume_candidates(dir)
        if not candidates:
            return None, None

        def completed_epoch(prefix: str) -> int | None:
            if not steps_per_epoch:
                return None
            try:
                step = int(tf.train.load_checkpoint(prefix).get_tensor("global_step"))
            except Exception:  # noqa: BLE001 - no global_step saved: cannot tell
                return None
            return step // steps_per_epoch

        damaged: list[tuple[str, BaseException]] = []
        newest: tuple[str, int | None] | None = None
        chosen: tuple[str, int | None] | None = None
        for prefix in candidates:
            try:
                sessinit.SaverRestore(prefix).verify()
            except (DamagedCheckpointError, FileNotFoundError) as e:
                logger.warning(f"Not resuming from {prefix}: {e}")
                damaged.append((prefix, e))
                continue
            ep = completed_epoch(prefix)
            if newest is None:
                newest = (prefix, ep)
            if stats_epoch is None or ep is None or ep <= stats_epoch:
                chosen = (prefix, ep)
                break
        if newest is None:
            listing = "; ".join(f"{os.path.basename(p)}: {getattr(e, 'problem', None) or e}" for p, e in damaged)
            first = damaged[0][1]
            raise DamagedCheckpointError(
                dir, getattr(first, "file", dir), f"(and every other checkpoint of the directory) does not read "
                f"completely: {listing}",
                "Restore the files from a backup, or move the damaged checkpoints (and the 'checkpoint' list) away "
                "to start training afresh in this directory")
        if chosen is None:
            chosen = newest
        elif chosen != newest:
            logger.warning(f"The newest intact checkpoint {newest[0]} is ahead of stats.json (epoch {newest[1]} > "
                           f"{stats_epoch}); resuming from {chosen[0]} so that both agree.")
        if damaged:
            logger.warning(f"Resuming from {chosen[0]}, the newest checkpoint that reads completely; skipped the "
                           f"damaged: {', '.join(os.path.basename(p) for p, _ in damaged)}.")
        return chosen

    @staticmethod
    def get_resume_epoch(dir: str | None = None) -> int | None:
        """The last finished epoch recorded in ``stats.json`` of ``dir`` (default: the log dir)."""
        from trainbus.utils.stats import load_existing_epoch_number

        return load_existing_epoch_number(dir or logger.get_logger_dir())




def _steps_hint(kwargs: dict) -> int | None:
    """steps_per_epoch as the config will see it, if it can be told without side effects."""
    spe = kwargs.get("steps_per_epoch")
    if isinstance(spe, int) and not isinstance(spe, bool) and spe > 0:
        return spe
    try:
        if kwargs.get("dataflow") is not None:
            return int(len(kwargs["dataflow"]))
        if kwargs.get("data") is not None:
            return int(kwargs["data"].size())
    except Exception:  # noqa: BLE001
        return None
    return None
