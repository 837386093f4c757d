"""Layers written on ``tf.compat.v1.get_variable`` and ``tf.nn`` (graph mode), with
tensorpack's names, arguments and aliases; all work with ``argscope``.

``from trainbus.models import Conv2D, FullyConnected, BatchNorm, ...``
"""

from __future__ import annotations

from trainbus.models.batch_norm import BatchNorm
from trainbus.models.conv2d import Conv2D, Conv2DTranspose
from trainbus.models.fc import FullyConnected
from trainbus.models.linearwrap import LinearWrap
from trainbus.models.pool import AvgPooling, GlobalAvgPooling, MaxPooling
from trainbus.models.registry import VariableHolder, layer_register
from trainbus.models.regularize import Dropout

__all__ = ["FullyConnected", "Conv2D", "Conv2DTranspose", "MaxPooling", "AvgPooling", "GlobalAvgPooling",
           "BatchNorm", "Dropout", "LinearWrap", "layer_register", "VariableHolder"]
