"""Exceptions shared by the event core and the trainers (no TensorFlow here)."""

from __future__ import annotations


class StopTraining(Exception):
    """Raise it from a callback (or the step) to end training after the current event.

    Every callback's ``after_train`` still runs and the trainer returns normally.
    """


class PluginConflictError(ImportError):
    """Two installed distributions export the same public name."""


class PluginLoadError(ImportError):
    """An installed plugin could not be imported or is not usable."""


class PluginAPIVersionError(PluginLoadError):
    """A plugin declares a plugin API version this core does not support."""
