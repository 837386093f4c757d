"""Adapters between trainbus callbacks and TensorFlow SessionRunHooks."""

from __future__ import annotations

from trainbus_hooks._hooks import CallbackToHook, HookToCallback, TFLocalCLIDebugHook

__all__ = ["HookToCallback", "CallbackToHook", "TFLocalCLIDebugHook"]
