"""Building blocks of multi-device graphs: device lists and placement, variables made local,
gradient lists, all-reduce and aggregation of gradients, gradient packing.

Gradient lists follow one convention: ``K`` towers, ``N`` variables. ``grad_list`` is ``K x N``
``(grad, var)`` pairs (what each tower's ``compute_gradients`` returned); ``all_grads`` is
``K x N`` gradient tensors (:func:`split_grad_list` separates the two).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import re
from typing import Any, Callable, Iterator, Sequence

import tensorflow as tf

from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["VARIABLE_OP_TYPES", "normalize_devices", "gpus_available", "raw_device_names", "override_to_local_variable",
           "LeastLoadedDeviceSetter", "OverrideCachingDevice", "split_grad_list", "merge_grad_list", "allreduce_grads",
           "allreduce_grads_naive", "allreduce_grads_hierarchical", "aggregate_grads", "aggregate_grads_colocate",
           "GradientPacker", "check_replicated_grads", "check_shared_grads"]

#: op types that hold a variable (what a device function places on parameter-server devices)
VARIABLE_OP_TYPES = frozenset({"Variable", "VariableV2", "AutoReloadVariable", "MutableHashTable",
                               "MutableHashTableV2", "MutableHashTableOfTensors", "MutableHashTableOfTensorsV2",
                               "MutableDenseHashTable", "MutableDenseHashTableV2", "VarHandleOp"})


def normalize_devices(gpus: Any, who: str) -> list[int]:
    """``gpus`` as a list of distinct non-negative device ids: an int ``n`` means ``0..n-1``.

    :param who: the name to put in error messages (the trainer or builder being made).
    """
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


def _local_collections(kwargs: dict[str, Any]) -> None:
    cols = list(kwargs.get("collections") or [tf1.GraphKeys.GLOBAL_VARIABLES])
    cols = [c for c in cols if c != tf1.GraphKeys.GLOBAL_VARIABLES]
    if tf1.GraphKeys.LOCAL_VARIABLES not in cols:
        cols.append(tf1.GraphKeys.LOCAL_VARIABLES)
    kwargs["collections"] = cols


@contextlib.contextmanager
def override_to_local_variable(enable: bool = True) -> Iterator[None]:
    """Variables created by ``tf.compat.v1.get_variable`` in this context go to
    ``LOCAL_VARIABLES`` instead of ``GLOBAL_VARIABLES`` (they stay trainable if they were):
    copies of a model that checkpoints should not hold.

    :param enable: False makes the context do nothing.
    """
    if not enable:
        yield
        return

    def local_getter(getter: Callable[..., Any], name: str, *args: Any, **kwargs: Any) -> Any:
        # TF passes the next getter as keyword ``getter``
        _local_collections(kwargs)
        return getter(name, *args, **kwargs)

    with tf1.variable_scope(tf1.get_variable_scope(), custom_getter=local_getter, auxiliary_name_scope=False):
        yield


def _canonical_device(name: str) -> str:
    return tf.DeviceSpec.from_string(name).to_string()


def _variable_size(op: Any) -> int | None:
    try:
        shape = op.get_attr("shape") if op.type == "VarHandleOp" else op.outputs[0].shape
        return tf.TensorShape(shape).num_elements()
    except Exception:  # noqa: BLE001 - tables and the like have no shape
        return None


class LeastLoadedDeviceSetter:
    """A device function for ``tf.compat.v1.device``: every variable goes to the one of
    ``ps_devices`` holding the fewest elements so far, every other op to ``worker_device``;
    ops that already have a device keep it.

    ``with tf.compat.v1.device(LeastLoadedDeviceSetter('/gpu:1', ['/gpu:0', '/gpu:1'])): ...``

    :param worker_device: the device of the computation.
    :param ps_devices: the devices variables are spread over.
    """

    def __init__(self, worker_device: str, ps_devices: Sequence[str]) -> None:
        if not ps_devices:
            raise ValueError("LeastLoadedDeviceSetter: ps_devices is empty; give at least one device for variables")
        self.worker_device = worker_device
        self.ps_devices = list(ps_devices)
        #: number of elements placed on each of ``ps_devices``
        self.ps_sizes = [0] * len(self.ps_devices)

    def __call__(self, op: Any) -> str:
        if op.device:
            return op.device
        if op.type not in VARIABLE_OP_TYPES:
            return _canonical_device(self.worker_device)
        return _canonical_device(self.place_with_balance(op))

    def place_with_balance(self, op: Any) -> str:
        """The least loaded ps device, charged with the size of variable ``op``."""
        idx = min(range(len(self.ps_sizes)), key=lambda i: (self.ps_sizes[i], i))
        size = _variable_size(op)
        if size is None:
            logger.warning(f"LeastLoadedDeviceSetter: the shape of variable {op.name} is not fully defined; "
                           "it counts as size 0")
            size = 0
        self.ps_sizes[idx] += size
        return self.ps_devices[idx]

    def __str__(self) -> str:
        return f"LeastLoadedDeviceSetter-{self.worker_device}"


class OverrideCachingDevice:
    """A custom getter (``tf.compat.v1.variable_scope(custom_getter=...)``) that caches each
    trainable variable of known size on a device: small ones on ``device_for_small_variables``,
    the others on the least loaded of ``devices``. Variables of unknown size or not trainable
    become local variables, uncached.

    :param devices: the devices to balance the caches of large variables over.
    :param device_for_small_variables: where variables below the threshold are cached.
    :param small_variable_size_threshold: number of elements below which a variable is small.
    """

    def __init__(self, devices: Sequence[str], device_for_small_variables: str,
                 small_variable_size_threshold: int) -> None:
        if not devices:
            raise ValueError("OverrideCachingDevice: devices is empty")
        self.devices = list(devices)
        self.sizes = [0] * len(self.devices)
        self.device_for_small_variables = device_for_small_variables
        self.small_variable_size_threshold = int(small_variable_size_threshold)

    def __call__(self, getter: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        size = tf.TensorShape(kwargs.get("shape")).num_elements()
        if size is None or not kwargs.get("trainable", True):
            _local_collections(kwargs)
            return getter(*args, **kwargs)
        if size < self.small_variable_size_threshold:
            device = self.device_for_small_variables
        else:
            idx = min(range(len(self.sizes)), key=lambda i: (self.sizes[i], i))
            device = self.devices[idx]
            self.sizes[idx] += size
        kwargs["caching_device"] = device
        return getter(*args, **kwargs)


def split_grad_list(grad_list: Sequence[Sequence[tuple[Any, Any]]]) -> tuple[list[list[Any]], list[list[Any]]]:
    """``K x N (grad, var)`` -> (``K x N`` gradients, ``K x N`` variables)."""
    grads = [[g for g, _ in tower] for tower in grad_list]
    variables = [[v for _, v in tower] for tower in grad_list]
    return grads, variables


def merge_grad_list(all_grads: Sequence[Sequence[Any]],
                    all_vars: Sequence[Sequence[Any]]) -> list[list[tuple[Any, Any]]]:
    """``K x N`` gradients and ``K x N`` variables -> ``K x N (grad, var)`` (inverse of
    :func:`split_grad_list`)."""
    if len(all_grads) != len(all_vars):
        raise ValueError(f"merge_grad_list: {len(all_grads)} gradient lists but {len(all_vars)} variable lists")
    return [list(zip(gs, vs)) for gs, vs in zip(all_grads, all_vars)]


def _dense(g: Any) -> Any:
    return tf.convert_to_tensor(g) if isinstance(g, tf.IndexedSlices) else g


def _check_k_by_n(all_grads: Sequence[Sequence[Any]], who: str) -> None:
    sizes = {len(gs) for gs in all_grads}
    if len(sizes) > 1:
        raise ValueError(f"{who}: every tower must have as many gradients as the others, "
                         f"got {[len(g) for g in all_grads]}")


_collective_instance = itertools.count(100)


def allreduce_grads(all_grads: Sequence[Sequence[Any]], average: bool, mode: str = "nccl") -> list[list[Any]]:
    """All-reduce ``K x N`` gradients: every tower gets, on its own device, the sum (or
    average) of the ``K`` towers' gradients of each variable. Returns ``K x N``.

    :param average: divide the sums by ``K``.
    :param mode: ``'nccl'`` (NCCL all-sum; GPUs only: NCCL has no CPU kernel) or
        ``'collective'`` (TensorFlow's collective all-reduce, works on CPU devices too).
    """
    if mode not in ("nccl", "collective"):
        raise ValueError(f"allreduce_grads: mode must be 'nccl' or 'collective', got {mode!r}; for a sum on one device "
                         "use allreduce_grads_naive, for a tree allreduce_grads_hierarchical")
    _check_k_by_n(all_grads, "allreduce_grads")
    k = len(all_grads)
    if k == 1:
        return [list(all_grads[0])]
    per_var = []
    with tf1.name_scope("AllReduceGrads"):
        for grads in zip(*all_grads):
            grads = [_dense(g) for g in grads]
            if mode == "nccl":
                from tensorflow.python.ops import nccl_ops

                summed = nccl_ops.all_sum(grads)
            else:
                from tensorflow.python.ops import collective_ops

                instance = next(_collective_instance)
                summed = []
                for g in grads:
                    with tf1.device(g.device):
                        summed.append(collective_ops.all_reduce(g, k, 42, instance, "Add", "Id"))
            out = []
            for s in summed:
                with tf1.device(s.device):
                    out.append(tf.multiply(s, 1.0 / k) if average else s)
            per_var.append(out)
    return [list(t) for t in zip(*per_var)]


def allreduce_grads_naive(all_grads: Sequence[Sequence[Any]], devices: Sequence[str] | None = None,
                          average: bool = True) -> list[Any]:
    """Sum (or average) ``K x N`` gradients with ``add_n``: one result per variable (``N``),
    for every tower to read.

    :param devices: where to compute the sums, round-robin over the variables (default: where
        TensorFlow places them).
    :param average: divide the sums by ``K``.
    """
    _check_k_by_n(all_grads, "allreduce_grads_naive")
    if devices is not None and not isinstance(devices, (list, tuple)):
        raise TypeError(f"allreduce_grads_naive: devices must be a list of device names, got {devices!r}")
    k = len(all_grads)
    if k == 1:
        return list(all_grads[0])
    n = len(all_grads[0])
    out: list[Any] = [None] * n
    with tf1.name_scope("AllReduceNaive"):
        # from the last variable backwards: the last layers' gradients are ready first
        for step, idx in enumerate(reversed(range(n))):
            grads = [_dense(all_grads[t][idx]) for t in range(k)]
            dev = tf1.device(devices[step % len(devices)]) if devices else contextlib.nullcontext()
            with dev:
                s = tf.add_n(grads)
                out[idx] = tf.multiply(s, 1.0 / k) if average else s
    return out


def allreduce_grads_hierarchical(all_grads: Sequence[Sequence[Any]], devices: Sequence[str],
                                 average: bool = False) -> list[list[Any]]:
    """All-reduce ``K x N`` gradients along a two-level tree: the towers form groups of about
    ``sqrt(K)``; each group sums on its first device, the group sums are added on the first
    group's device, and the total goes back down the same tree to every tower's device.
    Returns ``K x N``.

    :param devices: the ``K`` towers' devices.
    :param average: divide the sums by ``K``.
    """
    _check_k_by_n(all_grads, "allreduce_grads_hierarchical")
    k = len(all_grads)
    if len(devices) != k:
        raise ValueError(f"allreduce_grads_hierarchical: {len(devices)} devices for {k} towers")
    group = max(1, math.ceil(math.sqrt(k)))
    groups = [list(range(s, min(s + group, k))) for s in range(0, k, group)]
    per_tower: list[list[Any]] = [[] for _ in range(k)]
    with tf1.name_scope("AllReduceGradsHierarchical"):
        for v in range(len(all_grads[0])):
            gs = [_dense(all_grads[t][v]) for t in range(k)]
            partial = []
            for gi, members in enumerate(groups):
                with tf1.device(devices[members[0]]):
                    partial.append(tf.add_n([gs[t] for t in members], name=f"level1_{v}_{gi}"))
            with tf1.device(devices[groups[0][0]]):
                total = tf.add_n(partial, name=f"level2_{v}")
                if average:
                    total = tf.multiply(total, 1.0 / k, name=f"avg_{v}")
            for gi, members in enumerate(groups):
                with tf1.device(devices[members[0]]):
                    leader = tf.identity(total, name=f"down1_{v}_{gi}")
                for t in members:
                    with tf1.device(devices[t]):
                        per_tower[t].append(tf.identity(leader, name=f"down2_{v}_{t}"))
    return per_tower


def aggregate_grads_colocate(grad_list: Sequence[Sequence[tuple[Any, Any]]],
                             average: bool = True) -> list[tuple[Any, Any]]:
    """Sum (or average) the gradients of towers that share their variables, each next to its
    variable: ``K x N (grad, var)`` -> ``N (grad, var)``."""
    check_shared_grads(grad_list)
    k = len(grad_list)
    if k == 1:
        return list(grad_list[0])
    out = []
    with tf1.name_scope("AggregateGradsColocate"):
        for pairs in zip(*grad_list):
            v = pairs[0][1]
            grads = [_dense(g) for g, _ in pairs]
            with tf1.device(v.device):
                s = tf.add_n(grads)
                out.append((tf.multiply(s, 1.0 / k) if average else s, v))
    return out


def aggregate_grads(grad_list: Sequence[Sequence[tuple[Any, Any]]], colocation: bool = True,
                    devices: Sequence[str] | None = None, average: bool = True) -> list[tuple[Any, Any]]:
    """Sum (or average) the gradients of towers that share their variables:
    ``K x N (grad, var)`` -> ``N (grad, var)``.

    :param colocation: compute each sum next to its variable (then ``devices`` must be None).
    :param devices: otherwise, the devices to compute the sums on, round-robin.
    :param average: divide the sums by ``K``.
    """
    if colocation:
        if devices is not None:
            raise ValueError("aggregate_grads: devices= cannot be used with colocation=True")
        return aggregate_grads_colocate(grad_list, average=average)
    check_shared_grads(grad_list)
    all_grads, all_vars = split_grad_list(grad_list)
    grads = allreduce_grads_naive(all_grads, devices=list(devices) if devices else None, average=average)
    return list(zip(grads, all_vars[0]))


class GradientPacker:
    """Concatenate the gradients of one tower into ``num_split`` flat tensors (fewer, larger
    transfers to all-reduce), and split them back.

    :param num_split: the number of packs.
    """

    def __init__(self, num_split: int = 8) -> None:
        self._num_split = int(num_split)
        self._computed = False

    def compute_strategy(self, grads: Sequence[Any]) -> bool:
        """Plan the packing for gradients like ``grads`` (called once). Returns False when
        they cannot be packed: unknown shapes, mixed dtypes, or too few elements."""
        if self._computed:
            raise RuntimeError("GradientPacker.compute_strategy can be called only once")
        self._computed = True
        for g in grads:
            if not g.shape.is_fully_defined():
                logger.warning(f"GradientPacker: {g.name} has shape {g.shape}, not fully defined; not packing")
                return False
        self._shapes = [g.shape for g in grads]
        self._sizes = [g.shape.num_elements() for g in grads]
        self._total_size = sum(self._sizes)
        if self._total_size / self._num_split < 1024:
            logger.info("GradientPacker: too few gradient elements to pack")
            return False
        if len({g.dtype for g in grads}) != 1:
            logger.info("GradientPacker: the gradients have different dtypes; not packing")
            return False
        split = self._total_size // self._num_split
        self._split_sizes = [split] * (self._num_split - 1) + [self._total_size - split * (self._num_split - 1)]
        logger.info(f"GradientPacker: packing {len(self._sizes)} gradients of {self._total_size} elements "
                    f"into {self._num_split} packs")
        return True

    def pack(self, grads: Sequence[Any]) -> list[Any]:
        """One tower's gradients -> ``num_split`` flat packs."""
        for i, g in enumerate(grads):
            if g.shape != self._shapes[i]:
                raise ValueError(f"GradientPacker: gradient {i} has shape {g.shape}, planned for {self._shapes[i]}")
        with tf1.name_scope("GradientPacker"):
            flat = tf.concat([tf.reshape(g, [-1]) for g in grads], 0, name="concatenated_grads")
            return tf.split(flat, self._split_sizes)

    def unpack(self, grad_packs: Sequence[Any]) -> list[Any]:
        """``num_split`` packs -> the gradients, in their shapes."""
        with tf1.name_scope("GradientPacker"):
            flat = tf.concat(list(grad_packs), 0, name="concatenated_packs")
            return [tf.reshape(g, s) for g, s in zip(tf.split(flat, self._sizes), self._shapes)]

    @staticmethod
    def _per_tower(func: Callable[[Any], list[Any]], per_tower: Sequence[Any],
                   devices: Sequence[str]) -> list[list[Any]]:
        out = []
        for dev, x in zip(devices, per_tower):
            with tf1.device(dev):
                out.append(func(x))
        return out

    def pack_all(self, all_grads: Sequence[Sequence[Any]], devices: Sequence[str]) -> list[list[Any]]:
        """:meth:`pack` for each tower, on its device."""
        return self._per_tower(self.pack, all_grads, devices)

    def unpack_all(self, all_packed: Sequence[Sequence[Any]], devices: Sequence[str]) -> list[list[Any]]:
        """:meth:`unpack` for each tower, on its device."""
        return self._per_tower(self.unpack, all_packed, devices)


def check_replicated_grads(grad_list: Sequence[Sequence[tuple[Any, Any]]]) -> None:
    """Towers with their own copies of the variables must produce gradients for the same
    variables, in the same order (tower ``i`` for the ``tower{i}/`` copy of tower 0's)."""
    base = [v.op.name for _, v in grad_list[0]]
    for i, grads in enumerate(grad_list[1:], start=1):
        names = [re.sub(r"^tower\d+/", "", v.op.name) for _, v in grads]
        if names != base:
            missing = sorted(set(base) - set(names))
            extra = sorted(set(names) - set(base))
            raise ValueError(
                f"tower {i} has gradients for different variables than tower 0 (missing: {missing}, extra: {extra}); "
                "the tower function must create the same trainable variables in every tower"
            )


def check_shared_grads(grad_list: Sequence[Sequence[tuple[Any, Any]]]) -> None:
    """Towers sharing variables must produce gradients for the same variable objects."""
    base = [v for _, v in grad_list[0]]
    for i, grads in enumerate(grad_list[1:], start=1):
        vs = [v for _, v in grads]
        if len(vs) != len(base) or any(a is not b for a, b in zip(vs, base)):
            raise ValueError(
                f"tower {i} has gradients for {[v.op.name for v in vs]} but tower 0 for {[v.op.name for v in base]}; "
                "towers sharing variables must compute gradients of the same variables"
            )
