"""``lazy("wandb")``: a stand-in for a module, imported at its first attribute access.

Every pytest-xdist worker imports every test module at collection, also those it will not run:
a test module whose library takes seconds to import (W&B) binds it lazily, so that only the
worker running its tests pays for the import."""

from __future__ import annotations

import importlib
from typing import Any


class lazy:  # noqa: N801 - used like the module it stands for
    def __init__(self, name: str) -> None:
        self._name = name
        self._module: Any = None

    def __getattr__(self, attr: str) -> Any:
        if self._module is None and attr.startswith("_"):
            # collecting a test module, pytest asks each of its names for ``__test__``,
            # ``__wrapped__``, ``__bases__`` and ``_mock_name``: answered without the import
            raise AttributeError(attr)
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return getattr(self._module, attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name}{' (imported)' if self._module is not None else ''}>"
