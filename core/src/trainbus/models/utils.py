"""``VariableHolder``: named access to the variables a layer made."""

from __future__ import annotations

from typing import Any

__all__ = ["VariableHolder"]


class VariableHolder:
    """Attribute access to a layer's variables: ``out.variables.W``.

    Names are set once: ``holder.b = var`` adds a variable; setting a name twice is an error.
    """

    def __init__(self, **kwargs: Any) -> None:
        self._vars: dict[str, Any] = {}
        for k, v in kwargs.items():
            self._add_variable(k, v)

    def _add_variable(self, name: str, var: Any) -> None:
        if name in self._vars:
            raise ValueError(f"VariableHolder: a variable named {name!r} is already held ({self._vars[name]!r})")
        self._vars[name] = var

    def __setattr__(self, name: str, var: Any) -> None:
        if name.startswith("_"):
            super().__setattr__(name, var)
        else:
            self._add_variable(name, var)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._vars[name]
        except KeyError:
            raise AttributeError(f"VariableHolder has no variable {name!r}; it holds {sorted(self._vars)}") from None

    def all(self) -> list[Any]:
        """Every variable held, in the order they were added."""
        return list(self._vars.values())
