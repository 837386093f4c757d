"""The old import path of :func:`trainbus.utils.serialize.dumps` / :func:`~trainbus.utils.serialize.loads`."""

from __future__ import annotations

from trainbus.utils.serialize import dumps, loads  # noqa: F401

__all__: list[str] = []
