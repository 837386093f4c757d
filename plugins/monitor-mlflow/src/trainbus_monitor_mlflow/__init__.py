"""``MLflowMonitor``: scalars (and images) to an MLflow tracking store."""

from __future__ import annotations

import os
import re
import time
from typing import Any, Mapping

from trainbus.callbacks.monitor import MonitorBase
from trainbus.utils import logger

__all__ = ["MLflowMonitor"]

_BAD_CHARS = re.compile(r"[^/\w.\- :]")
_BATCH = 1000  # MLflow's limit of metrics per log_batch call


def _metric_key(name: str) -> str:
    """``name`` made acceptable to MLflow: bad characters become ``_``, and no path part is
    empty, ``.`` or ``..`` (MLflow rejects names that a path normalisation would change)."""
    key = _BAD_CHARS.sub("_", name)
    return "/".join(p if p not in ("", ".", "..") else "_" for p in key.split("/"))


class MLflowMonitor(MonitorBase):
    """Log every scalar to an MLflow run, with the global step as the metric step, and
    images as MLflow images (``client.log_image``). Metrics are sent in batches at the end of
    every epoch and when training ends; the run is then marked finished.

    :param tracking_uri: where the tracking store is (``http://host:5000``,
        ``sqlite:///mlflow.db``, ...); default: MLflow's own default (``MLFLOW_TRACKING_URI``).
        MLflow 3 refuses the plain file store (``./mlruns``) unless
        ``MLFLOW_ALLOW_FILE_STORE=true``; a database store needs ``trainbus-monitor-mlflow[sql]``.
    :param experiment_name: the experiment, created if missing; default: MLflow's default
        experiment (or ``MLFLOW_EXPERIMENT_NAME``).
    :param run_name: the name of the new run.
    :param run_id: log into this existing run instead of creating one (to continue a run).
    :param tags: tags of the run (dict of str to str).
    :param params: parameters to log once at the start (hyper-parameters; dict).
    :param artifact_location: where a newly created experiment stores artifacts (images).
    :param log_images: send ``put_image`` images too (default True).

    Metric names MLflow does not accept (characters other than letters, digits, ``_ - . / :``
    and spaces) are sent with those characters replaced by ``_``.
    """

    def __init__(self, tracking_uri: str | None = None, experiment_name: str | None = None,
                 run_name: str | None = None, run_id: str | None = None, tags: Mapping[str, Any] | None = None,
                 params: Mapping[str, Any] | None = None, artifact_location: str | None = None,
                 log_images: bool = True) -> None:
        for label, v in (("tracking_uri", tracking_uri), ("experiment_name", experiment_name),
                         ("run_name", run_name), ("run_id", run_id), ("artifact_location", artifact_location)):
            if v is not None and (not isinstance(v, str) or not v):
                raise TypeError(f"MLflowMonitor({label}={v!r}): expected a non-empty string or None")
        for label, v in (("tags", tags), ("params", params)):
            if v is not None and not isinstance(v, Mapping):
                raise TypeError(f"MLflowMonitor({label}={v!r}): expected a dict of name -> value")
        if run_id is not None and (experiment_name is not None or run_name is not None):
            raise ValueError("MLflowMonitor(run_id=...) continues an existing run: leave out experiment_name and "
                             "run_name (they belong to that run)")
        try:
            from mlflow import MlflowClient
        except ImportError as e:
            raise ImportError(f"MLflowMonitor needs the mlflow package, which does not import here ({e}): "
                              "pip install mlflow-skinny (or the full mlflow)") from e
        self._client = MlflowClient(tracking_uri=tracking_uri)
        self._tracking_uri = tracking_uri
        self._experiment_name = experiment_name
        self._run_name = run_name
        self._run_id = run_id
        self._tags = {str(k): str(v) for k, v in (tags or {}).items()}
        self._params = dict(params or {})
        self._artifact_location = artifact_location
        self._log_images = bool(log_images)
        self._buffer: list[Any] = []
        self._renamed: dict[str, str] = {}

    @property
    def client(self) -> Any:
        """The ``mlflow.MlflowClient``."""
        return self._client

    @property
    def run_id(self) -> str | None:
        """The id of the run logged into (after training started)."""
        return self._run_id

    def _hooks_turned_off(self) -> tuple[str, ...]:
        return () if self._log_images else ("process_image",)

    # ------------------------------------------------------------------ hooks
    def _before_train(self) -> None:
        client = self._client
        if self._run_id is not None:
            run = client.get_run(self._run_id)
            if run.info.status != "RUNNING":
                client.update_run(self._run_id, status="RUNNING")
            for k, v in self._tags.items():
                client.set_tag(self._run_id, k, v)
        else:
            name = self._experiment_name or os.environ.get("MLFLOW_EXPERIMENT_NAME") or None
            if name is None:
                exp_id = "0"  # MLflow's Default experiment
            else:
                exp = client.get_experiment_by_name(name)
                exp_id = exp.experiment_id if exp is not None else client.create_experiment(
                    name, artifact_location=self._artifact_location)
            run = client.create_run(exp_id, run_name=self._run_name, tags=self._tags or None)
            self._run_id = run.info.run_id
        if self._params:
            from mlflow.entities import Param

            client.log_batch(self._run_id, params=[Param(str(k), str(v)) for k, v in self._params.items()])
        logger.info(f"MLflowMonitor: logging to run {self._run_id} ({client.tracking_uri}).")

    def process_scalar(self, name: str, val: Any) -> None:
        from mlflow.entities import Metric

        key = self._renamed.get(name)
        if key is None:
            key = _metric_key(name)
            if key != name:
                logger.warning(f"MLflowMonitor: the scalar {name!r} is logged as {key!r} (MLflow metric names allow "
                               "letters, digits, _ - . / : and spaces)")
            self._renamed[name] = key
        self._buffer.append(Metric(key, float(val), int(time.time() * 1000), self.trainer.global_step))

    def process_image(self, name: str, val: Any) -> None:
        import numpy as np

        step = self.trainer.global_step
        for idx, img in enumerate(val):
            arr = np.clip(np.asarray(img), 0, 255).astype(np.uint8)
            if arr.shape[-1] == 1:
                arr = arr[:, :, 0]
            key = _metric_key(name if len(val) == 1 else f"{name}/{idx}")
            self._client.log_image(self._run_id, arr, key=key, step=step)

    def _trigger(self) -> None:
        self._flush()

    def _after_train(self) -> None:
        if self._run_id is None:
            return
        try:
            self._flush()
        finally:
            self._client.set_terminated(self._run_id, status="FINISHED")

    # ------------------------------------------------------------------ internals
    def _flush(self) -> None:
        buf, self._buffer = self._buffer, []
        for i in range(0, len(buf), _BATCH):
            self._client.log_batch(self._run_id, metrics=buf[i:i + _BATCH])
