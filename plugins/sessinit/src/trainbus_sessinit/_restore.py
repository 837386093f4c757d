"""Restore variables from TF checkpoints and from ``{name: value}`` dicts."""

from __future__ import annotations

import os
from typing import Any, Iterable, Mapping

import numpy as np
import tensorflow as tf

from trainbus.tfutils.common import get_op_tensor_name
from trainbus.tfutils.sessinit import SessionInit
from trainbus.tfutils.varmanip import SessionUpdate, is_training_name, make_saver
from trainbus.utils import logger
from trainbus.checkpoint import DamagedCheckpointError
from trainbus_sessinit._verify import explain_restore_error, resolve_checkpoint, verify_checkpoint

tf1 = tf.compat.v1

__all__ = ["SaverRestore", "SaverRestoreRelaxed", "DictRestore", "DamagedCheckpointError"]


def _graph_variables() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for v in tf1.global_variables() + tf1.local_variables() + tf1.get_collection(tf1.GraphKeys.MODEL_VARIABLES):
        out.setdefault(v.op.name, v)
    return out


def _log_unmatched(kind_a: str, kind_b: str, names: Iterable[str]) -> None:
    names = sorted(n for n in names if not is_training_name(n))
    if names:
        logger.warning(f"{len(names)} variable(s) in the {kind_a} are not found in the {kind_b}: {', '.join(names)}")


class SaverRestore(SessionInit):
    """Restore a TF checkpoint written by ``tf.compat.v1.train.Saver`` or ``ModelSaver``.

    :param model_path: a checkpoint prefix (``.../model-1000``), one of its files, a
        ``checkpoint`` state file, or a directory with one (its latest checkpoint is used).
    :param prefix: during restore, the checkpoint's variable ``name`` goes to the graph's
        variable ``prefix/name`` (only graph variables under ``prefix/`` are restored).
    :param ignore: names (checkpoint or graph names, with or without ``:0``) not to load,
        e.g. ``['learning_rate']``.

    ``self.path`` and ``self.checkpoint_path`` hold the resolved checkpoint prefix; the trainer
    restores the callbacks' state saved next to it.

    A damaged checkpoint (index, data shard or callback-state file missing, truncated or failing
    its checksum; a ``checkpoint`` list naming a missing checkpoint) raises one
    ``DamagedCheckpointError`` naming the file and what is wrong, before or while restoring.
    """

    def __init__(self, model_path: str, prefix: str | None = None, ignore: Iterable[str] = ()) -> None:
        if not isinstance(model_path, (str, os.PathLike)):
            raise TypeError(f"{type(self).__name__}(model_path=...) needs a path, got {model_path!r}")
        self.path = resolve_checkpoint(os.fspath(model_path))
        self.checkpoint_path = self.path
        if prefix is not None and not isinstance(prefix, str):
            raise TypeError(f"{type(self).__name__}(prefix=...) needs a string, got {prefix!r}")
        self.prefix = prefix.strip("/") if prefix else None
        if isinstance(ignore, str):
            ignore = [ignore]
        self.ignore = {get_op_tensor_name(x)[0] for x in ignore}
        self._saver: Any = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"

    def verify(self, read_data: bool = True) -> None:
        """Raise ``DamagedCheckpointError`` unless the checkpoint reads completely (every tensor,
        with its checksum, and the callback-state file); ``read_data=False`` checks only the
        index and that every data file is there."""
        verify_checkpoint(self.path, read_data=read_data)

    def _damaged(self, e: BaseException) -> BaseException | None:
        """The error to raise for a restore that failed with ``e``: a ``DamagedCheckpointError`` if
        the files are damaged (found by reading them all), else None (``e`` stands)."""
        err = explain_restore_error(self.path, e)
        if err is not None:
            return err
        try:
            self.verify()
        except DamagedCheckpointError as found:
            return found
        return None

    def _ckpt_name_of(self, var_name: str) -> str | None:
        if not self.prefix:
            return var_name
        p = self.prefix + "/"
        return var_name[len(p):] if var_name.startswith(p) else None

    def _match_vars(self) -> tuple[Any, list[tuple[str, Any]]]:
        """``(reader, [(checkpoint name, graph variable)])`` and log what does not match."""
        reader = tf1.train.NewCheckpointReader(self.path)
        ckpt_shapes = reader.get_variable_to_shape_map()
        pairs = []
        used: set[str] = set()
        missing = []
        for vname, var in _graph_variables().items():
            cname = self._ckpt_name_of(vname)
            if cname is None:
                continue
            if cname in self.ignore or vname in self.ignore:
                if cname in ckpt_shapes:
                    logger.info(f"variable {vname} in the graph is not loaded from the checkpoint (ignored)")
                    used.add(cname)
                continue
            if cname in ckpt_shapes:
                pairs.append((cname, var))
                used.add(cname)
            else:
                missing.append(vname)
        _log_unmatched("graph", f"checkpoint {self.path}", missing)
        _log_unmatched(f"checkpoint {self.path}", "graph",
                       [(self.prefix + "/" + n if self.prefix else n) for n in ckpt_shapes if n not in used])
        return reader, pairs

    def _setup_graph(self) -> None:
        self.verify(read_data=False)  # a damaged index or a missing file: one clear error before any graph work
        reader, pairs = self._match_vars()
        shapes = reader.get_variable_to_shape_map()
        dtypes = reader.get_variable_to_dtype_map()
        bad = []
        for cname, var in pairs:
            vshape = var.shape.as_list()
            if list(shapes[cname]) != vshape:
                bad.append(f"{var.op.name}: graph shape {vshape}, checkpoint shape {list(shapes[cname])}")
            elif dtypes[cname].base_dtype != var.dtype.base_dtype:
                bad.append(f"{var.op.name}: graph dtype {var.dtype.base_dtype.name}, checkpoint dtype {dtypes[cname].name}")
        if bad:
            raise ValueError(
                f"{type(self).__name__}: checkpoint {self.path} does not fit the graph:\n  " + "\n  ".join(bad)
                + "\nUse SaverRestoreRelaxed (or SmartInit(..., ignore_mismatch=True)) to reshape/up-cast or skip "
                "them, or ignore=[...] to leave them out")
        if pairs:
            self._saver = make_saver(var_list={c: v for c, v in pairs}, allow_empty=True,
                                     name="restore_" + type(self).__name__)
        else:
            logger.warning(f"{type(self).__name__}: no variable of the graph is in checkpoint {self.path}")

    def _run_init(self, sess: Any) -> None:
        logger.info(f"Restoring checkpoint from {self.path} ...")
        if self._saver is not None:
            try:
                self._saver.restore(sess, self.path)
            except Exception as e:  # noqa: BLE001 - reported as what is damaged when it is the files
                err = self._damaged(e)
                if err is None:
                    raise
                raise err from None


class SaverRestoreRelaxed(SaverRestore):
    """Like :class:`SaverRestore`, but forgiving: values are up-cast (e.g. float32 to
    float64) or reshaped (same number of elements) when needed, and a value that still does
    not fit is skipped with a warning. Adds no ops to the graph (values are assigned
    through the variables' initializers)."""

    def _setup_graph(self) -> None:
        self.verify(read_data=False)  # no ops: everything else happens in _run_init

    def _run_init(self, sess: Any) -> None:
        logger.info(f"Restoring checkpoint (relaxed) from {self.path} ...")
        with sess.graph.as_default():
            reader, pairs = self._match_vars()
        try:
            values = {v.op.name: reader.get_tensor(c) for c, v in pairs}
        except Exception as e:  # noqa: BLE001 - reported as what is damaged when it is the files
            err = self._damaged(e)
            if err is None:
                raise
            raise err from None
        upd = SessionUpdate(sess, [v for _, v in pairs], ignore_mismatch=True)
        upd.update(values)


class DictRestore(SessionInit):
    """Restore variables from a dict ``{name: value}``.

    :param variable_dict: ``{variable name: numpy value}`` (names with or without ``:0``).
    :param ignore_mismatch: when a value does not fit its variable (shape that cannot be fixed
        by a reshape, dtype that cannot be up-cast), warn and skip it instead of raising.
    """

    def __init__(self, variable_dict: Mapping[str, Any], ignore_mismatch: bool = False) -> None:
        if not isinstance(variable_dict, Mapping):
            raise TypeError(f"DictRestore(variable_dict=...) needs a dict {{name: value}}, got {type(variable_dict).__name__}")
        prms = {}
        for k, v in variable_dict.items():
            if not isinstance(k, str):
                raise TypeError(f"DictRestore: key {k!r} is not a variable name (str)")
            prms[get_op_tensor_name(k)[0]] = v
        self._prms = prms
        self._ignore_mismatch = bool(ignore_mismatch)
        self.source = "dict"
        self._values: dict[str, Any] | None = None

    @classmethod
    def from_npz(cls, path: str, ignore_mismatch: bool = False) -> DictRestore:
        """A DictRestore of the arrays of an ``.npz`` file."""
        with np.load(path) as f:
            d = {k: f[k] for k in f.files}
        self = cls(d, ignore_mismatch=ignore_mismatch)
        self.source = path
        return self

    def __repr__(self) -> str:
        return f"DictRestore({self.source if self.source != 'dict' else f'<{len(self._prms)} values>'})"

    def _prepare(self) -> dict[str, Any]:
        gvars = _graph_variables()
        _log_unmatched("graph", f"dict ({self.source})", [n for n in gvars if n not in self._prms])
        _log_unmatched(f"dict ({self.source})", "graph", [n for n in self._prms if n not in gvars])
        values = {}
        for name, value in self._prms.items():
            var = gvars.get(name)
            if var is None:
                continue
            try:
                fixed = SessionUpdate.relaxed_value_for_var(value, var, self._ignore_mismatch)
            except ValueError as e:
                raise ValueError(f"DictRestore ({self.source}): {e}") from None
            if fixed is not None:
                values[name] = fixed
        return values

    def _setup_graph(self) -> None:
        self._values = self._prepare()  # shape/dtype errors surface before the session exists

    def _run_init(self, sess: Any) -> None:
        with sess.graph.as_default():
            values = self._values if self._values is not None else self._prepare()
            gvars = _graph_variables()
        logger.info(f"Restoring {len(values)} variables from {self.source} ...")
        SessionUpdate(sess, [gvars[n] for n in values]).update(values)
