"""Data-parallel trainers that build one tower per device in one process."""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from trainbus.callbacks.base import Callback
from trainbus.tfutils.tower import TowerFunc
from trainbus.train.tower import SingleCostTrainer
from trainbus.utils import logger

from trainbus_trainers_multigpu.graph_builder import (
    AsyncMultiGPUBuilder,
    SyncMultiGPUParameterServerBuilder,
    SyncMultiGPUReplicatedBuilder,
    gpus_available,
    normalize_devices,
    raw_device_names,
)


__all__ = ["SyncMultiGPUTrainerReplicated", "SyncMultiGPUTrainerParameterServer", "AsyncMultiGPUTrainer",
           "SyncMultiGPUTrainer", "DataParallelTrainerBase"]

REPLICATED_MODES = ("nccl", "hierarchical", "cpu")


class RunBroadcastEachEpoch(Callback):
    """Runs the replicated trainer's variable broadcast after every epoch (on every worker)."""

    _chief_only = False

    def __init__(self, op: Any) -> None:
        self._op = op

    def _trigger_epoch(self) -> None:
        self.trainer.sess.run(self._op)

    def __str__(self) -> str:
        return "SyncReplicatedVariables"


class DataParallelTrainerBase(SingleCostTrainer):
    """Common part of the multi-device trainers: the device list and the device check."""

    #: List of device ids (one tower each); set by the constructor.
    devices: list[int] | None = None

    def __init__(self, gpus: Any) -> None:
        #: list of device ids, one tower each
        self.devices = normalize_devices(gpus, type(self).__name__)
        super().__init__()
        self._raw_devices = raw_device_names(self.devices)

    @property
    def raw_devices(self) -> list[str]:
        """The TF device name of each tower (``/gpu:i``, or ``/cpu:i`` without GPUs)."""
        return list(self._raw_devices)

    def after_session_init(self) -> None:
        super().after_session_init()
        self._check_devices_exist()

    def _check_devices_exist(self) -> None:
        try:
            have = {(d.device_type.upper(), int(d.name.rsplit(":", 1)[1])) for d in self.sess.list_devices()}
        except Exception:  # noqa: BLE001 - a remote target may not list devices
            return
        missing = []
        for raw in self._raw_devices:
            spec = tf.DeviceSpec.from_string(raw)
            if (spec.device_type.upper(), spec.device_index) not in have:
                missing.append(raw)
        if missing:
            hint = ("give the session more logical CPU devices, e.g. TrainConfig(session_config=c) with "
                    f"c.device_count['CPU'] = {max(self.devices) + 1}") if gpus_available() == 0 else \
                "check CUDA_VISIBLE_DEVICES"
            logger.warning(f"{type(self).__name__}: tower devices {missing} do not exist in this session, so their ops "
                           f"were placed on other devices (soft placement); {hint}.")


class SyncMultiGPUTrainerReplicated(DataParallelTrainerBase):
    """Synchronous data-parallel training where every device holds its own copy of all
    variables: tower ``i`` builds the model on device ``i`` (tower 0 in the root variable
    scope, the others in ``tower{i}`` as local variables, which checkpoints do not hold), the
    gradients of all towers are summed or averaged
    by an all-reduce, and every tower applies the same update to its copy.

    The copies start equal: after the session is initialized (or restored) the variables of
    tower 0 are copied to the other towers, and again after every epoch when
    ``BROADCAST_EVERY_EPOCH`` is True.

    :param gpus: a number of devices or a list of device ids.
    :param average: average (True) or sum the gradients over the towers.
    :param mode: all-reduce: ``'nccl'`` (GPUs only), ``'hierarchical'`` (two-level tree of
        sums) or ``'cpu'`` (sum on the CPU); None picks one: ``'cpu'`` without GPUs,
        ``'hierarchical'`` on 8 GPUs, else ``'nccl'``.
    :param use_nccl: deprecated; True means ``mode='nccl'``, False ``mode='cpu'``.
    """

    #: re-copy tower 0's variables to the other towers after every epoch (cheap insurance
    #: against numerical drift between copies)
    BROADCAST_EVERY_EPOCH = True

    def __init__(self, gpus: Any, average: bool = True, mode: str | None = None, use_nccl: bool | None = None) -> None:
        super().__init__(gpus)
        who = type(self).__name__
        if use_nccl is not None:
            implied = "nccl" if use_nccl else "cpu"
            logger.warning(f"{who}: use_nccl is deprecated; pass mode={implied!r} instead.")
            if mode is not None and mode != implied:
                raise ValueError(f"{who}: use_nccl={use_nccl} contradicts mode={mode!r}; pass only mode=")
            mode = implied
        if mode is None:
            if gpus_available() == 0:
                mode = "cpu"
            else:
                mode = "hierarchical" if len(self.devices) == 8 else "nccl"
        if not isinstance(mode, str) or mode.lower() not in REPLICATED_MODES:
            raise ValueError(f"{who}: mode must be one of {REPLICATED_MODES} or None, got {mode!r}")
        mode = mode.lower()
        if mode == "nccl" and gpus_available() == 0:
            raise ValueError(f"{who}: mode='nccl' needs GPUs, and TensorFlow sees none here (NCCL has no CPU kernel); "
                             "use mode='cpu' or mode='hierarchical', or leave mode=None to pick automatically")
        self._mode = mode
        self._average = bool(average)

    @property
    def mode(self) -> str:
        """The all-reduce mode in use."""
        return self._mode

    def _setup_graph(self, input: Any, get_cost_fn: TowerFunc, get_opt_fn: Callable[[], Any]) -> list:
        n = len(self.devices)
        logger.info(f"Building {n} replicated training towers on {self._raw_devices} "
                    f"(all-reduce mode {self._mode!r}) ...")
        builder = SyncMultiGPUReplicatedBuilder(self.devices, self._average, self._mode)
        grad_list = builder.call_for_each_tower(self._make_get_grad_fn(input, get_cost_fn, get_opt_fn))
        self.train_op, self._broadcast_op = builder.build(grad_list, get_opt_fn)
        return [RunBroadcastEachEpoch(self._broadcast_op)] if (self.BROADCAST_EVERY_EPOCH and n > 1) else []

    def after_session_init(self) -> None:
        super().after_session_init()
        if len(self.devices) > 1:
            logger.info("Copying the variables of tower 0 to the other towers ...")
            self.sess.run(self._broadcast_op)


class SyncMultiGPUTrainerParameterServer(DataParallelTrainerBase):
    """Synchronous data-parallel training with one shared copy of the variables: every
    tower computes gradients on its device, they are averaged next to each variable and
    applied once.

    :param gpus: a number of devices or a list of device ids.
    :param ps_device: where the variables live: ``'cpu'`` (``/cpu:0``) or ``'gpu'`` (spread
        over the tower devices, least loaded first). Default: ``'gpu'`` for at most 2
        devices, else ``'cpu'``.
    """

    def __init__(self, gpus: Any, ps_device: str | None = None) -> None:
        super().__init__(gpus)
        if ps_device is None:
            ps_device = "gpu" if len(self.devices) <= 2 else "cpu"
        if ps_device not in ("cpu", "gpu"):
            raise ValueError(f"{type(self).__name__}: ps_device must be 'cpu' or 'gpu', got {ps_device!r}")
        self.ps_device = ps_device

    def _setup_graph(self, input: Any, get_cost_fn: TowerFunc, get_opt_fn: Callable[[], Any]) -> list:
        ps = ["/cpu:0"] if self.ps_device == "cpu" else self._raw_devices
        logger.info(f"Building {len(self.devices)} training towers on {self._raw_devices} "
                    f"sharing variables on {ps} ...")
        builder = SyncMultiGPUParameterServerBuilder(self.devices, self.ps_device)
        grad_list = builder.call_for_each_tower(self._make_get_grad_fn(input, get_cost_fn, get_opt_fn))
        self.train_op = builder.build(grad_list, get_opt_fn)
        return []


class AsyncMultiGPUTrainer(DataParallelTrainerBase):
    """Data-parallel training without synchronization: every tower applies its own
    gradients to the shared variables, independently of the others.

    :param gpus: a number of devices or a list of device ids.
    :param scale_gradient: multiply each tower's gradients by ``1 / number of towers``.
    """

    def __init__(self, gpus: Any, scale_gradient: bool = True) -> None:
        super().__init__(gpus)
        self._scale_gradient = bool(scale_gradient)

    def _setup_graph(self, input: Any, get_cost_fn: TowerFunc, get_opt_fn: Callable[[], Any]) -> list:
        logger.info(f"Building {len(self.devices)} asynchronous training towers on {self._raw_devices} ...")
        builder = AsyncMultiGPUBuilder(self.devices, scale_gradient=self._scale_gradient, ps_device="cpu")
        grad_list = builder.call_for_each_tower(self._make_get_grad_fn(input, get_cost_fn, get_opt_fn))
        self.train_op = builder.build(grad_list, get_opt_fn)
        return []


def SyncMultiGPUTrainer(gpus: Any) -> SyncMultiGPUTrainerParameterServer:
    """A reasonable synchronous multi-device trainer when the details do not matter:
    ``SyncMultiGPUTrainerParameterServer(gpus, ps_device='cpu')``.

    :param gpus: a number of devices or a list of device ids.
    """
    return SyncMultiGPUTrainerParameterServer(gpus, ps_device="cpu")
