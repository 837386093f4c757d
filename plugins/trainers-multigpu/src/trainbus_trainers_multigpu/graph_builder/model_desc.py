"""``ModelDesc`` under its graph-builder path (the classes live in :mod:`trainbus.train.model_desc`)."""

from __future__ import annotations

from trainbus.train.model_desc import InputDesc, ModelDesc, ModelDescBase

__all__ = ["ModelDesc", "ModelDescBase", "InputDesc"]
