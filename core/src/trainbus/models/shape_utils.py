"""Shapes whose axes are known statically where possible and computed at run time otherwise."""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

__all__: list[str] = []


class StaticDynamicShape:
    """The shape of a tensor, per axis: a static int when known, else a scalar tensor.

    ``apply(axis, f)`` maps one axis (statically if it is known, else on the tensor);
    ``get_static()`` gives the static list (None for unknown axes) and ``get_dynamic()`` the
    values to build a shape tensor from.
    """

    def __init__(self, tensor: Any) -> None:
        if not isinstance(tensor, (tf.Tensor, tf.Variable)):
            raise TypeError(f"StaticDynamicShape needs a tf.Tensor, got {tensor!r}")
        self.static: list[int | None] = tensor.shape.as_list()
        dyn = None if tensor.shape.is_fully_defined() else tf.shape(tensor)
        self._dynamic: list[Callable[[], Any]] = []
        for k, s in enumerate(self.static):
            if s is not None:
                self._dynamic.append(lambda s=s: s)
            else:
                self._dynamic.append(lambda k=k: dyn[k])

    @property
    def ndims(self) -> int:
        return len(self.static)

    def apply(self, axis: int, f: Callable[[Any], Any]) -> None:
        """Replace axis ``axis`` by ``f(axis)``."""
        s = self.static[axis]
        if s is not None:
            try:
                v = f(s)
            except TypeError:
                pass
            else:
                self.static[axis] = v
                self._dynamic[axis] = lambda v=v: v
                return
        self.static[axis] = None
        prev = self._dynamic[axis]
        self._dynamic[axis] = lambda: f(prev())

    def get_static(self) -> list[int | None]:
        return list(self.static)

    def get_dynamic(self, axis: int | None = None) -> Any:
        if axis is None:
            return [d() for d in self._dynamic]
        return self._dynamic[axis]()
