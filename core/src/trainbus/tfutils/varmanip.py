"""Read, write and assign variables: checkpoints, ``.npz`` parameter files, sessions."""

from __future__ import annotations

import io
import os
import re
import zipfile
from typing import Any, Iterable, Mapping

import numpy as np
import tensorflow as tf

from trainbus.tfutils.common import get_op_tensor_name
from trainbus.utils import logger
from trainbus.utils.fs import atomic_write_bytes

tf1 = tf.compat.v1

__all__ = ["SessionUpdate", "dump_session_params", "load_checkpoint_vars", "save_checkpoint_vars",
           "get_checkpoint_path", "get_all_checkpoints", "get_savename_from_varname", "is_training_name",
           "load_chkpt_vars", "save_chkpt_vars", "make_saver"]


def make_saver(var_list: Any = None, **kwargs: Any) -> Any:
    """``tf.compat.v1.train.Saver(var_list, **kwargs)``, the same graph built faster: where
    every variable is a plain resource variable, its restore ops (two per variable) are added
    as one imported GraphDef instead of through TensorFlow's op constructors (about a third of
    the time: 0.1 s less per 200 variables on the development machine). Anywhere else, or when
    ``kwargs`` gives a ``builder`` or a ``saver_def``, it is TensorFlow's own Saver as built by
    TensorFlow. ``ModelSaver`` and ``SaverRestore`` make theirs with it."""
    from trainbus.tfutils import _saver_graph

    return _saver_graph.make_saver(var_list, **kwargs)


def get_savename_from_varname(varname: str, varname_prefix: str | None = None,
                              savename_prefix: str | None = None) -> str:
    """The name under which variable ``varname`` is (or would be) saved in a checkpoint.

    :param varname: a variable name (``"a/b"`` or ``"a/b:0"``).
    :param varname_prefix: removed (with its ``/``) from the front of ``varname`` if there.
    :param savename_prefix: added (with a ``/``) in front of the result.
    """
    name = get_op_tensor_name(varname)[0]
    if varname_prefix:
        p = varname_prefix.rstrip("/") + "/"
        if name.startswith(p):
            name = name[len(p):]
    if savename_prefix:
        name = savename_prefix.rstrip("/") + "/" + name
    return name


_TRAINING_SUFFIXES = ("/Adam", "/Adam_1", "/Momentum", "/Adadelta", "/Adadelta_1", "/RMSProp", "/RMSProp_1",
                      "/Adagrad", "/AccumGrad", "/Ftrl", "/Ftrl_1")


def is_training_name(name: str) -> bool:
    """Guess whether a variable exists only for training (optimizer slots, moving-average
    summaries, gradient accumulators, ...) and is not needed for inference."""
    name = get_op_tensor_name(name)[0]
    if name.endswith(_TRAINING_SUFFIXES):
        return True
    if name.startswith("EMA/") or "/EMA/" in name:
        return True
    if name.startswith("AccumGrad") or name.startswith("apply_gradients"):
        return True
    if re.search(r"(^|/)(beta1_power|beta2_power)(_\d+)?$", name):
        return True
    return False


class SessionUpdate:
    """Assign values to variables of a session without adding ops to the graph (through the
    variables' initializers: ``Variable.load``).

    :param sess: the session.
    :param vars_to_update: the ``tf.Variable`` objects that may be updated.
    :param ignore_mismatch: warn and skip (instead of raising) when a value cannot be loaded.
    """

    def __init__(self, sess: Any, vars_to_update: Iterable[Any], ignore_mismatch: bool = False) -> None:
        self.sess = sess
        self.ignore_mismatch = ignore_mismatch
        self.name_map: dict[str, Any] = {}
        for v in vars_to_update:
            self.name_map.setdefault(v.op.name, v)

    @staticmethod
    def relaxed_value_for_var(value: Any, var: Any, ignore_mismatch: bool = False) -> Any:
        """``value`` made loadable into ``var``: reshaped when only the shape's layout differs
        (same number of elements), up-cast when safe (float32 -> float64, small ints -> larger
        ints). Returns None (with a warning) for a mismatch when ``ignore_mismatch``; raises
        ``ValueError`` otherwise."""
        name = var.op.name
        value = np.asarray(value)
        varshape = tuple(var.shape.as_list())
        if varshape != value.shape:
            if None in varshape or int(np.prod(varshape)) != int(value.size):
                msg = (f"cannot load an array of shape {value.shape} into variable '{name}' of shape {varshape}")
                if ignore_mismatch:
                    logger.warning(msg + "; it is not loaded")
                    return None
                raise ValueError(msg + "; fix the value, or pass ignore_mismatch=True to skip it")
            logger.warning(f"the value for '{name}' is reshaped from {value.shape} to {varshape}")
            value = value.reshape(varshape)
        vartype = var.dtype.base_dtype
        if np.dtype(vartype.as_numpy_dtype) != value.dtype:
            newtype = None
            if vartype == tf.float64 and value.dtype in (np.float32, np.float16):
                newtype = np.float64
            elif vartype == tf.float32 and value.dtype == np.float16:
                newtype = np.float32
            elif vartype in (tf.int64, tf.int32) and value.dtype in (np.int32, np.int16, np.int8, np.uint8, np.uint16):
                newtype = np.int64 if vartype == tf.int64 else (np.int32 if value.dtype != np.int32 else None)
            msg = f"variable '{name}' has dtype {vartype.name} but the value has dtype {value.dtype}"
            if newtype is None:
                if ignore_mismatch:
                    logger.warning(msg + "; it cannot be up-cast and is not loaded")
                    return None
                raise ValueError(msg + "; it cannot be up-cast safely. Cast the value, or pass ignore_mismatch=True to skip it")
            logger.warning(msg + f"; it is cast to {np.dtype(newtype).name}")
            value = value.astype(newtype)
        return value

    def update(self, prms: Mapping[str, Any]) -> list[str]:
        """Load ``{variable op name: value}``; names not in ``vars_to_update`` are an error.
        Returns the names that were loaded."""
        loaded = []
        for name, value in prms.items():
            var = self.name_map.get(get_op_tensor_name(name)[0])
            if var is None:
                raise KeyError(f"SessionUpdate: no variable named {name!r} among the variables to update")
            value = self.relaxed_value_for_var(value, var, self.ignore_mismatch)
            if value is None:
                continue
            var.load(value, self.sess)
            loaded.append(var.op.name)
        return loaded


def dump_session_params(path: str) -> None:
    """Save the values of every TRAINABLE and MODEL variable of the default graph, read from
    the default session, as an ``.npz`` (loadable by ``SmartInit``).

    :param path: the file name; must end with ``.npz``.
    """
    if not str(path).endswith(".npz"):
        raise ValueError(f"dump_session_params: {path!r} must end with .npz")
    sess = tf1.get_default_session()
    if sess is None:
        raise RuntimeError("dump_session_params() must be called under a default session (with sess.as_default())")
    seen: dict[str, Any] = {}
    for v in tf1.trainable_variables() + tf1.get_collection(tf1.GraphKeys.MODEL_VARIABLES):
        seen.setdefault(v.op.name, v)
    names = list(seen)
    values = sess.run([seen[n] for n in names])
    save_checkpoint_vars(dict(zip(names, values)), path)


def get_checkpoint_path(path: str) -> str:
    """Resolve a checkpoint given as a prefix (``model-100``), one of its files
    (``model-100.index``), a ``checkpoint`` state file or a directory, to its prefix.
    Raises ``FileNotFoundError`` naming what was looked at."""
    path = os.path.expanduser(str(path))
    tried = [path]
    if os.path.isdir(path):
        from trainbus.checkpoint import latest_checkpoint

        found = latest_checkpoint(path)[0]
        if found is None:
            raise FileNotFoundError(f"no checkpoint in directory {path!r} (it has no readable 'checkpoint' state file)")
        path = found
    elif os.path.basename(path) == "checkpoint" and os.path.isfile(path):
        from trainbus.checkpoint import latest_checkpoint

        found = latest_checkpoint(os.path.dirname(path) or ".")[0]
        if found is None:
            raise FileNotFoundError(f"the checkpoint state file {path!r} names no existing checkpoint")
        path = found
    else:
        m = re.match(r"^(.*)\.(index|meta|data-\d+-of-\d+)$", path)
        if m and not os.path.isfile(path + ".index"):
            path = m.group(1)
    if not os.path.isfile(path + ".index"):
        tried.append(path + ".index")
        if os.path.isfile(path) and not tf.io.gfile.exists(path + ".index"):
            # a V1 single-file checkpoint
            return path
        raise FileNotFoundError(f"checkpoint {path!r} not found (looked for: {', '.join(dict.fromkeys(tried))})")
    return path


def load_checkpoint_vars(path: str) -> dict[str, np.ndarray]:
    """Every variable of a checkpoint, or of an ``.npz`` parameter file, as ``{name: numpy value}``.

    :param path: a checkpoint (prefix, file, ``checkpoint`` state file or directory), or a file
        whose name ends with ``.npz`` (as written by :func:`save_checkpoint_vars` or
        :func:`dump_session_params`); names lose a ``:0`` suffix.
    """
    path = os.path.expanduser(str(path))
    if path.endswith(".npz"):
        return _load_npz(path)
    reader = tf1.train.NewCheckpointReader(get_checkpoint_path(path))
    return {name: reader.get_tensor(name) for name in sorted(reader.get_variable_to_shape_map())}


def _load_npz(path: str) -> dict[str, np.ndarray]:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load_checkpoint_vars: the parameter file {path!r} does not exist")
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {get_op_tensor_name(k)[0]: npz[k] for k in npz.files}
    except (ValueError, OSError, zipfile.BadZipFile) as e:
        raise ValueError(f"load_checkpoint_vars: {path!r} is not a readable .npz parameter file ({e}); write one "
                         "with save_checkpoint_vars(dict, 'file.npz') or numpy.savez") from e


def _write_npz(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    """A compressed ``.npz`` (what ``numpy.savez_compressed`` writes), written atomically. The
    archive is built here so that any variable name works, also ``file`` (a parameter of
    ``savez_compressed``)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, allowZip64=True) as zf:
        for name, value in arrays.items():
            with zf.open(name + ".npy", "w", force_zip64=True) as f:
                try:
                    np.lib.format.write_array(f, value, allow_pickle=False)
                except ValueError as e:
                    raise TypeError(f"save_checkpoint_vars: value of {name!r} has dtype {value.dtype}, which "
                                    f"cannot be stored in an .npz without pickling ({e})") from None
    atomic_write_bytes(path, buf.getvalue())


def save_checkpoint_vars(dic: Mapping[str, Any], path: str) -> None:
    """Save ``{name: numpy value}`` to ``path``: an ``.npz`` if the name ends with ``.npz``,
    otherwise a TF checkpoint with prefix ``path``. :func:`load_checkpoint_vars` reads both.

    :param dic: ``{name: value}``; names may carry a ``:0`` suffix (removed).
    :param path: the output path.
    """
    if not isinstance(dic, Mapping):
        raise TypeError(f"save_checkpoint_vars needs a dict of {{name: value}}, got {type(dic).__name__}")
    clean = {get_op_tensor_name(k)[0]: np.asarray(v) for k, v in dic.items()}
    path = os.path.expanduser(str(path))
    if path.endswith(".npy"):
        raise ValueError(f"save_checkpoint_vars: {path!r} ends with .npy, which holds one array; name the file "
                         "*.npz for a parameter file, or give a checkpoint prefix")
    logger.info(f"Variables to save to {path}: {', '.join(sorted(clean)) or '(none)'}")
    if path.endswith(".npz"):
        _write_npz(path, clean)
        return
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with tf.Graph().as_default():
        var_list = {}
        feeds = {}
        assigns = []
        for name, value in clean.items():
            try:
                dtype = tf.as_dtype(value.dtype)
            except TypeError:
                raise TypeError(f"save_checkpoint_vars: value of {name!r} has dtype {value.dtype}, which TF cannot hold") from None
            with tf1.name_scope(None):
                v = tf1.get_variable(name, shape=value.shape, dtype=dtype, trainable=False,
                                     initializer=tf1.zeros_initializer())
                ph = tf1.placeholder(dtype, shape=value.shape)
            assigns.append(tf1.assign(v, ph))
            feeds[ph] = value
            var_list[name] = v
        saver = tf1.train.Saver(var_list=var_list)
        with tf1.Session() as sess:
            sess.run(assigns, feed_dict=feeds)
            saver.save(sess, path, write_meta_graph=False, write_state=False)


def get_all_checkpoints(dir: str, prefix: str = "model") -> list[tuple[str, int]]:
    """Every checkpoint ``<dir>/<prefix>-<step>`` in ``dir``, sorted by step.

    :param dir: the checkpoint directory.
    :param prefix: the common prefix of the checkpoints (without the final ``-``).
    :return: ``[(name, step)]``; ``name`` is a prefix ``tf.compat.v1.train.NewCheckpointReader``
        and :func:`load_checkpoint_vars` open.
    """
    if not os.path.isdir(dir):
        raise FileNotFoundError(f"get_all_checkpoints: {dir!r} is not a directory")
    found = []
    for f in os.listdir(dir):
        step = f[len(prefix) + 1: -len(".index")]
        if f.startswith(prefix + "-") and f.endswith(".index") and step.isdigit():
            found.append((os.path.join(dir, f[: -len(".index")]), int(step)))
    return sorted(found, key=lambda x: x[1])


#: tensorpack's older names
load_chkpt_vars = load_checkpoint_vars
save_chkpt_vars = save_checkpoint_vars
