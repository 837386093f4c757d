"""LinearWrap: write a chain of layers as one expression."""

from __future__ import annotations

from typing import Any, Callable

from trainbus.models.registry import get_registered_layer

__all__ = ["LinearWrap"]


class LinearWrap:
    """Chain layers: each registered layer is a method that takes the same arguments as the
    layer, minus the input::

        logits = (LinearWrap(image)
                  .Conv2D('conv0', 32, 3, activation=tf.nn.relu)
                  .MaxPooling('pool0', 2)
                  .FullyConnected('fc', 10)())

    ``.apply(func, *args, **kwargs)`` calls ``func(tensor, *args, **kwargs)``;
    ``.apply2(func, *args, **kwargs)`` calls ``func(args[0], tensor, *args[1:], **kwargs)``;
    ``.tf.<op>(...)`` calls ``tf.<op>(tensor, ...)``; ``()`` or ``.tensor()`` returns the tensor.
    """

    class _TFModule:
        """``.tf.<path>``: TensorFlow's module, falling back to its ``tf.compat.v1`` counterpart
        for the TF 1 names scripts written for tensorpack use (``.tf.image.resize_nearest_neighbor``)."""

        def __init__(self, mod: Any, tensor: Any, v1: Any = None) -> None:
            self._mod = mod
            self._v1 = v1
            self._t = tensor

        def __getattr__(self, name: str) -> Any:
            try:
                attr = getattr(self._mod, name)
            except AttributeError:
                if self._v1 is None or not hasattr(self._v1, name):
                    raise AttributeError(f"LinearWrap: .tf.{name}: neither TensorFlow nor tf.compat.v1 has it "
                                         f"here ({getattr(self._mod, '__name__', self._mod)})") from None
                attr = getattr(self._v1, name)
            if callable(attr):
                return lambda *args, **kwargs: LinearWrap(attr(self._t, *args, **kwargs))
            return LinearWrap._TFModule(attr, self._t, getattr(self._v1, name, None))

    def __init__(self, tensor: Any) -> None:
        self._t = tensor

    def __getattr__(self, layer_name: str) -> Any:
        if layer_name.startswith("__"):
            raise AttributeError(layer_name)
        layer = get_registered_layer(layer_name)
        if layer is None:
            if layer_name == "tf":
                import tensorflow as tf

                return LinearWrap._TFModule(tf, self._t, tf.compat.v1)
            raise AttributeError(f"LinearWrap: no registered layer named {layer_name!r} "
                                 "(register it with trainbus.models.registry.layer_register)")
        use_scope = getattr(layer, "use_scope", True)

        def call(*args: Any, **kwargs: Any) -> LinearWrap:
            if use_scope or (use_scope is None and args and isinstance(args[0], str)):
                if not args or not isinstance(args[0], str):
                    raise TypeError(f"LinearWrap.{layer_name} needs the layer name as first argument")
                return LinearWrap(layer(args[0], self._t, *args[1:], **kwargs))
            return LinearWrap(layer(self._t, *args, **kwargs))

        return call

    def apply(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> LinearWrap:
        """``func(tensor, *args, **kwargs)``, wrapped."""
        return LinearWrap(func(self._t, *args, **kwargs))

    def apply2(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> LinearWrap:
        """``func(args[0], tensor, *args[1:], **kwargs)``, wrapped (for layers taking a name first)."""
        if not args:
            raise TypeError("LinearWrap.apply2 needs at least one argument (placed before the tensor)")
        return LinearWrap(func(args[0], self._t, *args[1:], **kwargs))

    def __call__(self) -> Any:
        return self._t

    def tensor(self) -> Any:
        """The wrapped tensor."""
        return self._t

    def print_tensor(self) -> LinearWrap:
        """Print the tensor (name and static shape) now, and go on."""
        print(self._t)
        return self
