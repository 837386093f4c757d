"""Utilities (``trainbus.utils.logger`` and friends)."""

from trainbus.utils import logger

__all__ = ["logger"]
