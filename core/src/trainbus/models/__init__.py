"""Layers written on ``tf.compat.v1.get_variable`` and ``tf.nn`` (graph mode), with
tensorpack's names, arguments, variable names and aliases; all work with ``argscope``.

``from trainbus.models import *`` binds the same 26 names as tensorpack's ``models`` package.
``BilinearUpSample`` and ``LeakyReLU`` (from tensorpack's older releases) are importable by name.
"""

from __future__ import annotations

from trainbus.models.batch_norm import BatchNorm, BatchRenorm
from trainbus.models.common import VariableHolder, disable_layer_logging, layer_register, rename_tflayer_get_variable
from trainbus.models.conv2d import Conv2D, Conv2DTranspose, Deconv2D
from trainbus.models.fc import FullyConnected
from trainbus.models.layer_norm import InstanceNorm, LayerNorm
from trainbus.models.linearwrap import LinearWrap
from trainbus.models.nonlin import BNReLU, LeakyReLU, Maxout, PReLU
from trainbus.models.pool import AvgPooling, BilinearUpSample, FixedUnPooling, GlobalAvgPooling, MaxPooling
from trainbus.models.regularize import (Dropout, l1_regularizer, l2_regularizer, regularize_cost,
                                        regularize_cost_from_collection)
from trainbus.models.shapes import ConcatWith

# the modules' __all__ lists, in the order tensorpack's package imports them
__all__ = ["BatchNorm", "BatchRenorm",
           "layer_register", "VariableHolder", "rename_tflayer_get_variable", "disable_layer_logging",
           "Conv2D", "Deconv2D", "Conv2DTranspose",
           "FullyConnected",
           "LayerNorm", "InstanceNorm",
           "LinearWrap",
           "Maxout", "PReLU", "BNReLU",
           "MaxPooling", "FixedUnPooling", "AvgPooling", "GlobalAvgPooling",
           "regularize_cost", "regularize_cost_from_collection", "l2_regularizer", "l1_regularizer", "Dropout",
           "ConcatWith"]
