"""Gradient processors: transform ``[(grad, var)]`` before the optimizer applies them.

Attach them to an optimizer with :func:`trainbus.tfutils.optimizer.apply_grad_processors`.
"""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable, Sequence

import tensorflow as tf

from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["GradientProcessor", "FilterNoneGrad", "GlobalNormClip", "MapGradient", "SummaryGradient",
           "PrintGradient", "CheckGradient", "ScaleGradient"]

GradList = list[tuple[Any, Any]]


def _var_name(v: Any) -> str:
    return v.op.name


class GradientProcessor:
    """Base class of gradient processors.

    ``process(grads)`` runs ``_process(grads)`` under a name scope named after the class
    (the same scope is reused by later calls of the same processor). Subclasses override
    ``_process(grads)``.
    """

    _name_scope: str | None = None

    def process(self, grads: GradList) -> GradList:
        """Process the symbolic gradients.

        :param grads: list of ``(grad, var)``.
        :return: the processed list of ``(grad, var)``.
        """
        grads = list(grads)
        for i, item in enumerate(grads):
            if not isinstance(item, (tuple, list)) or len(item) != 2:
                raise TypeError(f"{type(self).__name__}.process: item {i} is {item!r}; expected a (grad, var) pair")
        if self._name_scope is None:
            with tf1.name_scope(type(self).__name__) as scope:
                self._name_scope = scope
                return self._process(grads)
        with tf1.name_scope(self._name_scope):
            return self._process(grads)

    def _process(self, grads: GradList) -> GradList:
        raise TypeError(f"{type(self).__name__} must implement _process(grads)")


class FilterNoneGrad(GradientProcessor):
    """Drop the ``(None, var)`` pairs (variables without a gradient) instead of crashing.

    :param verbose: log a warning naming those variables.
    """

    def __init__(self, verbose: bool = True) -> None:
        self._verbose = verbose

    def _process(self, grads: GradList) -> GradList:
        kept, dropped = [], []
        for g, v in grads:
            (dropped if g is None else kept).append((g, v))
        if self._verbose and dropped:
            logger.warning(f"No gradient w.r.t {len(dropped)} trainable variables: {', '.join(_var_name(v) for _, v in dropped)}")
        return kept


class GlobalNormClip(GradientProcessor):
    """Clip all gradients together so that their global norm (the square root of the sum of
    the squared norms of every gradient) is at most ``global_norm``; see
    ``tf.clip_by_global_norm``.

    :param global_norm: the threshold.
    """

    def __init__(self, global_norm: float) -> None:
        try:
            self._norm = float(global_norm)
        except (TypeError, ValueError):
            raise TypeError(f"GlobalNormClip(global_norm=...) needs a number, got {global_norm!r}") from None
        if not self._norm > 0:
            raise ValueError(f"GlobalNormClip(global_norm={global_norm!r}): the threshold must be > 0")

    def _process(self, grads: GradList) -> GradList:
        g = [x[0] for x in grads]
        v = [x[1] for x in grads]
        g, _ = tf.clip_by_global_norm(g, self._norm, name="clip_by_global_norm")
        return list(zip(g, v))


def _arity(func: Callable[..., Any]) -> int:
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return 1
    params = [p for p in sig.parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    if any(p.kind is p.VAR_POSITIONAL for p in sig.parameters.values()):
        return 2
    return len(params)


class MapGradient(GradientProcessor):
    """Apply ``func`` to every gradient whose variable name matches ``regex``; keep the others.

    :param func: ``func(grad)`` or ``func(grad, var)`` returning the new gradient; returning
        ``None`` drops the gradient (the variable is not updated).
    :param regex: matched (in full) against the variable's op name; default all variables.
    """

    def __init__(self, func: Callable[..., Any], regex: str = ".*") -> None:
        if not callable(func):
            raise TypeError(f"MapGradient(func=...) needs a callable, got {func!r}")
        nargs = _arity(func)
        if nargs not in (1, 2):
            raise TypeError(f"MapGradient: func {func!r} must take 1 argument (grad) or 2 (grad, var); it takes {nargs}")
        self._func = func if nargs == 2 else (lambda grad, var: func(grad))
        if not regex.endswith("$"):
            regex = regex + "$"
        try:
            self._regex = re.compile(regex)
        except re.error as e:
            raise ValueError(f"MapGradient: invalid regex {regex!r}: {e}") from None

    def _process(self, grads: GradList) -> GradList:
        ret = []
        matched = False
        for grad, var in grads:
            if self._regex.match(_var_name(var)):
                matched = True
                grad = self._func(grad, var)
                if grad is not None:
                    ret.append((grad, var))
            else:
                ret.append((grad, var))
        if not matched:
            logger.warning(f"[{type(self).__name__}] regex {self._regex.pattern} matches no variable")
        return ret


def _is_main_tower() -> bool:
    from trainbus.tfutils.tower import get_current_tower_context

    ctx = get_current_tower_context()
    return ctx is None or ctx.is_main_training_tower


class SummaryGradient(MapGradient):
    """For every gradient matching ``regex``: a histogram summary ``<var>-grad`` and a moving
    summary of its RMS ``<var>/rms`` (only in the main training tower).

    :param regex: same as in :class:`MapGradient`.
    :param collections: collections of the histogram summaries (default TF's ``SUMMARIES``).
    """

    def __init__(self, regex: str = ".*", collections: Sequence[str] | None = None) -> None:
        super().__init__(self._mapper, regex)
        self._coll = list(collections) if collections is not None else None

    def _mapper(self, grad: Any, var: Any) -> Any:
        if not _is_main_tower():
            return grad
        name = _var_name(var)
        with tf1.name_scope(None):  # tag "<var>-grad", not under the processor's scope
            tf1.summary.histogram(name + "-grad", grad, collections=self._coll)
        rms = tf.sqrt(tf.reduce_mean(tf.square(tf.convert_to_tensor(grad))), name=name.replace(":", "_") + "/rms")
        try:
            from trainbus.tfutils.summary import add_moving_summary
        except ImportError:
            tf1.summary.scalar(rms.op.name, rms, collections=self._coll)
        else:
            add_moving_summary(rms)
        return grad


class PrintGradient(MapGradient):
    """Print statistics (shape, mean, RMS) of the gradients matching ``regex`` every step.

    :param regex: same as in :class:`MapGradient`.
    """

    def __init__(self, regex: str = ".*") -> None:
        super().__init__(self._mapper, regex)

    def _mapper(self, grad: Any, var: Any) -> Any:
        grad = tf.convert_to_tensor(grad)
        name = _var_name(var)
        g32 = tf.cast(grad, tf.float32)
        pr = tf.print(f"gradient of {name}: shape=", tf.shape(grad), "mean=", tf.reduce_mean(g32),
                      "rms=", tf.sqrt(tf.reduce_mean(tf.square(g32))), summarize=-1)
        with tf.control_dependencies([pr]):
            return tf.identity(grad, name="print_" + name.replace("/", "_"))


class CheckGradient(MapGradient):
    """Run ``tf.debugging.check_numerics`` on every gradient: a NaN or Inf raises
    ``InvalidArgumentError`` naming the variable."""

    def __init__(self) -> None:
        super().__init__(self._mapper)

    def _mapper(self, grad: Any, var: Any) -> Any:
        return tf.debugging.check_numerics(tf.convert_to_tensor(grad), "CheckGradient/" + _var_name(var))


class ScaleGradient(MapGradient):
    """Multiply the gradients of some variables by constants.

    :param multipliers: a ``(regex, float)`` pair or a list of them; the first regex that
        matches a variable's name (in full) gives its multiplier. A multiplier of 0 drops the
        gradient (the variable is frozen). Unmatched variables keep their gradient.
    :param verbose: log what is scaled.

    Example (double learning rate for biases, freeze ``layer0``)::

        opt = optimizer.apply_grad_processors(
            opt, [gradproc.ScaleGradient([('.*/b', 2.), ('layer0/.*', 0.)])])
    """

    def __init__(self, multipliers: Any, verbose: bool = True) -> None:
        if isinstance(multipliers, tuple) and len(multipliers) == 2 and isinstance(multipliers[0], str):
            multipliers = [multipliers]
        if not isinstance(multipliers, (list, tuple)):
            raise TypeError(f"ScaleGradient(multipliers=...) needs (regex, float) or a list of them, got {multipliers!r}")
        parsed = []
        for item in multipliers:
            if not (isinstance(item, (list, tuple)) and len(item) == 2 and isinstance(item[0], str)):
                raise TypeError(f"ScaleGradient: {item!r} is not a (regex, float) pair")
            regex, val = item
            try:
                val = float(val)
            except (TypeError, ValueError):
                raise TypeError(f"ScaleGradient: multiplier {val!r} for {regex!r} is not a number") from None
            if not regex.endswith("$"):
                regex = regex + "$"
            parsed.append((re.compile(regex), val))
        self.multipliers = parsed
        self._verbose = verbose
        super().__init__(self._mapper)

    def _mapper(self, grad: Any, var: Any) -> Any:
        name = _var_name(var)
        for regex, val in self.multipliers:
            if regex.match(name):
                if self._verbose:
                    logger.info(f"Gradient of {name} is multiplied by {val}")
                if val == 0:
                    return None
                if isinstance(grad, tf.IndexedSlices):
                    return tf.IndexedSlices(grad.values * val, grad.indices, grad.dense_shape)
                return grad * val
        return grad
