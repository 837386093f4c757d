"""Predictors: run a trained model's inference graph."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import tensorflow as tf


from trainbus.tfutils.tower import PredictTowerContext, TowerFunc

tf1 = tf.compat.v1

__all__ = ["PredictConfig", "OnlinePredictor", "OfflinePredictor"]


class OnlinePredictor:
    """A callable that feeds ``input_tensors`` and returns the values of ``output_tensors``.

    :param sess: the session to run in; ``None`` uses the default session at call time.
    :param return_input: also return the inputs, as ``(inputs, outputs)``.
    """

    def __init__(self, input_tensors: Sequence[Any], output_tensors: Sequence[Any], return_input: bool = False,
                 sess: Any = None) -> None:
        self.input_tensors = list(input_tensors)
        self.output_tensors = list(output_tensors)
        self.return_input = return_input
        self.sess = sess
        self._callable: Any = None
        self._callable_sess: Any = None

    def __call__(self, *dp: Any) -> Any:
        if len(dp) != len(self.input_tensors):
            raise ValueError(f"the predictor takes {len(self.input_tensors)} inputs "
                             f"({[t.name for t in self.input_tensors]}), got {len(dp)}")
        sess = self.sess if self.sess is not None else tf1.get_default_session()
        if sess is None:
            raise RuntimeError("OnlinePredictor: no session; pass sess= or call it under a default session")
        if self._callable is None or self._callable_sess is not sess:
            self._callable = sess.make_callable(self.output_tensors, feed_list=self.input_tensors)
            self._callable_sess = sess
        output = self._callable(*dp)
        return (dp, output) if self.return_input else output


class PredictConfig:
    """What an :class:`OfflinePredictor` (or a model exporter) needs.

    :param model: a ``ModelDescBase``; gives ``tower_func`` and ``input_signature``.
    :param tower_func: instead of ``model``: a function building the graph from inputs.
    :param input_signature: with ``tower_func``: list of ``tf.TensorSpec``.
    :param input_names: names of the inputs to feed (default: all of the signature).
    :param output_names: names of the tensors to fetch.
    :param session_creator: default ``NewSessionCreator()``.
    :param session_init: how to load the variables (e.g. ``SmartInit(checkpoint)``).
    :param return_input: the predictor also returns its inputs.
    :param create_graph: build in a new graph (else in the default graph).
    """

    def __init__(self, model: Any = None, tower_func: Callable[..., Any] | None = None,
                 input_signature: Sequence[Any] | None = None, input_names: Sequence[str] | None = None,
                 output_names: Sequence[str] | None = None, session_creator: Any = None, session_init: Any = None,
                 return_input: bool = False, create_graph: bool = True, **kwargs: Any) -> None:
        if "inputs_desc" in kwargs:
            input_signature = kwargs.pop("inputs_desc")
        if kwargs:
            raise TypeError(f"PredictConfig got unknown arguments: {sorted(kwargs)}")
        if model is not None:
            if tower_func is not None or input_signature is not None:
                raise ValueError("PredictConfig: give either model= or tower_func= with input_signature=, not both")
            input_signature = model.get_input_signature()
            tower_func = TowerFunc(model.build_graph, input_signature)
        else:
            if tower_func is None or input_signature is None:
                raise ValueError("PredictConfig needs model=, or tower_func= together with input_signature=")
            if not isinstance(tower_func, TowerFunc):
                tower_func = TowerFunc(tower_func, input_signature)
        if not output_names:
            raise ValueError("PredictConfig needs output_names (the tensors to fetch)")
        self.model = model
        self.tower_func = tower_func
        self.input_signature = tower_func.input_signature
        self.input_names = list(input_names) if input_names is not None else [s.name for s in self.input_signature]
        self.output_names = list(output_names)
        self.session_creator = session_creator
        self.session_init = session_init
        self.return_input = return_input
        self.create_graph = create_graph

    def _build(self) -> tuple[Any, list[Any], list[Any]]:
        """Build the inference tower in a graph; returns ``(graph, inputs, outputs)``."""
        from trainbus.input_source import PlaceholderInput

        graph = tf.Graph() if self.create_graph else tf1.get_default_graph()
        with graph.as_default():
            inp = PlaceholderInput()
            inp.setup(self.input_signature)
            with PredictTowerContext(""):
                self.tower_func(*inp.get_input_tensors())
            handle = self.tower_func.towers[-1]
            ins = handle.get_tensors(self.input_names)
            outs = handle.get_tensors(self.output_names)
        return graph, ins, outs


class OfflinePredictor(OnlinePredictor):
    """Build the graph of a :class:`PredictConfig` in a new graph, create a session, load the
    variables, and predict."""

    def __init__(self, config: PredictConfig) -> None:
        from trainbus.tfutils.sesscreate import NewSessionCreator
        from trainbus.tfutils.sessinit import JustCurrentSession

        self.graph, ins, outs = config._build()
        with self.graph.as_default():
            init = config.session_init or JustCurrentSession()
            init._setup_graph()
            sess = (config.session_creator or NewSessionCreator()).create_session()
            init._run_init(sess)
        super().__init__(ins, outs, config.return_input, sess)


