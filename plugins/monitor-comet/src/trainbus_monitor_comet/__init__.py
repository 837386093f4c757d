"""``CometMLMonitor``: scalars, images and the graph to Comet (https://www.comet.com) via ``comet_ml``."""

from __future__ import annotations

from typing import Any, Iterable

from trainbus.callbacks.monitor import MonitorBase

__all__ = ["CometMLMonitor"]


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("trainbus")
    except Exception:  # noqa: BLE001 - informational only
        return "unknown"


class CometMLMonitor(MonitorBase):
    """Send scalars, images, epoch ends and the graph to a ``comet_ml`` experiment.

    :param experiment: a ``comet_ml.Experiment`` (or ``OfflineExperiment``, ...) to log into;
        when given, ``tags`` and ``kwargs`` must be left out (configure the experiment itself).
    :param tags: tags to add to the experiment.
    :param kwargs: arguments of ``comet_ml.Experiment`` (``api_key``, ``project_name``,
        ``workspace``, ...). With ``offline_directory=...`` a ``comet_ml.OfflineExperiment`` is
        made instead, which writes a ``.zip`` there to upload later with ``comet upload``.

    Notes:

    1. comet_ml's automatic logging hooks into TensorFlow when ``comet_ml`` is imported first;
       import it before TensorFlow and trainbus if you use those features.
    2. comet_ml's "automatic output logging" captures the terminal and makes the progress bar
       look frozen, so it is disabled by default (``auto_output_logging=None``); pass
       ``auto_output_logging="default"`` to have it.
    """

    def __init__(self, experiment: Any = None, tags: Iterable[str] | None = None, **kwargs: Any) -> None:
        if experiment is not None:
            if tags is not None or kwargs:
                given = (["tags"] if tags is not None else []) + sorted(kwargs)
                raise ValueError(f"CometMLMonitor(experiment=...): {', '.join(given)} cannot be combined with an "
                                 "existing experiment; configure the experiment itself (experiment.add_tags(...))")
            self._exp = experiment
        else:
            try:
                import comet_ml
            except ImportError as e:
                raise ImportError(f"CometMLMonitor needs the comet_ml package, which does not import here ({e}): "
                                  "pip install comet_ml") from e
            kwargs.setdefault("auto_output_logging", None)
            cls = comet_ml.OfflineExperiment if "offline_directory" in kwargs else comet_ml.Experiment
            self._exp = cls(**kwargs)
        if tags is not None:
            if isinstance(tags, str):
                raise TypeError(f"CometMLMonitor(tags={tags!r}): expected a list of tags; wrap it: tags=[{tags!r}]")
            self._exp.add_tags(list(tags))
        try:
            self._exp.log_dependency("trainbus", _version())
        except Exception:  # noqa: BLE001 - a cosmetic record; never block training for it
            pass

    @property
    def experiment(self) -> Any:
        """The ``comet_ml`` experiment."""
        return self._exp

    def _before_train(self) -> None:
        self._exp.set_model_graph(self.graph)

    def process_scalar(self, name: str, val: Any) -> None:
        self._exp.log_metric(name, val, step=self.trainer.global_step)

    def process_image(self, name: str, val: Any) -> None:
        import numpy as np
        from PIL import Image

        step = self.trainer.global_step
        self._exp.set_step(step)
        for idx, img in enumerate(val):
            arr = np.clip(np.asarray(img), 0, 255).astype(np.uint8)
            if arr.shape[-1] == 1:
                arr = arr[:, :, 0]
            suffix = f"_{idx}" if len(val) > 1 else ""
            self._exp.log_image(Image.fromarray(arr), name=f"{name}_step{step}{suffix}", step=step)

    def _after_epoch(self) -> None:
        self._exp.log_epoch_end(self.trainer.epoch_num, step=self.trainer.global_step)

    def _after_train(self) -> None:
        self._exp.end()
