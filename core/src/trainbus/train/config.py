"""``TrainConfig``, ``AutoResumeTrainConfig`` and the default callbacks and monitors."""

from __future__ import annotations


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
    :param monitors: default ``DEFAULT_MONITORS()``.
    :param session_creator: default ``NewSessionCreator(config=session_config)``.
    :param session_config: a ``ConfigProto`` used when ``session_creator`` is None.
    :param session_init: a ``SessionInit``; default does nothing.
    :param starting_epoch: index of the first epoch.
    :param steps_per_epoch: steps per epoch; default the input's size.
    :param max_epoch: the last epoch.
    """

    def __init__(self, dataflow: Any = None, data: Any = None, model: Any = None, callbacks: Any = None,
                 extra_callbacks: Any = None, monitors: Any = None, session_creator: Any = None,
                 session_config: Any = None, session_init: Any = None, starting_epoch: int = 1,
                 steps_per_epoch: int | None = None, max_epoch: int = 99999, **kwargs: Any) -> None:
        from trainbus.callbacks.base import ensure_callback
        from trainbus.callbacks.monitor import MonitorBase
        from trainbus.dataflow import is_dataflow
        from trainbus.tfutils.sessinit import JustCurrentSession, SessionInit

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

            if not isinstance(model, ModelDescBase):
                raise TypeError(f"TrainConfig(model=...) needs a ModelDesc, got {model!r}")
        self.model = model
        self.callbacks = [ensure_callback(c, "callbacks") for c in (callbacks or [])]
        self.extra_callbacks = DEFAULT_CALLBACKS() if extra_callbacks is None else \
            [ensure_callback(c, "extra_callbacks") for c in extra_callbacks]
        self.monitors = DEFAULT_MONITORS() if monitors is None else list(monitors)
        for m in self.monitors:
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



class AutoResumeTrainConfig(TrainConfig):
    """``TrainConfig`` that resumes from the log directory of an earlier run: loads the
    latest checkpoint found there (``session_init``) and continues after the last epoch of
    its ``stats.json`` (``starting_epoch``).

    :param always_resume: resume even when ``session_init``/``starting_epoch`` are given.
    :param checkpoint_dir: where to look for checkpoints (default: the log directory).
    """

    def __init__(self, always_resume: bool = True, checkpoint_dir: str | None = None, **kwargs: Any) -> None:
        self._checkpoint_dir = checkpoint_dir
        if always_resume or "session_init" not in kwargs:
            sessinit = self.get_sessinit_resume(checkpoint_dir)
            if sessinit is not None:
                path = sessinit.path if hasattr(sessinit, "path") else sessinit
                if "session_init" in kwargs:
                    logger.info(f"Found checkpoint at {path}. session_init arguments will be overwritten.")
                else:
                    logger.info(f"Will load checkpoint at {path}.")
                kwargs["session_init"] = sessinit
        if always_resume or "starting_epoch" not in kwargs:
            last_epoch = self.get_resume_epoch()
            if last_epoch is not None:
                now_epoch = last_epoch + 1
                logger.info(f"Found history statistics from JSON. Setting starting_epoch to {now_epoch}.")
                kwargs["starting_epoch"] = now_epoch
        super().__init__(**kwargs)

    @staticmethod
    def get_sessinit_resume(dir: str | None = None) -> Any:
        """A ``SaverRestore`` of the latest checkpoint in ``dir`` (default: the log dir), or None."""
        import tensorflow as tf

        dir = dir or logger.get_logger_dir()
        if dir is None:
            return None
        path = tf.train.latest_checkpoint(dir)
        if path is None:
            return None
        from trainbus.tfutils import sessinit

        return sessinit.SaverRestore(path)

    @staticmethod
    def get_resume_epoch(dir: str | None = None) -> int | None:
        """The last finished epoch recorded in ``stats.json`` of ``dir`` (default: the log dir)."""
        from trainbus.utils.stats import load_existing_epoch_number

        return load_existing_epoch_number(dir or logger.get_logger_dir())


