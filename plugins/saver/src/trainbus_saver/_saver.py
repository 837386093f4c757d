"""ModelSaver, MinSaver and MaxSaver: crash-safe checkpoints.

A checkpoint is made visible only when it is complete: ModelSaver writes the data and index
files (``tf.compat.v1.train.Saver`` with ``write_state=False``) and fsyncs them; once every
callback has handled the triggers of that step it writes the callbacks' states beside them and
only then replaces the ``checkpoint`` list atomically (``trainbus.checkpoint``). Old checkpoints
are deleted after the list no longer names them, and only inside the checkpoint directory. A
crash at any point leaves a list that names only readable checkpoints.
"""

from __future__ import annotations

import math
import numbers
import os
import sys
import time
from datetime import datetime
from typing import Any, Sequence

from trainbus import checkpoint as ckpt
from trainbus.callbacks.base import Callback
from trainbus import plugin_api as _tf
from trainbus.utils import logger
from trainbus.utils.fs import atomic_write_bytes, fsync_dir

__all__ = ["ModelSaver", "MinSaver", "MaxSaver"]

#: name of TensorFlow's checkpoint state file
STATE_FILE = ckpt.STATE_FILE
STATE_SUFFIX = ckpt.SUFFIX
_checkpoint_files = ckpt.checkpoint_files
_step_of = ckpt.step_of


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _resolve_dir(given: str | None) -> str | None:
    """The absolute checkpoint directory (``given``, else the log directory), not created:
    constructors only choose, the directory is made when the graph is set up."""
    d = given if given is not None else logger.get_logger_dir()
    if d is None:
        return None
    return os.path.abspath(os.fspath(d))


def _save_errors() -> tuple[type[BaseException], ...]:
    tf = _tf.tf()
    return (OSError, tf.errors.OpError)


class ModelSaver(Callback):
    """Save the model on every trigger (after each epoch by default), and once more when training
    stops (normally, by ``StopTraining`` or a signal) if the last state was not saved yet.

    Checkpoints are ``<checkpoint_dir>/model-<global_step>`` (TF V2 format, readable by
    ``tf.train.load_checkpoint``, ``tf.compat.v1.train.Saver().restore`` and
    ``trainbus.tfutils.sessinit.SaverRestore``), each with ``model-<step>.trainbus.json``
    holding the callbacks' resumable state. ``graph-<time>.meta`` holds the graph (its time is
    when training starts); it is written in a thread from when the first step is prepared, so
    that the first step does not wait for it, and is complete by the end of the first epoch and
    of training. A graph file that cannot be written is an error in the log; training goes on.

    :param max_to_keep: keep at most this many recent checkpoints (0 or None: keep all), as in
        ``tf.train.Saver``.
    :param keep_checkpoint_every_n_hours: additionally keep (do not delete) one checkpoint every
        this many hours, as in ``tf.train.Saver``; "keep" does not mean "create". Kept
        checkpoints stay on disk but leave the ``checkpoint`` state file.
    :param checkpoint_dir: default ``logger.get_logger_dir()``.
    :param var_collections: collection (or list of collections) of the variables to save;
        default ``tf.GraphKeys.GLOBAL_VARIABLES``.
    """

    def __init__(self, max_to_keep: int | None = 10, keep_checkpoint_every_n_hours: float | None = 0.5,
                 checkpoint_dir: str | None = None, var_collections: str | Sequence[str] | None = None) -> None:
        if max_to_keep is not None and (isinstance(max_to_keep, bool) or not isinstance(max_to_keep, numbers.Integral)
                                        or max_to_keep < 0):
            raise ValueError(f"ModelSaver: max_to_keep must be an integer >= 0 (0 or None keeps all), got {max_to_keep!r}")
        if keep_checkpoint_every_n_hours is not None and (
                isinstance(keep_checkpoint_every_n_hours, bool) or not isinstance(keep_checkpoint_every_n_hours, numbers.Real)
                or keep_checkpoint_every_n_hours <= 0):
            raise ValueError("ModelSaver: keep_checkpoint_every_n_hours must be a positive number of hours (or None), "
                             f"got {keep_checkpoint_every_n_hours!r}")
        if var_collections is None:
            var_collections = ["variables"]  # tf.GraphKeys.GLOBAL_VARIABLES
        elif isinstance(var_collections, str):
            var_collections = [var_collections]
        var_collections = list(var_collections)
        if not var_collections or not all(isinstance(c, str) for c in var_collections):
            raise TypeError(f"ModelSaver: var_collections must be a collection name or a list of them, got {var_collections!r}")
        if checkpoint_dir is not None and not isinstance(checkpoint_dir, (str, os.PathLike)):
            raise TypeError(f"ModelSaver: checkpoint_dir must be a directory path, got {checkpoint_dir!r}")
        self._max_to_keep = int(max_to_keep or 0)
        self._keep_hours = float(keep_checkpoint_every_n_hours) if keep_checkpoint_every_n_hours else None
        self.var_collections = var_collections
        self._given_dir = os.fspath(checkpoint_dir) if checkpoint_dir is not None else None
        self.checkpoint_dir = _resolve_dir(self._given_dir)
        self._ckpts: list[tuple[str, float]] = []  # (prefix, time) listed in the state file, oldest first
        self._last_preserved = 0.0
        self._next_keep_time = float("inf")
        self._last_saved_step: int | None = None
        self._start_step: int | None = None
        self._written: str | None = None  # the newest checkpoint saved in this run
        self._graph_file: str | None = None
        self._graph: Any = None  # the graph file's write (trainer.loop.beside_steps), until waited for

    def resolved_dir(self) -> str:
        """The checkpoint directory (the log directory if none was given)."""
        if self.checkpoint_dir is None:
            self.checkpoint_dir = _resolve_dir(self._given_dir)
        if self.checkpoint_dir is None:
            raise RuntimeError("ModelSaver has no checkpoint directory: pass checkpoint_dir=..., or call "
                               "trainbus.utils.logger.set_logger_dir(dir) before training")
        try:
            os.makedirs(self.checkpoint_dir, exist_ok=True)
        except OSError as e:
            raise _unwritable(self.checkpoint_dir, e) from None
        return self.checkpoint_dir

    def _setup_graph(self) -> None:
        from trainbus.tfutils.common import get_global_step_var
        from trainbus.tfutils.varmanip import make_saver

        tf1 = _tf.tf1()
        d = self.resolved_dir()
        _check_writable(d)  # a read-only directory: one clear error now, not a failed save after an epoch
        variables: list[Any] = []
        seen: set[str] = set()
        for key in self.var_collections:
            for v in self.graph.get_collection(key):
                if v.name not in seen:
                    seen.add(v.name)
                    variables.append(v)
        if not variables:
            raise ValueError(f"ModelSaver: the collections {self.var_collections} hold no variables; nothing to save")
        get_global_step_var()
        self.path = os.path.join(d, "model")
        self.saver = make_saver(
            var_list=variables, max_to_keep=self._max_to_keep, keep_checkpoint_every_n_hours=self._keep_hours or 10000.0,
            write_version=tf1.train.SaverDef.V2, save_relative_paths=True)

    def _before_train(self) -> None:
        self._start_step = self.global_step
        self._next_keep_time = time.time() + self._keep_hours * 3600 if self._keep_hours else float("inf")
        self._recover_existing()
        self._graph_file = os.path.join(self.checkpoint_dir,
                                        "graph-{}.meta".format(datetime.now().strftime("%m%d-%H%M%S")))
        self._graph = self.trainer.loop.beside_steps(self._write_graph, name="ModelSaver-graph")

    def latest(self) -> str | None:
        """The newest checkpoint this saver wrote in this run (its list may not name it yet: the
        list is written once every callback handled the step's triggers), else the newest its
        directory lists; None if there is none (``trainbus.checkpoint.CheckpointWriter``)."""
        if self._written is not None:
            return self._written
        if self.checkpoint_dir is None:
            return None
        return ckpt.latest_checkpoint(self.checkpoint_dir)[0]

    def _write_graph(self) -> None:
        """Write the graph file (the graph is finalized)."""
        with self.graph.as_default():  # the default graph (and graph mode) are per thread
            meta = self.saver.export_meta_graph(collection_list=self.graph.get_all_collection_keys())
        atomic_write_bytes(self._graph_file, meta.SerializeToString())

    def _graph_written(self) -> None:
        """Wait for the graph file (written now if no step was prepared); a failed write is one
        error line: the graph file is a convenience, checkpoints do not need it."""
        work, self._graph = self._graph, None
        error = work.wait() if work is not None else None
        if error is not None:
            ckpt.report_write_failure("ModelSaver", self._graph_file, error,
                                      "checkpoints do not need it; training goes on")

    def _recover_existing(self) -> None:
        """Continue the bookkeeping of checkpoints an earlier run left in this directory (only
        those inside it: an entry naming another directory is left alone)."""
        try:
            listing = ckpt.read_listing(self.checkpoint_dir)
        except ckpt.DamagedCheckpointError as e:
            logger.warning(f"ModelSaver: {e} It is replaced by this run's list at the first save.")
            return
        if listing is None:
            return
        now = time.time()
        for e in listing.entries:
            if os.path.isfile(e.prefix + ".index"):
                self._ckpts.append((e.prefix, e.timestamp if e.timestamp is not None else now))
        self._last_preserved = listing.last_preserved
        ahead = [p for p, _ in self._ckpts if (_step_of(p) or 0) > self.global_step]
        if ahead:
            logger.warning(f"ModelSaver: {self.checkpoint_dir} holds checkpoint(s) from later global steps than this "
                           f"run starts at ({self.global_step}): {', '.join(os.path.basename(p) for p in ahead)}. "
                           "They are not rotated away; resume with AutoResumeTrainConfig to continue from them.")

    def _trigger(self) -> None:
        self._graph_written()
        self._save()

    def _after_train(self) -> None:
        try:
            self._final_save()
        finally:  # after the final checkpoint: an interrupt while waiting for the graph file costs no checkpoint
            self._graph_written()

    def _final_save(self) -> None:
        exc = sys.exc_info()[1]
        if exc is not None and not isinstance(exc, KeyboardInterrupt):
            logger.info(f"ModelSaver: training failed ({type(exc).__name__}); no final checkpoint is written.")
            return
        if self._start_step is None or getattr(self, "saver", None) is None:
            return  # training never started
        if self.global_step == self._last_saved_step or self.global_step == self._start_step:
            return
        self._save()

    def _save(self) -> str | None:
        """Write the checkpoint of this global step; it is listed (with the callbacks' states)
        once every callback handled this step's triggers (``trainbus.checkpoint.defer_commit``)."""
        step = self.global_step
        target = f"{self.path}-{step}"
        try:
            path = self.saver.save(self.trainer.sess, self.path, global_step=step, write_meta_graph=False,
                                   write_state=False)
            for f in _checkpoint_files(path):
                _fsync_file(f)
            fsync_dir(self.checkpoint_dir)
        except _save_errors() as e:
            self._discard(target)
            self._report(step, target, e)
            return None
        self._written = path
        self._last_saved_step = step
        ckpt.defer_commit(self.trainer, lambda states: self._commit(path, step, states))
        return path

    def _discard(self, target: str) -> None:
        """Remove a new checkpoint's files that the list does not name (a partial or unlisted
        save): it must never look usable."""
        if all(p != target for p, _ in self._ckpts):
            for f in _checkpoint_files(target) + [target + STATE_SUFFIX]:
                _remove(f)
        if self._written == target:
            self._written = None

    def _report(self, step: int, target: str, e: BaseException) -> None:
        kept = (f"the checkpoint list still names {os.path.basename(self._ckpts[-1][0])} as the latest, which "
                "stays usable" if self._ckpts else "no earlier checkpoint of this run exists yet")
        ckpt.report_write_failure(
            "ModelSaver", target, e,
            f"its partial files were removed and {kept}; training goes on and the next save tries again "
            "(free space on that disk, or fix its permissions)", action=f"save the checkpoint of global_step {step} to")

    def _commit(self, path: str, step: int, states: dict[str, Any]) -> None:
        """Write the callback states of ``path``, then the list naming it; delete rotated ones."""
        before = (list(self._ckpts), self._last_preserved, self._next_keep_time)
        try:
            ckpt.write_callback_states(path, states)
            to_delete = self._record(path)
            ckpt.write_listing(self.checkpoint_dir, self._ckpts, self._last_preserved)
        except _save_errors() as e:
            self._ckpts, self._last_preserved, self._next_keep_time = before
            self._discard(path)
            self._report(step, path, e)
            return
        ckpt.write_succeeded("ModelSaver", path)
        for old in to_delete:
            ckpt.remove_checkpoint(self.checkpoint_dir, old, "ModelSaver")
        logger.info(f"Model saved to {path}.")

    def save_as(self, prefix: str) -> None:
        """Save the current variables as the checkpoint ``prefix`` (a file name in the checkpoint
        directory), replacing one there so that a reader sees the old or the new checkpoint:
        written under a temporary name, the index renamed into place last. Raises ``OSError`` or
        TensorFlow's error when the disk fails; the temporary files are removed then."""
        d = os.path.dirname(prefix)
        tmp = os.path.join(d, f".{os.path.basename(prefix)}.tmp-save")
        try:
            self.saver.save(self.trainer.sess, tmp, write_meta_graph=False, write_state=False)
            for f in _checkpoint_files(tmp):
                _fsync_file(f)
            _replace_checkpoint(tmp, prefix)
        finally:
            for f in _checkpoint_files(tmp):
                _remove(f)

    def _record(self, path: str) -> list[str]:
        """Add ``path`` to the checkpoints of the state file; return those to delete."""
        now = time.time()
        # the list may name this very checkpoint under another spelling (an absolute path through
        # another link to the directory, "./model-4"): compare the files, or rotation deletes them
        here = os.path.realpath(path)
        self._ckpts = [(p, t) for p, t in self._ckpts if os.path.realpath(p) != here] + [(path, now)]
        if not self._max_to_keep:  # keep everything; the state file names the latest only (as tf.train.Saver)
            self._ckpts = [(path, now)]
            return []
        to_delete = []
        new_step = _step_of(path)
        while len(self._ckpts) > self._max_to_keep:
            p, t = self._ckpts.pop(0)
            if t > self._next_keep_time:  # keep_checkpoint_every_n_hours: leave it on disk
                self._next_keep_time += self._keep_hours * 3600
                self._last_preserved = t
                continue
            old_step = _step_of(p)
            if old_step is not None and new_step is not None and old_step > new_step:
                # an earlier run got further than this one: its checkpoint is never rotated away
                logger.warning(f"ModelSaver: {p} is from a later global step ({old_step}) than this run's newest "
                               f"checkpoint ({new_step}); it stays on disk and only leaves the checkpoint list. "
                               "Resume with AutoResumeTrainConfig to continue from it, or delete it by hand.")
                continue
            to_delete.append(p)
        return to_delete

    def __str__(self) -> str:
        return "ModelSaver"


def _unwritable(d: str, e: OSError) -> OSError:
    return OSError(e.errno, f"ModelSaver: cannot write checkpoints to {d}: {e.strerror or e}. Give a writable "
                   "checkpoint_dir= (or log directory); nothing in that directory was changed")


def _check_writable(d: str) -> None:
    """Raise a clear ``OSError`` unless a file can be created in ``d`` (a read-only file system,
    a directory without write permission)."""
    import tempfile

    try:
        fd, probe = tempfile.mkstemp(prefix=".trainbus-write-check-", dir=d)
    except OSError as e:
        raise _unwritable(d, e) from None
    os.close(fd)
    os.remove(probe)


class MinSaver(Callback):
    """Keep a copy of the checkpoint with the minimum (``reverse=True``: maximum) value of a
    statistic.

    After each trigger, if the latest value of ``monitor_stat`` in the monitors is the best so
    far, the latest checkpoint of ``checkpoint_dir`` (written by a ``ModelSaver``) is copied to
    ``<checkpoint_dir>/<filename>`` (``.index`` and ``.data-*`` files). Load it like any
    checkpoint, e.g. ``SaverRestore('<dir>/min-val-error.tfmodel')``.

    A ``ModelSaver`` writing to the same directory must come earlier in the callbacks list, and
    so must the callback producing the statistic (e.g. ``InferenceRunner``).

    :param monitor_stat: the statistic's name.
    :param reverse: keep the maximum instead of the minimum.
    :param filename: default ``min-{monitor_stat}.tfmodel`` (``max-...`` with ``reverse``).
    :param checkpoint_dir: default ``logger.get_logger_dir()``.

    Example (save the model with the minimum validation error to ``min-val-error.tfmodel``)::

        MinSaver('val-error')
    """

    def __init__(self, monitor_stat: str, reverse: bool = False, filename: str | None = None,
                 checkpoint_dir: str | None = None) -> None:
        if not isinstance(monitor_stat, str) or not monitor_stat:
            raise TypeError(f"{type(self).__name__}: monitor_stat must be a statistic's name, got {monitor_stat!r}")
        if filename is not None and (not isinstance(filename, str) or not filename or os.sep in filename):
            raise ValueError(f"{type(self).__name__}: filename must be a plain file name inside checkpoint_dir, got {filename!r}")
        self.monitor_stat = monitor_stat
        self.reverse = bool(reverse)
        self._given_filename = filename
        self.filename = filename or "{}-{}.tfmodel".format("max" if self.reverse else "min", monitor_stat)
        self._given_dir = os.fspath(checkpoint_dir) if checkpoint_dir is not None else None
        self.checkpoint_dir = _resolve_dir(self._given_dir)
        self.best: tuple[int, float] | None = None
        self._writer: Any = None  # the ModelSaver writing to checkpoint_dir
        self._warned_nonfinite: int | None = None

    def _setup_graph(self) -> None:
        if self.checkpoint_dir is None:
            self.checkpoint_dir = _resolve_dir(self._given_dir)
        if self.checkpoint_dir is None:
            raise RuntimeError(f"{type(self).__name__} has no checkpoint directory: pass checkpoint_dir=..., or call "
                               "trainbus.utils.logger.set_logger_dir(dir) before training")
        os.makedirs(self.checkpoint_dir, exist_ok=True)
        self._check_model_saver()

    def _check_model_saver(self) -> None:
        pm = self.trainer.plugin_manager
        members = pm.ordered if pm is not None else list(getattr(self.trainer, "_callbacks", []))
        mine = os.path.realpath(self.checkpoint_dir)
        others = []
        for m in members:
            inside = list(ckpt.callback_members(m))
            if any(x is self for x in inside):
                break
            for x in inside:
                if isinstance(x, ModelSaver):
                    d = os.path.realpath(x.resolved_dir())
                    if d == mine:
                        self._writer = x
                        return
                    others.append(d)
        where = f" (ModelSavers found earlier write to {sorted(set(others))})" if others else ""
        raise ValueError(
            f"{type(self).__name__}('{self.monitor_stat}') copies checkpoints written by a ModelSaver to "
            f"{self.checkpoint_dir}, but no ModelSaver with that checkpoint_dir comes before it in the callbacks{where}. "
            "Put ModelSaver(...) earlier in the list, with the same checkpoint_dir.")

    def _improved(self, val: float) -> bool:
        if self.best is None:
            return True
        return val > self.best[1] if self.reverse else val < self.best[1]

    def _trigger(self) -> None:
        try:
            step, val = self.trainer.monitors.get_history(self.monitor_stat)[-1]
        except (KeyError, IndexError):
            logger.warning(f"[{type(self).__name__}] no value of '{self.monitor_stat}' in the monitors yet; "
                           "is the callback producing it placed before this one?")
            return
        step = int(step)
        try:
            val = float(val)
        except (TypeError, ValueError):
            logger.warning(f"[{type(self).__name__}] '{self.monitor_stat}' at global_step {step} is {val!r}, not a "
                           "number; it is not a candidate for the best model")
            return
        if not math.isfinite(val):
            if step != self._warned_nonfinite:
                self._warned_nonfinite = step
                logger.warning(f"[{type(self).__name__}] '{self.monitor_stat}' is {val} at global_step {step}; a value "
                               "that is not finite never counts as the best (the kept model stays)")
            return
        if self.best is not None and step == self.best[0]:
            return  # this measurement was handled already
        if self._improved(val):
            self._save(step, val)

    def _save(self, step: int, val: float) -> None:
        """Keep the model measured at ``step`` as ``filename``: a copy of the checkpoint of that
        step, or, when none was written but the weights are still those of that step, the
        weights themselves. When neither exists, warn and keep the previous best (``best`` stays
        the value of the model on disk). A failed write is logged; training goes on."""
        dst = os.path.join(self.checkpoint_dir, self.filename)
        writer = self._writer
        src = writer.latest() if writer is not None else ckpt.latest_checkpoint(self.checkpoint_dir)[0]
        name = type(self).__name__
        try:
            if src is not None and _step_of(src) == step and os.path.isfile(src + ".index"):
                _copy_checkpoint(src, dst)
            elif step == self.global_step and writer is not None and getattr(writer, "saver", None) is not None:
                writer.save_as(dst)
            else:
                newest = f"the newest checkpoint is {os.path.basename(src)}" if src else "no checkpoint exists"
                logger.warning(f"[{name}] the model measured at global_step {step} ({self.monitor_stat}={val:.5g}) "
                               f"cannot be saved: {newest} and the weights have changed since. The previous best "
                               f"{'(' + str(self.best[1]) + ')' if self.best else ''} stays kept; trigger the "
                               "ModelSaver at least as often as this callback.")
                return
        except _save_errors() as e:
            ckpt.report_write_failure(name, dst, e, "the previous best model stays kept; training goes on")
            return
        ckpt.write_succeeded(name, dst)
        self.best = (step, val)
        logger.info(f"Model at global_step={step} with {self.monitor_stat}={val:.5g} saved to {dst}.")

    def _state_key_args(self) -> tuple:
        # the statistic, plus the direction when it is not the class's own and a file name given by the user
        args: tuple = (self.monitor_stat,)
        if self.reverse != isinstance(self, MaxSaver):
            args += ("max" if self.reverse else "min",)
        if self._given_filename is not None:
            args += (self._given_filename,)
        return args

    def _state_dict(self) -> dict | None:
        if self.best is None:
            return None
        return {"best_step": self.best[0], "best_value": self.best[1]}

    def _load_state_dict(self, state: dict) -> None:
        if "best_value" not in state:
            return
        try:
            value = float(state["best_value"])
        except (TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value):  # saved by an earlier version that let NaN be the best
            logger.warning(f"[{type(self).__name__}] the saved best '{self.monitor_stat}' is {state['best_value']!r}, "
                           "not a finite number; it is ignored and the next finite value becomes the best")
            return
        self.best = (int(state.get("best_step", 0)), value)

    def __str__(self) -> str:
        return f"{type(self).__name__}({self.monitor_stat})"


def _copy_checkpoint(src: str, dst: str) -> None:
    """Copy checkpoint ``src`` to prefix ``dst`` (see :func:`_replace_checkpoint`): the files are
    copied under temporary names first, which are removed when a copy fails (full disk)."""
    d = os.path.dirname(dst)
    tmp = os.path.join(d, f".{os.path.basename(dst)}.tmp-copy")
    made = []
    try:
        for f in _checkpoint_files(src):
            target = tmp + f[len(src):]
            made.append(target)
            with open(f, "rb") as fin, open(target, "wb") as fout:
                while True:
                    chunk = fin.read(1 << 22)
                    if not chunk:
                        break
                    fout.write(chunk)
                fout.flush()
                os.fsync(fout.fileno())
        _replace_checkpoint(tmp, dst)
    finally:
        for f in made:
            _remove(f)


def _replace_checkpoint(tmp: str, dst: str) -> None:
    """Move the complete checkpoint ``tmp`` to ``dst`` (same directory) so that a reader sees
    either no ``dst`` checkpoint or a whole one: the old index goes first, the new index last."""
    d = os.path.dirname(dst)
    files = _checkpoint_files(tmp)
    if not any(f.endswith(".index") for f in files):
        raise FileNotFoundError(f"{tmp}.index was not written")
    renames = [(f, dst + f[len(tmp):]) for f in files]  # the index is last
    if os.path.exists(dst + ".index"):
        os.remove(dst + ".index")
        fsync_dir(d)
    new_targets = {t for _, t in renames}
    for old in _checkpoint_files(dst):
        if old not in new_targets:
            _remove(old)
    for f, target in renames:
        os.replace(f, target)
    fsync_dir(d)


class MaxSaver(MinSaver):
    """Keep a copy of the checkpoint with the maximum value of a statistic, as
    ``max-{monitor_stat}.tfmodel``; see :class:`MinSaver`.

    :param monitor_stat: the statistic's name.
    :param filename: default ``max-{monitor_stat}.tfmodel``.
    :param checkpoint_dir: default ``logger.get_logger_dir()``.
    """

    def __init__(self, monitor_stat: str, filename: str | None = None, checkpoint_dir: str | None = None) -> None:
        super().__init__(monitor_stat, reverse=True, filename=filename, checkpoint_dir=checkpoint_dir)
