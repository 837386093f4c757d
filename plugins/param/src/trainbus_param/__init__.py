"""Hyperparameters and the callbacks that set them during training."""

from __future__ import annotations

from trainbus_param._params import GraphVarParam, HyperParam, ObjAttrParam
from trainbus_param._setters import (
    HumanHyperParamSetter,
    HyperParamSetter,
    HyperParamSetterWithFunc,
    ScheduledHyperParamSetter,
    StatMonitorParamSetter,
)

__all__ = ["HyperParam", "GraphVarParam", "ObjAttrParam", "HyperParamSetter", "HumanHyperParamSetter",
           "ScheduledHyperParamSetter", "HyperParamSetterWithFunc", "StatMonitorParamSetter"]
