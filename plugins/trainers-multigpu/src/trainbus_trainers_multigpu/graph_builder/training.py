"""Graph builders for data-parallel training in one process: build the tower function once
per device, then combine the towers' gradients into one training op.

Each builder takes the towers as a list of device ids. The towers' devices are ``/gpu:i``
when TensorFlow sees GPUs, else ``/cpu:i`` (give the session
``ConfigProto(device_count={'CPU': n})`` for ``n`` logical CPU devices).
"""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

import tensorflow as tf

from trainbus_trainers_multigpu.graph_builder.utils import (
    GradientPacker,
    LeastLoadedDeviceSetter,
    aggregate_grads_colocate,
    allreduce_grads,
    allreduce_grads_hierarchical,
    allreduce_grads_naive,
    check_replicated_grads,
    check_shared_grads,
    gpus_available,
    merge_grad_list,
    normalize_devices,
    override_to_local_variable,
    raw_device_names,
    split_grad_list,
)
from trainbus.tfutils.tower import TrainTowerContext
from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["GraphBuilder", "DataParallelBuilder", "SyncMultiGPUParameterServerBuilder", "SyncMultiGPUReplicatedBuilder",
           "AsyncMultiGPUBuilder"]

GradList = Sequence[Sequence[tuple[Any, Any]]]


class GraphBuilder:
    """Base of graph builders: ``build(...)`` adds the training part of the graph."""

    def build(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"{type(self).__name__} must implement build()")


class DataParallelBuilder(GraphBuilder):
    """Builds one training tower per device (``TrainTowerContext('tower{i}', index=i, total=K)``).

    :param towers: device ids, one tower each (an int ``n`` means ``0..n-1``).
    """

    def __init__(self, towers: Sequence[int] | int) -> None:
        self.towers = normalize_devices(towers, type(self).__name__)
        if len(self.towers) > 1:
            logger.info(f"[DataParallel] Training a model of {len(self.towers)} towers.")

    @property
    def raw_devices(self) -> list[str]:
        """The device of each tower: ``/gpu:i``, or ``/cpu:i`` without GPUs."""
        return raw_device_names(self.towers)

    @staticmethod
    def _check_grad_list(grad_list: GradList) -> None:
        """Every tower must return as many (grad, var) pairs as the others."""
        counts = [len(g) for g in grad_list]
        if len(set(counts)) > 1:
            names = [{re.sub(r"^tower\d+/", "", v.op.name) for _, v in gv} for gv in grad_list]
            common = set.intersection(*names)
            only = {i: sorted(n - common) for i, n in enumerate(names) if n - common}
            raise ValueError(f"the towers returned different numbers of gradients {counts}; variables only some towers "
                             f"have gradients for: {only}")

    def _check_build_grads(self, grad_list: GradList, check_variables: Callable[[GradList], Any]) -> None:
        """What every ``build`` checks first: one gradient list per tower, all of the same length,
        and ``check_variables(grad_list)`` (shared or replicated variables)."""
        if len(grad_list) != len(self.towers):
            raise ValueError(f"{type(self).__name__}.build: {len(grad_list)} gradient lists for "
                             f"{len(self.towers)} towers")
        DataParallelBuilder._check_grad_list(grad_list)
        check_variables(grad_list)

    @staticmethod
    def call_for_each_tower(towers: Sequence[int], func: Callable[[], Any], devices: Sequence[Any] | None = None,
                            use_vs: Sequence[bool] | None = None) -> list[Any]:
        """Call ``func()`` once per tower, under ``tf.compat.v1.device(devices[i])`` and
        ``TrainTowerContext('tower{i}', index=i, total=len(towers))``; return what each call
        returned.

        Tower 0 creates the variables; the others reuse them, unless ``use_vs[i]`` is True:
        then tower ``i`` builds its own copies in variable scope ``tower{i}``, as local
        variables (checkpoints hold only tower 0's).

        :param towers: device ids, one tower each.
        :param func: builds one tower; called with no arguments.
        :param devices: a device name or device function per tower (default: ``/gpu:i``, or
            ``/cpu:i`` without GPUs).
        :param use_vs: per tower, whether it has its own variable scope.
        """
        towers = list(towers)
        if devices is not None and len(devices) != len(towers):
            raise ValueError(f"call_for_each_tower: {len(devices)} devices for {len(towers)} towers")
        if use_vs is not None and len(use_vs) != len(towers):
            raise ValueError(f"call_for_each_tower: {len(use_vs)} use_vs entries for {len(towers)} towers")
        if devices is None:
            devices = raw_device_names(towers)
        out = []
        for idx in range(len(towers)):
            device = devices[idx]
            own_vs = bool(use_vs[idx]) if use_vs is not None else False
            name = f"tower{idx}"
            desc = device if isinstance(device, str) else str(device)
            logger.info(f"Building graph for training tower {idx} on device {desc} ...")
            with tf1.device(device), TrainTowerContext(name, vs_name=name if own_vs else "", index=idx,
                                                       total=len(towers)):
                with override_to_local_variable(enable=own_vs):
                    out.append(func())
        return out

    #: tensorpack's older name of :meth:`call_for_each_tower`
    build_on_towers = call_for_each_tower


class SyncMultiGPUParameterServerBuilder(DataParallelBuilder):
    """Synchronous data-parallel training with one shared copy of the variables: every tower
    computes gradients on its device; they are averaged next to each variable and applied once.

    :param towers: device ids.
    :param ps_device: where the variables live: ``'cpu'`` (``/cpu:0``) or ``'gpu'`` (spread over
        the towers' devices, least loaded first).
    """

    def __init__(self, towers: Sequence[int] | int, ps_device: str) -> None:
        super().__init__(towers)
        if ps_device not in ("cpu", "gpu"):
            raise ValueError(f"SyncMultiGPUParameterServerBuilder: ps_device must be 'cpu' or 'gpu', got {ps_device!r}")
        self.ps_device = ps_device

    def _ps_devices(self) -> list[str]:
        return ["/cpu:0"] if self.ps_device == "cpu" else self.raw_devices

    def call_for_each_tower(self, tower_fn: Callable[[], Any]) -> list[Any]:  # type: ignore[override]
        """Call ``tower_fn`` in each tower (variables placed on the ps devices); return the
        list of what it returned."""
        raw = self.raw_devices
        ps = self._ps_devices()
        setters = [LeastLoadedDeviceSetter(d, ps) for d in raw]
        return DataParallelBuilder.build_on_towers(self.towers, tower_fn, setters)

    def build(self, grad_list: GradList, get_opt_fn: Callable[[], Any]) -> Any:
        """Average the towers' gradients and apply them; sets ``self.grads`` to the averaged
        ``[(grad, var)]``.

        :param grad_list: ``K x N (grad, var)``, one list per tower (of the same variables).
        :param get_opt_fn: returns the optimizer.
        :returns: the training op.
        """
        self._check_build_grads(grad_list, check_shared_grads)
        self.grads = aggregate_grads_colocate(grad_list, average=True)
        opt = get_opt_fn()
        with tf1.device(self._ps_devices()[0]):
            return opt.apply_gradients(self.grads, name="train_op")


class SyncMultiGPUReplicatedBuilder(DataParallelBuilder):
    """Synchronous data-parallel training where every device holds a copy of the variables:
    tower 0 in the root variable scope, tower ``i`` in ``tower{i}`` (local variables). The
    gradients are all-reduced and every tower applies the same update to its copy.

    :param towers: device ids.
    :param average: average (True) or sum the gradients.
    :param mode: the all-reduce: ``'nccl'`` (GPUs), ``'collective'`` (TensorFlow's collective
        ops), ``'cpu'`` (sums on ``/cpu:0``), ``'gpu'`` (sums spread over the towers' devices) or
        ``'hierarchical'`` (a two-level tree, see :func:`allreduce_grads_hierarchical`).
    """

    MODES = ("nccl", "cpu", "hierarchical", "gpu", "collective")

    def __init__(self, towers: Sequence[int] | int, average: bool, mode: str) -> None:
        super().__init__(towers)
        if mode not in self.MODES:
            raise ValueError(f"SyncMultiGPUReplicatedBuilder: mode must be one of {self.MODES}, got {mode!r}")
        if mode == "nccl" and gpus_available() == 0:
            raise ValueError("SyncMultiGPUReplicatedBuilder: mode='nccl' needs GPUs and TensorFlow sees none (NCCL has "
                             "no CPU kernel); use mode='cpu', 'gpu', 'hierarchical' or 'collective'")
        self._average = bool(average)
        self._mode = mode

    def call_for_each_tower(self, tower_fn: Callable[[], Any]) -> list[Any]:  # type: ignore[override]
        """Call ``tower_fn`` in each tower (tower ``i >= 1`` with its own variables); return
        the list of what it returned."""
        return DataParallelBuilder.build_on_towers(self.towers, tower_fn, self.raw_devices,
                                                   use_vs=[False] + [True] * (len(self.towers) - 1))

    def build(self, grad_list: GradList, get_opt_fn: Callable[[], Any]) -> tuple[Any, Any]:
        """All-reduce the gradients and apply them to every copy; sets ``self.grads`` to the
        ``K x N`` all-reduced ``(grad, var)``.

        :param grad_list: ``K x N (grad, var)``, tower ``i`` for its own copies.
        :param get_opt_fn: returns the optimizer.
        :returns: ``(train_op, post_init_op)``: the training op, and the op copying tower 0's
            variables to the other towers (run it once after the variables are initialized or
            restored; None with one tower).
        """
        self._check_build_grads(grad_list, check_replicated_grads)
        raw = self.raw_devices
        mode = self._mode
        dtypes = {g.dtype.base_dtype for g, _ in grad_list[0]}
        if mode == "nccl" and not dtypes <= {tf.float16, tf.float32, tf.float64}:
            logger.warning("SyncMultiGPUReplicatedBuilder: NCCL cannot reduce gradients of "
                           f"{sorted(d.name for d in dtypes)}; using mode='gpu'")
            mode = "gpu"
        all_grads, all_vars = split_grad_list(grad_list)
        packer = GradientPacker(len(raw)) if mode == "hierarchical" else None
        if packer is not None and not packer.compute_strategy(all_grads[0]):
            packer = None
        if packer is not None:
            all_grads = packer.pack_all(all_grads, raw)
        if mode in ("nccl", "collective"):
            all_grads = allreduce_grads(all_grads, average=self._average, mode=mode)
        elif mode == "hierarchical":
            all_grads = allreduce_grads_hierarchical(all_grads, raw, average=self._average)
        else:
            reduced = allreduce_grads_naive(all_grads, devices=["/cpu:0"] if mode == "cpu" else raw,
                                            average=self._average)
            all_grads = [reduced] * len(self.towers)
        if packer is not None:
            all_grads = packer.unpack_all(all_grads, raw)
        self.grads = merge_grad_list(all_grads, all_vars)

        opt = get_opt_fn()
        applies = []
        with tf1.name_scope("apply_gradients"):
            for idx, pairs in enumerate(self.grads):
                with tf1.device(raw[idx]), override_to_local_variable(enable=idx > 0):
                    applies.append(opt.apply_gradients(pairs, name=f"apply_grad_{idx}"))
        train_op = tf.group(*applies, name="train_op")
        post_init_op = None
        if len(self.towers) > 1:
            with tf1.name_scope("sync_variables"):
                post_init_op = SyncMultiGPUReplicatedBuilder.get_post_init_ops()
        return train_op, post_init_op

    @staticmethod
    def get_post_init_ops() -> Any:
        """One op assigning every ``tower{i}/X`` variable (``i >= 1``, global or local) the value
        of its main copy ``X``: optimizer slots included."""
        all_vars = tf1.global_variables() + tf1.local_variables()
        by_name = {v.op.name: v for v in all_vars}
        trainable = {v.op.name for v in tf1.trainable_variables()}
        ops = []
        for v in all_vars:
            m = re.match(r"^tower(\d+)/(.+)$", v.op.name)
            if m is None:
                continue
            if m.group(1) == "0" or re.match(rf"^(.*/)?tower{m.group(1)}(/|$)", m.group(2)):
                reason = "its name has a tower prefix the main copy cannot have"
                main = None
            else:
                main = by_name.get(m.group(2))
                reason = f"there is no variable {m.group(2)!r}"
            if main is None:
                if v.op.name in trainable:
                    raise ValueError(f"cannot synchronize the trainable variable {v.op.name!r} with the main tower: "
                                     f"{reason}")
                logger.warning(f"Replicated variable {v.op.name} is not synchronized with the main tower ({reason}); "
                               "it is not trainable, so this only matters if it should hold the same value")
                continue
            with tf1.device(v.device):
                ops.append(tf1.assign(v, main.read_value() if hasattr(main, "read_value") else main))
        logger.info(f"'sync_variables_from_main_tower' holds {len(ops)} assignments.")
        return tf.group(*ops, name="sync_variables_from_main_tower")


class AsyncMultiGPUBuilder(DataParallelBuilder):
    """Data-parallel training without synchronization: towers share the variables and each
    applies its own gradients.

    :param towers: device ids.
    :param scale_gradient: multiply every gradient by ``1 / K`` (so the effective learning
        rate matches the synchronous builders').
    :param ps_device: where the shared variables live: ``'cpu'`` (``/cpu:0``) or ``'gpu'``
        (spread over the towers' devices); default ``'cpu'`` from 4 towers on, else ``'gpu'``.
    """

    def __init__(self, towers: Sequence[int] | int, scale_gradient: bool = True, ps_device: str | None = None) -> None:
        super().__init__(towers)
        if ps_device is None:
            ps_device = "cpu" if len(self.towers) >= 4 else "gpu"
        if ps_device not in ("cpu", "gpu"):
            raise ValueError(f"AsyncMultiGPUBuilder: ps_device must be 'cpu' or 'gpu', got {ps_device!r}")
        self.ps_device = ps_device
        self._scale_gradient = bool(scale_gradient)

    def call_for_each_tower(self, tower_fn: Callable[[], Any]) -> list[Any]:  # type: ignore[override]
        """Call ``tower_fn`` in each tower (variables on the ps devices); return the list of
        what it returned."""
        raw = self.raw_devices
        ps = ["/cpu:0"] if self.ps_device == "cpu" else raw
        return DataParallelBuilder.build_on_towers(self.towers, tower_fn, [LeastLoadedDeviceSetter(d, ps) for d in raw])

    def build(self, grad_list: GradList, get_opt_fn: Callable[[], Any]) -> Any:
        """Apply each tower's gradients separately (each update next to its variable).

        :param grad_list: ``K x N (grad, var)`` of the shared variables.
        :param get_opt_fn: returns the optimizer.
        :returns: the training op.
        """
        self._check_build_grads(grad_list, check_shared_grads)
        k = len(self.towers)
        if self._scale_gradient and k > 1:
            from trainbus.tfutils.gradproc import ScaleGradient

            proc = ScaleGradient((".*", 1.0 / k), verbose=False)
            grad_list = [proc.process(list(gv)) for gv in grad_list]
        opt = get_opt_fn()
        applies = []
        with tf1.name_scope("async_apply_gradients"):
            for idx, pairs in enumerate(zip(*grad_list)):
                v = pairs[0][1]
                with tf1.device(v.device):
                    applies.append(opt.apply_gradients(list(pairs), name=f"apply_grad_{idx}"))
        return tf.group(*applies, name="train_op")
