"""The names for writing layers: ``layer_register``, ``VariableHolder``,
``rename_tflayer_get_variable``, ``disable_layer_logging``."""

from __future__ import annotations

from trainbus.models.registry import disable_layer_logging, layer_register
from trainbus.models.tflayer import rename_tflayer_get_variable
from trainbus.models.utils import VariableHolder

__all__ = ["layer_register", "VariableHolder", "rename_tflayer_get_variable", "disable_layer_logging"]
