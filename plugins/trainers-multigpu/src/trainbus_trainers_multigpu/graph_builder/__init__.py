"""Graph building for multi-device training: the data-parallel builders
(:class:`DataParallelBuilder` and the synchronous/asynchronous ones), device placement
(:class:`LeastLoadedDeviceSetter`, :class:`OverrideCachingDevice`), local variables
(:func:`override_to_local_variable`) and gradient all-reduce/aggregation. The trainers of
this distribution and of ``trainbus-trainers-distributed`` build their graphs from these.

Imported as ``trainbus.graph_builder`` (tensorpack's path; entry point group
``trainbus.modules``), its submodules as ``trainbus.graph_builder.utils`` and so on: the same
module objects as under ``trainbus_trainers_multigpu.graph_builder``.
"""

from __future__ import annotations

from trainbus_trainers_multigpu.graph_builder.model_desc import InputDesc, ModelDesc, ModelDescBase
from trainbus_trainers_multigpu.graph_builder.training import (
    AsyncMultiGPUBuilder,
    DataParallelBuilder,
    GraphBuilder,
    SyncMultiGPUParameterServerBuilder,
    SyncMultiGPUReplicatedBuilder,
)
from trainbus_trainers_multigpu.graph_builder.utils import (
    VARIABLE_OP_TYPES,
    GradientPacker,
    LeastLoadedDeviceSetter,
    OverrideCachingDevice,
    aggregate_grads,
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

__all__ = ["ModelDesc", "ModelDescBase", "InputDesc", "GraphBuilder", "DataParallelBuilder",
           "SyncMultiGPUParameterServerBuilder", "SyncMultiGPUReplicatedBuilder", "AsyncMultiGPUBuilder",
           "LeastLoadedDeviceSetter", "OverrideCachingDevice", "override_to_local_variable", "allreduce_grads",
           "allreduce_grads_naive", "allreduce_grads_hierarchical", "aggregate_grads", "aggregate_grads_colocate",
           "merge_grad_list", "split_grad_list", "GradientPacker", "check_replicated_grads", "check_shared_grads",
           "normalize_devices", "gpus_available", "raw_device_names", "VARIABLE_OP_TYPES"]
