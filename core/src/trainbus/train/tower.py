"""Trainers that build their graph from a tower function."""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import tensorflow as tf

from trainbus.train.base import Trainer
from trainbus.tfutils.tower import PredictTowerContext, TowerFunc, TowerTensorHandles, get_current_tower_context

tf1 = tf.compat.v1

__all__ = ["TowerTrainer", "SingleCostTrainer"]


class TowerTrainer(Trainer):
    """A trainer whose model is built by calling ``tower_func`` under a TowerContext, which
    lets it rebuild the model (predictors, inference towers). ``tower_func`` can be set once."""

    _tower_func: TowerFunc | None = None

    def _set_tower_func(self, tower_func: TowerFunc) -> None:
        if not isinstance(tower_func, TowerFunc):
            raise TypeError(f"tower_func must be a TowerFunc(fn, input_signature), got {tower_func!r}")
        if self._tower_func is not None:
            raise RuntimeError("tower_func of a TowerTrainer can only be set once")
        self._tower_func = tower_func

    @property
    def tower_func(self) -> TowerFunc | None:
        """The :class:`TowerFunc` that builds the model."""
        return self._tower_func

    @tower_func.setter
    def tower_func(self, val: TowerFunc) -> None:
        self._set_tower_func(val)

    @property
    def inputs_desc(self) -> list[Any]:
        """The input signature (list of ``tf.TensorSpec``) of the tower."""
        return self.tower_func.input_signature

    input_signature = inputs_desc

    @property
    def towers(self) -> TowerTensorHandles:
        """Handles of every tower built so far (``trainer.towers.training()[0]['loss']``)."""
        if self._tower_func is None:
            raise RuntimeError("towers are available after the graph is set up (tower_func is not set yet)")
        return self._tower_func.towers

    def get_predictor(self, input_names: Sequence[str], output_names: Sequence[str], device: int = 0) -> Any:
        """Build the tower once more under ``TowerContext(is_training=False)`` (sharing the
        variables) and return an :class:`~trainbus.predict.OnlinePredictor` for it.

        :param device: build on ``/gpu:{device}``, or ``/cpu:0`` for -1.
        """
        from trainbus.input_source import PlaceholderInput
        from trainbus.predict import OnlinePredictor

        if self._tower_func is None:
            raise RuntimeError("get_predictor() needs the graph to be set up first")
        dev = f"/gpu:{device}" if device >= 0 else "/cpu:0"
        tower_name = f"tower-pred-{device}" if device >= 0 else "tower-pred-cpu"
        with self.graph.as_default():
            try:
                handle = self.tower_func.towers[tower_name]
            except KeyError:
                with tf1.device(dev), PredictTowerContext(tower_name):
                    inp = PlaceholderInput()
                    inp.use_name_scope(tower_name)
                    with tf1.name_scope(None):
                        inp.setup([tf.TensorSpec(s.shape, s.dtype, f"{tower_name}/{s.name}") for s in self.inputs_desc])
                    self.tower_func(*inp.get_input_tensors())
                handle = self.tower_func.towers[tower_name]
            in_tensors = handle.get_tensors(list(input_names))
            out_tensors = handle.get_tensors(list(output_names))
        return OnlinePredictor(in_tensors, out_tensors)


class SingleCostTrainer(TowerTrainer):
    """Base of trainers that minimize one cost. ``setup_graph(inputs_desc, input,
    get_cost_fn, get_opt_fn)`` builds the training graph; then call ``train``."""

    #: ``gate_gradients`` of ``Optimizer.compute_gradients``.
    GATE_GRADIENTS = False
    #: ``colocate_gradients_with_ops``; may matter for speed on multi-device.
    COLOCATE_GRADIENTS_WITH_OPS = True
    #: ``aggregation_method`` of ``tf.gradients``.
    AGGREGATION_METHOD = None
    #: compile the tower function with XLA (strong restrictions on the tower).
    XLA_COMPILE = False

    def setup_graph(self, inputs_desc: Sequence[Any], input: Any, get_cost_fn: Callable[..., Any],
                    get_opt_fn: Callable[[], Any]) -> None:
        """Build the main training graph.

        :param inputs_desc: list of ``tf.TensorSpec``.
        :param input: an :class:`~trainbus.input_source.InputSource`.
        :param get_cost_fn: builds the cost from input tensors (part of the tower function).
        :param get_opt_fn: returns the optimizer; called once.
        """
        from trainbus.input_source import InputSource

        if not isinstance(input, InputSource):
            raise TypeError(f"setup_graph: input must be an InputSource (e.g. QueueInput(dataflow)), got {input!r}")
        get_cost_fn = TowerFunc(get_cost_fn, inputs_desc)
        get_opt_fn = functools.lru_cache(maxsize=None)(get_opt_fn)
        self.tower_func = get_cost_fn
        self._input_source = input
        with self.graph.as_default():
            input_callbacks = input.setup(self.inputs_desc)
            self._step_feed = input.step_feed()  # fed by hooked_sess in the step's own Session.run
            train_callbacks = self._setup_graph(input, get_cost_fn, get_opt_fn)
        self.register_callback(list(input_callbacks) + list(train_callbacks or []))

    def _setup_graph(self, input: Any, get_cost_fn: TowerFunc, get_opt_fn: Callable[[], Any]) -> list:
        """Build the towers and set ``self.train_op``; return extra callbacks."""
        raise TypeError(f"{type(self).__name__} must implement _setup_graph(input, get_cost_fn, get_opt_fn)")

    def _make_get_grad_fn(self, input: Any, get_cost_fn: TowerFunc, get_opt_fn: Callable[[], Any]) -> Callable[[], Any]:
        """A function that builds the tower in the current TowerContext and returns its
        ``[(grad, var)]`` (``None`` in an inference tower)."""
        def grads_from_inputs(inputs: Sequence[Any]) -> Any:
            ctx = get_current_tower_context()
            cost = get_cost_fn(*inputs)
            if not isinstance(cost, tf.Tensor) or cost.shape.ndims not in (0, None):
                raise TypeError(f"the cost function must return a scalar tf.Tensor, got {cost!r}")
            if not ctx.is_training:
                return None
            varlist = ctx.get_collection_in_tower(tf1.GraphKeys.TRAINABLE_VARIABLES) if ctx.has_own_variables \
                else tf1.trainable_variables()
            opt = get_opt_fn()
            grads = opt.compute_gradients(
                cost, var_list=varlist, gate_gradients=self.GATE_GRADIENTS,
                colocate_gradients_with_ops=self.COLOCATE_GRADIENTS_WITH_OPS,
                aggregation_method=self.AGGREGATION_METHOD)
            if any(g is None for g, _ in grads):
                # variables without a gradient are dropped with a warning (the gradient
                # processors are imported only then: a model where every variable has one needs none)
                from trainbus.tfutils.gradproc import FilterNoneGrad

                return FilterNoneGrad().process(grads)
            return grads

        def get_grad_fn() -> Any:
            return grads_from_inputs(input.get_input_tensors())

        if not self.XLA_COMPILE:
            return get_grad_fn

        def xla_get_grad_fn() -> Any:
            from tensorflow.python.compiler.xla import xla

            # The input tensors are taken here, outside the compiled computation: a dequeue, an
            # unstage or a dataset's get_next has no XLA kernel, and XLA compiles only the model
            # (the computation reads the inputs as tensors captured from outside it).
            inputs = input.get_input_tensors()
            if not get_current_tower_context().is_training:
                return grads_from_inputs(inputs)
            variables: list[Any] = []

            def xla_fn() -> Any:
                grads = grads_from_inputs(inputs)
                variables.extend(v for _, v in grads)
                return [g for g, _ in grads]  # a flat list: XLA returns no nested structure

            compiled = xla.compile(xla_fn)
            return list(zip(compiled, variables))

        return xla_get_grad_fn
