"""Building blocks shared by the data-parallel trainers: device lists, tower building,
collection freezing, gradient all-reduce and the replicated-variable broadcast."""

from __future__ import annotations

import contextlib
import functools
import math
import re
from typing import Any, Callable, Iterator, Sequence

import tensorflow as tf

from trainbus.tfutils.tower import TrainTowerContext

tf1 = tf.compat.v1

__all__ = ["normalize_devices", "gpus_available", "raw_device_names", "freeze_collections", "tower_freeze_keys",
           "build_on_towers", "allreduce_grads", "average_grads_on_var_device", "replicated_broadcast_op",
           "check_replicated_grads", "check_shared_grads", "VARIABLE_OP_TYPES"]

#: op types that hold a variable (placed by the parameter-server device functions)
VARIABLE_OP_TYPES = frozenset({"Variable", "VariableV2", "AutoReloadVariable", "MutableHashTable",
                               "MutableHashTableV2", "MutableHashTableOfTensors", "MutableHashTableOfTensorsV2",
                               "MutableDenseHashTable", "MutableDenseHashTableV2", "VarHandleOp"})


def _moving_summary_key() -> str:
    try:
        from trainbus.tfutils.summary import MOVING_SUMMARY_OPS_KEY  # type: ignore[attr-defined]

        return MOVING_SUMMARY_OPS_KEY
    except ImportError:
        return "MOVING_SUMMARY_OPS"


def tower_freeze_keys() -> list[str]:
    """Collections whose additions by towers other than the first are discarded."""
    return [tf1.GraphKeys.SUMMARIES, tf1.GraphKeys.UPDATE_OPS, _moving_summary_key()]


def normalize_devices(gpus: Any, who: str) -> list[int]:
    """``gpus`` as a list of distinct non-negative device ids: an int ``n`` means ``0..n-1``."""
    if isinstance(gpus, bool):
        raise TypeError(f"{who}: gpus must be a number of devices or a list of device ids, got {gpus!r}")
    if isinstance(gpus, int):
        if gpus < 1:
            raise ValueError(f"{who}: gpus={gpus} — need at least one device; pass e.g. gpus=2 or gpus=[0, 1]")
        return list(range(gpus))
    if isinstance(gpus, (list, tuple, range)):
        ids = list(gpus)
        if not ids:
            raise ValueError(f"{who}: gpus is an empty list; pass at least one device id, e.g. gpus=[0, 1]")
        for g in ids:
            if isinstance(g, bool) or not isinstance(g, int) or g < 0:
                raise TypeError(f"{who}: every device id in gpus must be a non-negative int, got {g!r} in {ids!r}")
        if len(set(ids)) != len(ids):
            raise ValueError(f"{who}: gpus lists a device twice: {ids!r}; each tower needs its own device")
        return ids
    raise TypeError(f"{who}: gpus must be an int or a list of ints, got {gpus!r} of type {type(gpus).__name__}")


@functools.lru_cache(maxsize=None)
def gpus_available() -> int:
    """How many physical GPUs TensorFlow sees (0 on a CPU-only machine)."""
    try:
        return len(tf.config.list_physical_devices("GPU"))
    except Exception:  # noqa: BLE001 - no GPU runtime at all
        return 0


def raw_device_names(ids: Sequence[int]) -> list[str]:
    """``/gpu:i`` for each id when GPUs exist, else ``/cpu:i`` (logical CPU devices: give the
    session ``ConfigProto(device_count={'CPU': n})``)."""
    kind = "gpu" if gpus_available() > 0 else "cpu"
    return [f"/{kind}:{i}" for i in ids]


@contextlib.contextmanager
def freeze_collections(keys: Sequence[str]) -> Iterator[None]:
    """Within the context, additions to the given graph collections are discarded on exit."""
    g = tf1.get_default_graph()
    saved = {k: list(g.get_collection(k)) for k in keys}
    try:
        yield
    finally:
        for k, items in saved.items():
            ref = g.get_collection_ref(k)
            del ref[:]
            ref.extend(items)


def build_on_towers(devices: Sequence[str], tower_fn: Callable[[], Any], use_vs: Sequence[bool] | None = None,
                    device_fns: Sequence[Any] | None = None) -> list[Any]:
    """Call ``tower_fn`` once per device under ``TrainTowerContext('tower{i}', ...)``.

    :param devices: device names, one per tower.
    :param use_vs: per tower, whether it gets its own variable scope ``tower{i}`` (else it
        shares the variables of the first tower).
    :param device_fns: per tower, an alternative device spec/function for ``tf1.device``.
    :returns: what ``tower_fn`` returned for each tower.
    """
    n = len(devices)
    use_vs = list(use_vs) if use_vs is not None else [False] * n
    out = []
    freeze = tower_freeze_keys()
    for i, dev in enumerate(devices):
        spec = device_fns[i] if device_fns is not None else dev
        vs = f"tower{i}" if use_vs[i] else ""
        frozen = freeze_collections(freeze) if i > 0 else contextlib.nullcontext()
        with frozen, tf1.device(spec), TrainTowerContext(f"tower{i}", vs_name=vs, index=i, total=n):
            out.append(tower_fn())
    return out


def _dense(g: Any) -> Any:
    if isinstance(g, tf.IndexedSlices):
        return tf.convert_to_tensor(g)
    return g


def check_replicated_grads(grad_lists: Sequence[Sequence[tuple[Any, Any]]]) -> None:
    """Every tower must produce gradients for the same variables, in the same order (tower
    ``i`` for the ``tower{i}/`` copy of tower 0's variable)."""
    base = [v.op.name for _, v in grad_lists[0]]
    for i, grads in enumerate(grad_lists[1:], start=1):
        names = [re.sub(r"^tower\d+/", "", v.op.name) for _, v in grads]
        if names != base:
            missing = sorted(set(base) - set(names))
            extra = sorted(set(names) - set(base))
            raise ValueError(
                f"tower {i} has gradients for different variables than tower 0 (missing: {missing}, extra: {extra}); "
                "the tower function must create the same trainable variables in every tower"
            )


def check_shared_grads(grad_lists: Sequence[Sequence[tuple[Any, Any]]]) -> None:
    """Towers sharing variables must produce gradients for the same variable objects."""
    base = [v for _, v in grad_lists[0]]
    for i, grads in enumerate(grad_lists[1:], start=1):
        vs = [v for _, v in grads]
        if len(vs) != len(base) or any(a is not b for a, b in zip(vs, base)):
            raise ValueError(
                f"tower {i} has gradients for {[v.op.name for v in vs]} but tower 0 for {[v.op.name for v in base]}; "
                "towers sharing variables must compute gradients of the same variables"
            )


def allreduce_grads(grad_lists: Sequence[Sequence[tuple[Any, Any]]], devices: Sequence[str], mode: str,
                    average: bool) -> list[list[Any]]:
    """All-reduce the gradients of every tower: returns, per tower, the list of reduced
    gradients (on that tower's device) in the order of its variables.

    ``mode``: ``'nccl'`` (NCCL all-sum, GPU only), ``'cpu'`` (``add_n`` on ``/cpu:0``, then a
    copy to each tower) or ``'hierarchical'`` (sum within groups of towers on each group's
    first device, then across the groups, then back down the same tree).
    """
    n = len(grad_lists)
    nvars = len(grad_lists[0])
    per_tower: list[list[Any]] = [[] for _ in range(n)]
    with tf1.name_scope("AllReduceGrads"):
        for k in range(nvars):
            gs = [_dense(grad_lists[t][k][0]) for t in range(n)]
            if n == 1:
                reduced = [gs[0] * (1.0 / n) if average else gs[0]]
            elif mode == "nccl":
                from tensorflow.python.ops import nccl_ops

                summed = nccl_ops.all_sum(gs)
                reduced = [s * (1.0 / n) if average else s for s in summed]
            elif mode == "cpu":
                with tf1.device("/cpu:0"):
                    s = tf.add_n(gs, name=f"sum_{k}")
                    if average:
                        s = tf.multiply(s, 1.0 / n, name=f"avg_{k}")
                reduced = []
                for t in range(n):
                    with tf1.device(devices[t]):
                        reduced.append(tf.identity(s, name=f"copy_{k}_{t}"))
            elif mode == "hierarchical":
                reduced = _hierarchical(gs, devices, average, k)
            else:
                raise ValueError(f"unknown all-reduce mode {mode!r}")
            for t in range(n):
                per_tower[t].append(reduced[t])
    return per_tower


def _hierarchical(gs: Sequence[Any], devices: Sequence[str], average: bool, k: int) -> list[Any]:
    n = len(gs)
    group = max(1, math.ceil(math.sqrt(n)))
    groups = [list(range(s, min(s + group, n))) for s in range(0, n, group)]
    partial = []
    for gi, members in enumerate(groups):
        with tf1.device(devices[members[0]]):
            partial.append(tf.add_n([gs[t] for t in members], name=f"level1_{k}_{gi}"))
    with tf1.device(devices[groups[0][0]]):
        total = tf.add_n(partial, name=f"level2_{k}")
        if average:
            total = tf.multiply(total, 1.0 / n, name=f"avg_{k}")
    out: list[Any] = [None] * n
    for gi, members in enumerate(groups):
        with tf1.device(devices[members[0]]):
            leader = tf.identity(total, name=f"down1_{k}_{gi}")
        for t in members:
            with tf1.device(devices[t]):
                out[t] = tf.identity(leader, name=f"down2_{k}_{t}")
    return out


def average_grads_on_var_device(grad_lists: Sequence[Sequence[tuple[Any, Any]]], average: bool = True) -> list[tuple[Any, Any]]:
    """Sum (or average) the gradients of towers sharing variables, next to each variable."""
    n = len(grad_lists)
    out = []
    with tf1.name_scope("AggregateGrads"):
        for k, (_, v) in enumerate(grad_lists[0]):
            gs = [_dense(grad_lists[t][k][0]) for t in range(n)]
            with tf1.device(v.device):
                if n == 1:
                    g = gs[0]
                else:
                    g = tf.add_n(gs)
                    if average:
                        g = tf.multiply(g, 1.0 / n)
            out.append((g, v))
    return out


def replicated_broadcast_op(name: str = "sync_variables_from_main_tower") -> Any:
    """One op assigning each ``tower{i}/X`` (i >= 1) global variable from the main copy ``X``."""
    all_vars = tf1.global_variables() + tf1.local_variables()
    by_name = {v.op.name: v for v in all_vars}
    ops = []
    missing = []
    for v in all_vars:
        m = re.match(r"^tower([1-9]\d*)/(.+)$", v.op.name)
        if m is None:
            continue
        main = by_name.get(m.group(2))
        if main is None:
            missing.append(v.op.name)
            continue
        with tf1.device(v.device):
            ops.append(tf1.assign(v, main.read_value() if hasattr(main, "read_value") else main))
    if missing:
        from trainbus.utils import logger

        logger.warning(f"Replicated variables without a main-tower copy are not synchronized: {', '.join(missing)}")
    return tf.group(*ops, name=name)
