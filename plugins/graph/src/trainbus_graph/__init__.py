"""Graph callbacks for trainbus: run ops, fetch and dump tensors, check numerics."""

from __future__ import annotations

from trainbus_graph._callbacks import (
    CheckNumerics,
    DumpTensorAsImage,
    DumpTensors,
    ProcessTensors,
    RunOp,
    RunUpdateOps,
)

__all__ = ["RunOp", "RunUpdateOps", "ProcessTensors", "DumpTensors", "DumpTensor", "DumpTensorAsImage", "DumpParamAsImage",
           "CheckNumerics"]

#: tensorpack's other names for the same callbacks
DumpTensor = DumpTensors
DumpParamAsImage = DumpTensorAsImage
