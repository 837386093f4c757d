"""Optimizer wrappers: gradient processors, post-update ops, gradient accumulation."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any, Callable, Sequence

import tensorflow as tf

from trainbus.tfutils.gradproc import GradientProcessor

tf1 = tf.compat.v1

__all__ = ["apply_grad_processors", "ProxyOptimizer", "PostProcessOptimizer", "VariableAssignmentOptimizer",
           "AccumGradOptimizer"]


def _check_opt(opt: Any, who: str) -> None:
    if not isinstance(opt, tf1.train.Optimizer):
        raise TypeError(f"{who} needs a tf.compat.v1.train.Optimizer, got {opt!r} ({type(opt).__name__}); "
                        "Keras optimizers do not work in graph mode here")


class ProxyOptimizer(tf1.train.Optimizer):
    """An optimizer that hands every call on to ``opt`` (a base for wrappers).

    :param opt: the wrapped ``tf.compat.v1.train.Optimizer``.
    :param name: this optimizer's name.
    """

    def __init__(self, opt: Any, name: str = "ProxyOptimizer") -> None:
        _check_opt(opt, type(self).__name__)
        super().__init__(False, name)
        self._opt = opt

    def compute_gradients(self, *args: Any, **kwargs: Any) -> Any:
        return self._opt.compute_gradients(*args, **kwargs)

    def get_slot(self, *args: Any, **kwargs: Any) -> Any:
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args: Any, **kwargs: Any) -> Any:
        return self._opt.get_slot_names(*args, **kwargs)

    def apply_gradients(self, *args: Any, **kwargs: Any) -> Any:
        return self._opt.apply_gradients(*args, **kwargs)

    def variables(self) -> list[Any]:
        return self._opt.variables()


class _ApplyGradientProcessor(ProxyOptimizer):
    def __init__(self, opt: Any, gradprocs: Sequence[GradientProcessor]) -> None:
        super().__init__(opt, name="ApplyGradientProcessor")
        self._gradprocs = list(gradprocs)

    def apply_gradients(self, grads_and_vars: Any, global_step: Any = None, name: Any = None) -> Any:
        g = list(grads_and_vars)
        for proc in self._gradprocs:
            g = proc.process(g)
        return self._opt.apply_gradients(g, global_step=global_step, name=name)


def apply_grad_processors(opt: Any, gradprocs: Sequence[GradientProcessor]) -> Any:
    """An optimizer that runs ``gradprocs`` (in order) on the gradients before ``opt``
    applies them.

    :param opt: a ``tf.compat.v1.train.Optimizer``.
    :param gradprocs: list of :class:`~trainbus.tfutils.gradproc.GradientProcessor`.
    :return: a ``tf.compat.v1.train.Optimizer``.
    """
    if isinstance(gradprocs, GradientProcessor) or not isinstance(gradprocs, (list, tuple)):
        raise TypeError(f"apply_grad_processors(gradprocs=...) needs a list of GradientProcessor, got {gradprocs!r}")
    for i, p in enumerate(gradprocs):
        if not isinstance(p, GradientProcessor):
            raise TypeError(f"apply_grad_processors: gradprocs[{i}] is {p!r}, not a GradientProcessor")
    return _ApplyGradientProcessor(opt, gradprocs)


class PostProcessOptimizer(ProxyOptimizer):
    """After the update, run ``func(var)`` for every updated variable (e.g. clipping or
    quantization of the weights).

    :param opt: the wrapped optimizer.
    :param func: ``tf.Variable -> tf.Operation or None``; runs after the update of the variable.
    :param colocate: place the op with the variable.
    """

    def __init__(self, opt: Any, func: Callable[[Any], Any], colocate: bool = True) -> None:
        if not callable(func):
            raise TypeError(f"{type(self).__name__}(func=...) needs a callable, got {func!r}")
        super().__init__(opt, name=type(self).__name__)
        self._func = func
        self._colocate = colocate

    def apply_gradients(self, grads_and_vars: Any, global_step: Any = None, name: Any = None) -> Any:
        grads_and_vars = list(grads_and_vars)
        update_op = self._opt.apply_gradients(grads_and_vars, global_step=global_step, name=name)
        ops = []
        with tf.control_dependencies([update_op]):
            for _, var in grads_and_vars:
                with ExitStack() as stack:
                    if self._colocate:
                        stack.enter_context(tf1.colocate_with(var))
                    op = self._func(var)
                if op is not None:
                    if not isinstance(op, tf.Operation):
                        raise TypeError(f"{type(self).__name__}: func returned {op!r} for {var.op.name}; "
                                        "expected a tf.Operation or None")
                    ops.append(op)
        return tf.group(update_op, *ops, name=name or "post_process_update")


class VariableAssignmentOptimizer(PostProcessOptimizer):
    """After the update, assign ``func(var)`` to every updated variable (e.g. clipping).

    :param opt: the wrapped optimizer.
    :param func: ``tf.Variable -> tf.Tensor or None``: the variable's new value.
    """

    def __init__(self, opt: Any, func: Callable[[Any], Any]) -> None:
        if not callable(func):
            raise TypeError(f"VariableAssignmentOptimizer(func=...) needs a callable, got {func!r}")

        def assign(var: Any) -> Any:
            t = func(var)
            if t is None:
                return None
            op = tf1.assign(var, t, use_locking=False)
            return op if isinstance(op, tf.Operation) else op.op

        super().__init__(opt, assign)


class AccumGradOptimizer(ProxyOptimizer):
    """Accumulate the gradients of ``niter`` ``minimize()`` runs and apply their sum in every
    ``niter``-th run (the others only accumulate). This is like a ``niter`` times larger batch
    with a ``niter`` times larger learning rate, with the memory of one batch.

    One ``Session.run`` of the returned op either accumulates, or accumulates, applies the
    sum with the wrapped optimizer and resets the accumulators: the steps are ordered by
    control dependencies, so the result is deterministic.

    :param opt: the wrapped optimizer.
    :param niter: number of runs to accumulate.

    Example::

        opt = AccumGradOptimizer(tf.compat.v1.train.GradientDescentOptimizer(0.01), niter=5)
        train_op = opt.minimize(loss)
    """

    def __init__(self, opt: Any, niter: int) -> None:
        super().__init__(opt, name="AccumGrad")
        if isinstance(niter, bool) or not isinstance(niter, int) or niter < 1:
            raise ValueError(f"AccumGradOptimizer(niter={niter!r}): niter must be an int >= 1")
        self._niter = niter

    def _create_accum_slots(self, var_list: Sequence[Any]) -> list[Any]:
        return [self._zeros_slot(v, "accum_grad", self._name) for v in var_list]

    def apply_gradients(self, grads_and_vars: Any, global_step: Any = None, name: Any = None) -> Any:
        grads_and_vars = [(g, v) for g, v in grads_and_vars if g is not None]
        if not grads_and_vars:
            raise ValueError("AccumGradOptimizer.apply_gradients: no variable has a gradient")
        vs = [v for _, v in grads_and_vars]
        with tf1.name_scope(None):
            slots = self._create_accum_slots(vs)
            counter = tf1.Variable(0, dtype=tf.int32, trainable=False, name=self._name + "/counter")
        with tf1.name_scope(name or "AccumGradOptimizer"):
            accum_ops = [tf1.assign_add(s, tf.convert_to_tensor(g))  # IndexedSlices -> dense
                         for s, (g, _) in zip(slots, grads_and_vars)]
            with tf.control_dependencies(accum_ops):
                new_count = tf1.assign_add(counter, 1)
            pred = tf.equal(tf.math.floormod(new_count, self._niter), 0)

            def apply_and_reset() -> Any:
                reads = [tf.identity(s) for s in slots]
                update = self._opt.apply_gradients(list(zip(reads, vs)))
                with tf.control_dependencies([update]):
                    resets = [tf1.assign(s, tf.zeros_like(s)) for s in slots]
                with tf.control_dependencies(resets):
                    return tf.constant(True)

            def only_accumulate() -> Any:
                return tf.constant(False)

            with tf.control_dependencies(accum_ops + [new_count]):
                applied = tf.cond(pred, apply_and_reset, only_accumulate, name="maybe_apply")
            deps = [applied]
            if global_step is not None:
                with tf.control_dependencies(deps):
                    deps.append(tf1.assign_add(global_step, 1))
            return tf.group(*deps, name="update")
