"""``WandbMonitor``: scalars, images and histograms to a Weights & Biases run (``wandb``)."""

from __future__ import annotations

import json
import math
import os
import secrets
import string
import sys
from typing import Any, Iterable, Mapping

from trainbus.callbacks import MonitorBase
from trainbus.utils import logger
from trainbus.utils.fs import atomic_write_text

__all__ = ["WandbMonitor"]

#: wandb.init arguments the monitor sets itself
_OWN_INIT_ARGS = {
    "id": "run_id=...",
    "resume": "resume=True/False (the run id kept in the log directory) or run_id=...",
    "reinit": "nothing: the monitor always opens its own run",
    "resume_from": "run_id=...",
    "fork_from": "run_id=...",
    "dir": "wandb_dir=...",
}
_MAX_BINS = 512  # wandb.Histogram's limit
_ID_CHARS = string.ascii_lowercase + string.digits


def _new_run_id() -> str:
    return "".join(secrets.choice(_ID_CHARS) for _ in range(8))


def _to_uint8_image(img: Any) -> Any:
    """One HWC image in [0, 255] as a PIL image (1 channel: grey, 3: RGB, 4: RGBA)."""
    import numpy as np
    from PIL import Image

    arr = np.clip(np.asarray(img), 0, 255).astype(np.uint8)
    if arr.ndim == 3 and arr.shape[-1] == 1:
        arr = arr[:, :, 0]
    return Image.fromarray(arr)


def _rebin(counts: list[float], edges: list[float], max_bins: int = _MAX_BINS) -> tuple[list[float], list[float]]:
    """Merge neighbouring buckets so that at most ``max_bins`` remain."""
    n = len(counts)
    if n <= max_bins:
        return counts, edges
    k = math.ceil(n / max_bins)
    return ([sum(counts[i:i + k]) for i in range(0, n, k)],
            [edges[i] for i in range(0, n, k)] + [edges[n]])


def _histogram_from_histo(h: Any) -> tuple[list[float], list[float]] | None:
    """``(counts, edges)`` of a ``HistogramProto`` (``tf.compat.v1.summary.histogram``): bucket
    ``i`` ends at ``bucket_limit[i]`` and starts where bucket ``i - 1`` ends; empty buckets at
    either end are dropped and the outer edges become the data's ``min`` and ``max``."""
    counts = [float(c) for c in h.bucket]
    limits = [float(x) for x in h.bucket_limit]
    if len(counts) != len(limits) or not any(counts):
        return None
    first = next(i for i, c in enumerate(counts) if c)
    last = max(i for i, c in enumerate(counts) if c)
    lo, hi = float(h.min), float(h.max)
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        return None
    edges = [lo] + [min(max(x, lo), hi) for x in limits[first:last]] + [hi]
    return _rebin(counts[first:last + 1], edges)


def _histogram_from_tensor(tensor: Any) -> tuple[list[float], list[float]] | None:
    """``(counts, edges)`` of a TensorBoard histogram tensor (``tf.summary.histogram`` in TF 2):
    ``[k, 3]`` rows of (left edge, right edge, count)."""
    import tensorflow as tf

    arr = tf.make_ndarray(tensor)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] != 3:
        return None
    counts = [float(c) for c in arr[:, 2]]
    if not any(counts):
        return None
    edges = [float(x) for x in arr[:, 0]] + [float(arr[-1, 1])]
    if not all(math.isfinite(x) for x in edges):
        return None
    return _rebin(counts, edges)


class WandbMonitor(MonitorBase):
    """Log scalars, images and histograms to a Weights & Biases run, each at the trainer's
    global step (the W&B ``step``).

    The run is opened when training starts (only by the chief: monitors are ``chief_only``) and
    finished when it ends, also when training fails (the run is then marked failed). The run id
    is kept in ``wandb-run.json`` in the log directory (``logger.get_logger_dir()``), so a
    training resumed in the same directory (``AutoResumeTrainConfig``, or a second run with
    ``set_logger_dir(..., action="k")``) continues the same W&B run (``resume="allow"``) instead
    of starting a new one.

    What is sent, for each global step at which something was put (one ``run.log`` per step):

    * ``put_scalar`` values (and the simple values of ``put_summary``), under their names;
    * ``put_image`` images as ``wandb.Image`` (a list of them for a batch of several);
    * histograms found in ``put_summary`` summaries (``tf.compat.v1.summary.histogram``, or
      TensorBoard's TF 2 histogram tensors) as ``wandb.Histogram``, under the summary tag.

    :param project: the W&B project; default: ``WANDB_PROJECT`` or W&B's own default.
    :param name: the run's display name.
    :param entity: the user or team owning the project; default: W&B's default entity.
    :param group: group the run belongs to.
    :param tags: tags of the run (a list of strings).
    :param notes: a description of the run.
    :param config: hyper-parameters to record on the run (a dict).
    :param run_id: log into the run with this id (created if it does not exist), whatever the
        log directory holds.
    :param wandb_dir: where W&B keeps its local files (a ``wandb/`` folder is made in it);
        default: ``WANDB_DIR`` if set, else the log directory, else W&B's default.
    :param mode: ``"online"``, ``"offline"`` (write locally, send later with ``wandb sync``)
        or ``"disabled"``; default: ``WANDB_MODE`` or online.
    :param resume: continue the run whose id the log directory holds (default True). False
        starts a new run, whose id then replaces the old one in the directory.
    :param log_images: send ``put_image`` images (default True).
    :param log_histograms: send histograms of ``put_summary`` summaries (default True). When
        False the monitor takes no summaries at all.
    :param init_kwargs: further arguments of ``wandb.init`` (``job_type``, ``settings``,
        ``save_code``, ...).

    W&B's console capture is off unless asked for (``WANDB_CONSOLE=wrap`` in the environment, or
    ``settings=wandb.Settings(console="wrap")``): trainbus's log already goes to the log
    directory, and the capture hooks every write to ``sys.stdout``/``sys.stderr`` of the process,
    which must not outlive the run.

    W&B keeps one value per name and step, and drops data logged at a step lower than the
    run's latest one: a training resumed from a checkpoint older than the run's last logged
    step loses what it logs before it passes that step (a warning says so).
    """

    RUN_FILE = "wandb-run.json"

    def __init__(self, project: str | None = None, name: str | None = None, *, entity: str | None = None,
                 group: str | None = None, tags: Iterable[str] | None = None, notes: str | None = None,
                 config: Mapping[str, Any] | None = None, run_id: str | None = None,
                 wandb_dir: str | os.PathLike | None = None, mode: str | None = None, resume: bool = True,
                 log_images: bool = True, log_histograms: bool = True, **init_kwargs: Any) -> None:
        for label, v in (("project", project), ("name", name), ("entity", entity), ("group", group),
                         ("notes", notes), ("run_id", run_id), ("mode", mode)):
            if v is not None and (not isinstance(v, str) or not v):
                raise TypeError(f"WandbMonitor({label}={v!r}): expected a non-empty string or None")
        if tags is not None and (isinstance(tags, str) or not all(isinstance(t, str) for t in tags)):
            hint = f"; wrap it: tags=[{tags!r}]" if isinstance(tags, str) else ""
            raise TypeError(f"WandbMonitor(tags={tags!r}): expected a list of strings{hint}")
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"WandbMonitor(config={config!r}): expected a dict of name -> value")
        for label, v in (("resume", resume), ("log_images", log_images), ("log_histograms", log_histograms)):
            if not isinstance(v, bool):
                raise TypeError(f"WandbMonitor({label}={v!r}): expected True or False")
        if wandb_dir is not None and not isinstance(wandb_dir, (str, os.PathLike)):
            raise TypeError(f"WandbMonitor(wandb_dir={wandb_dir!r}): expected a path or None")
        for key, instead in _OWN_INIT_ARGS.items():
            if key in init_kwargs:
                raise ValueError(f"WandbMonitor({key}=...): the monitor sets this wandb.init argument itself; "
                                 f"use {instead}")
        try:
            import wandb  # noqa: F401
        except ImportError as e:
            raise ImportError(f"WandbMonitor needs the wandb package, which does not import here ({e}): "
                              "pip install wandb") from e
        self._project = project
        self._name = name
        self._entity = entity
        self._group = group
        self._tags = list(tags) if tags is not None else None
        self._notes = notes
        self._config = dict(config) if config is not None else None
        self._run_id = run_id
        self._wandb_dir = None if wandb_dir is None else os.fspath(wandb_dir)
        self._mode = mode
        self._resume = resume
        self._log_images = log_images
        self._log_histograms = log_histograms
        self._init_kwargs = init_kwargs
        self._run: Any = None
        self._run_file: str | None = None
        self._pending: dict[str, Any] = {}
        self._pending_step = 0

    @property
    def run(self) -> Any:
        """The ``wandb`` run, while training (None before and after)."""
        return self._run

    @property
    def run_id(self) -> str | None:
        """The id of the W&B run logged into (once training started)."""
        return self._run_id

    @property
    def run_file(self) -> str | None:
        """The file in the log directory that holds the run id (once training started; None
        without a log directory)."""
        return self._run_file

    def _hooks_turned_off(self) -> list[str]:
        return [hook for hook, on in (("process_image", self._log_images), ("process_summary", self._log_histograms))
                if not on]

    # ------------------------------------------------------------------ hooks
    def _before_train(self) -> None:
        import wandb

        logdir = logger.get_logger_dir()
        self._run_file = os.path.join(logdir, self.RUN_FILE) if logdir else None
        run_id, continued = self._run_id, False
        if run_id is None and self._resume and self._run_file is not None:
            run_id = self._recorded_run_id(self._run_file)
            continued = run_id is not None
        if run_id is None:
            run_id = _new_run_id()
        wandb_dir = self._wandb_dir
        if wandb_dir is None and not os.environ.get("WANDB_DIR") and logdir:
            wandb_dir = logdir
        if wandb_dir is not None:
            os.makedirs(wandb_dir, exist_ok=True)
        kwargs = dict(self._init_kwargs)
        if "settings" not in kwargs and not os.environ.get("WANDB_CONSOLE"):
            kwargs["settings"] = wandb.Settings(console="off")
        run = wandb.init(project=self._project, entity=self._entity, name=self._name, group=self._group,
                         tags=self._tags, notes=self._notes, config=self._config, dir=wandb_dir, mode=self._mode,
                         id=run_id, resume="allow", reinit="create_new", **kwargs)
        self._run, self._run_id = run, run.id
        self._pending, self._pending_step = {}, self.trainer.global_step
        disabled = bool(getattr(run, "disabled", False))
        if self._run_file is not None and not disabled:
            atomic_write_text(self._run_file, json.dumps(
                {"run_id": run.id, "project": run.project or None, "entity": run.entity or None}, indent=1) + "\n")
        where = f"project {run.project!r}" if run.project else "W&B's default project"
        verb = "continuing" if continued else "logging to"
        logger.info(f"WandbMonitor: {verb} W&B run {run.id} ({where}, mode {run.settings.mode})"
                    + (f"; its id is kept in {self._run_file}" if self._run_file and not disabled else ""))
        if self._run_file is None and not disabled:
            logger.warning("WandbMonitor: there is no logger directory (logger.set_logger_dir), so the run id is "
                           f"not kept: a resumed training starts a new W&B run unless given run_id={run.id!r}")
        gs = self.trainer.global_step
        if isinstance(run.step, int) and run.step > gs + 1:
            logger.warning(f"WandbMonitor: the W&B run {run.id} already has data up to step {run.step - 1}, and this "
                           f"training starts at global_step {gs} (from an older checkpoint?); W&B drops what is logged "
                           f"at steps below {run.step}.")

    def process_scalar(self, name: str, val: Any) -> None:
        self._put(name, val)

    def process_image(self, name: str, val: Any) -> None:
        import wandb

        images = [wandb.Image(_to_uint8_image(img)) for img in val]
        self._put(name, images[0] if len(images) == 1 else images)

    def process_summary(self, summary: Any) -> None:
        for v in summary.value:
            kind = v.WhichOneof("value")
            if kind == "histo":
                hist = _histogram_from_histo(v.histo)
            elif kind == "tensor" and v.metadata.plugin_data.plugin_name == "histograms":
                hist = _histogram_from_tensor(v.tensor)
            else:  # scalars and images reach process_scalar / process_image
                continue
            if hist is None:
                logger.debug(f"WandbMonitor: the histogram {v.tag!r} is empty or has no finite range; not logged")
                continue
            import wandb

            self._put(v.tag, wandb.Histogram(np_histogram=hist))

    def _trigger(self) -> None:
        self._flush()

    def _after_train(self) -> None:
        run = self._run
        if run is None:
            return
        failed = sys.exc_info()[0] is not None  # after_train runs while a training error propagates
        self._run = None
        try:
            self._flush(run)
        finally:
            run.finish(exit_code=1 if failed else 0)

    # ------------------------------------------------------------------ internals
    def _put(self, key: str, value: Any) -> None:
        step = self.trainer.global_step
        if step != self._pending_step:
            self._flush()
            self._pending_step = step
        self._pending[key] = value

    def _flush(self, run: Any = None) -> None:
        run = run if run is not None else self._run
        data, self._pending = self._pending, {}
        if data and run is not None:
            run.log(data, step=self._pending_step)

    def _recorded_run_id(self, path: str) -> str | None:
        """The run id kept in ``path`` by an earlier training, or None (no file, or a run of
        another project/entity than this monitor's)."""
        try:
            with open(path, encoding="utf-8") as f:
                rec = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise RuntimeError(f"WandbMonitor: cannot read the W&B run id kept in {path} ({type(e).__name__}: {e}); "
                               "delete the file to start a new run, or pass run_id=... to continue a known one") from e
        run_id = rec.get("run_id") if isinstance(rec, dict) else None
        if not isinstance(run_id, str) or not run_id:
            raise RuntimeError(f"WandbMonitor: {path} holds no W&B run id (expected {{\"run_id\": \"...\"}}); delete "
                               "the file to start a new run, or pass run_id=... to continue a known one")
        for label, mine in (("project", self._project), ("entity", self._entity)):
            theirs = rec.get(label)
            if mine is not None and theirs and theirs != mine:
                logger.warning(f"WandbMonitor: the log directory's W&B run {run_id} belongs to {label} {theirs!r}, "
                               f"not {mine!r}: starting a new run (its id replaces the old one in {path})")
                return None
        return run_id

    def __str__(self) -> str:
        return "WandbMonitor"
