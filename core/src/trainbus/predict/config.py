"""``PredictConfig``: what a predictor needs to build a model's inference graph and load it."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import tensorflow as tf

from trainbus.tfutils.tower import PredictTowerContext, TowerFunc

tf1 = tf.compat.v1

__all__ = ["PredictConfig"]


def _names(value: Any, arg: str) -> list[str]:
    if isinstance(value, str):
        raise TypeError(f"PredictConfig: {arg} must be a list of tensor names, got the string {value!r}; "
                        f"write {arg}=[{value!r}]")
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"PredictConfig: {arg} must be a list of tensor names, got {type(value).__name__} {value!r}")
    for v in value:
        if not isinstance(v, str):
            raise TypeError(f"PredictConfig: every item of {arg} must be a tensor name (str), got {v!r}")
    return list(value)


class PredictConfig:
    """What a predictor (or a model exporter) needs: a tower function and its input signature,
    the names of the tensors to feed and to fetch, and how to create and initialize the session.

    Give the tower function in one of three ways: ``model=`` (a ``ModelDescBase``: its
    ``build_graph`` and ``get_input_signature()``), ``tower_func=`` a :class:`TowerFunc`, or
    ``tower_func=`` a plain function together with ``input_signature=``.

    Example::

        config = PredictConfig(model=MyModel(), session_init=SmartInit("train_log/checkpoint"),
                               input_names=["image"], output_names=["prob"])
        predictor = OfflinePredictor(config)
        prob, = predictor(images)

    :param model: a ``ModelDescBase``.
    :param tower_func: a :class:`TowerFunc`, or a function taking the input tensors positionally.
    :param input_signature: with a plain ``tower_func``: its inputs, a list of ``tf.TensorSpec``.
    :param input_names: the inputs to feed, by name (an input of the signature or any tensor of the
        tower); default: every input of the signature, in order.
    :param output_names: the tensors to fetch (names inside the tower, without tower prefix).
    :param session_creator: a ``tf.compat.v1.train.SessionCreator``; default ``NewSessionCreator()``.
    :param session_init: a ``SessionInit`` loading the variables (e.g. ``SmartInit(checkpoint)``);
        default: leave the initialized values (``JustCurrentSession()``).
    :param return_input: predictors return ``(inputs, outputs)`` instead of ``outputs``.
    :param create_graph: build in a new graph (default), or in the default graph at the time the
        predictor is created.
    """

    def __init__(self, model: Any = None, tower_func: Callable[..., Any] | None = None,
                 input_signature: Sequence[Any] | None = None, input_names: Sequence[str] | None = None,
                 output_names: Sequence[str] | None = None, session_creator: Any = None, session_init: Any = None,
                 return_input: bool = False, create_graph: bool = True, **kwargs: Any) -> None:
        from trainbus.tfutils.sesscreate import NewSessionCreator
        from trainbus.tfutils.sessinit import JustCurrentSession, SessionInit

        if "inputs_desc" in kwargs:  # the older name of input_signature
            input_signature = kwargs.pop("inputs_desc")
        if kwargs:
            raise TypeError(f"PredictConfig got unknown arguments: {sorted(kwargs)}")
        if model is not None:
            if tower_func is not None or input_signature is not None:
                raise ValueError("PredictConfig: give either model= or tower_func= (with input_signature=), not both")
            if not hasattr(model, "build_graph") or not hasattr(model, "get_input_signature"):
                raise TypeError(f"PredictConfig: model must be a ModelDescBase (with build_graph and "
                                f"get_input_signature), got {type(model).__name__} {model!r}")
            input_signature = model.get_input_signature()
            tower_func = TowerFunc(model.build_graph, input_signature)
        else:
            if tower_func is None:
                raise ValueError("PredictConfig needs model=, or tower_func= (a TowerFunc, or a function together "
                                 "with input_signature=)")
            if isinstance(tower_func, TowerFunc):
                if input_signature is None:
                    input_signature = tower_func.input_signature
            elif input_signature is None:
                raise ValueError(f"PredictConfig: tower_func={tower_func!r} is a plain function; give its "
                                 "input_signature= (a list of tf.TensorSpec) or wrap it in TowerFunc(fn, signature)")
            tower_func = TowerFunc(tower_func, input_signature)
        if output_names is None or (isinstance(output_names, (list, tuple)) and not output_names):
            raise ValueError("PredictConfig needs output_names (the names of the tensors to fetch), e.g. "
                             "output_names=['prob']")
        if session_init is None:
            session_init = JustCurrentSession()
        if not isinstance(session_init, SessionInit):
            raise TypeError(f"PredictConfig: session_init must be a SessionInit (e.g. SmartInit(path)), "
                            f"got {type(session_init).__name__} {session_init!r}")
        if session_creator is None:
            session_creator = NewSessionCreator()
        elif not callable(getattr(session_creator, "create_session", None)):
            raise TypeError(f"PredictConfig: session_creator must have create_session() (a "
                            f"tf.compat.v1.train.SessionCreator), got {session_creator!r}")
        self.model = model
        self.tower_func: TowerFunc = tower_func
        self.input_signature = tower_func.input_signature
        self.input_names = (_names(input_names, "input_names") if input_names is not None
                            else [s.name for s in self.input_signature])
        self.output_names = _names(output_names, "output_names")
        self.session_creator = session_creator
        self.session_init = session_init
        self.return_input = bool(return_input)
        self.create_graph = bool(create_graph)

    def __getstate__(self) -> dict:
        # a TowerFunc remembers the towers built with it (graph tensors): pickle the function
        # and its signature only (for predictor worker processes)
        state = dict(self.__dict__)
        state["tower_func"] = (self.tower_func._tower_fn, self.tower_func.input_signature)
        return state

    def __setstate__(self, state: dict) -> None:
        fn, signature = state.pop("tower_func")
        self.__dict__.update(state)
        self.tower_func = TowerFunc(fn, signature)

    def _maybe_create_graph(self) -> Any:
        """A new graph, or the default graph when ``create_graph=False``."""
        return tf.Graph() if self.create_graph else tf1.get_default_graph()

    def build_inference_graph(self) -> tuple[Any, list[Any], list[Any]]:
        """Build the tower once (no prefix) over placeholders; returns ``(graph, inputs, outputs)``:
        the graph (a new one unless ``create_graph=False``) and the tensors named by
        ``input_names`` and ``output_names``. Predictors and
        :class:`~trainbus.tfutils.export.ModelExporter` build their graph with it."""
        from trainbus.input_source import PlaceholderInput

        graph = self._maybe_create_graph()
        with graph.as_default():
            inp = PlaceholderInput()
            inp.setup(self.input_signature)
            with PredictTowerContext(""):
                self.tower_func(*inp.get_input_tensors())
            handle = self.tower_func.towers[-1]
            ins = _tensors(handle, self.input_names, "input_names")
            outs = _tensors(handle, self.output_names, "output_names")
        return graph, ins, outs

    def _create_session(self, graph: Any) -> Any:
        """Create the session over ``graph`` and load the variables into it."""
        with graph.as_default():
            self.session_init._setup_graph()
            sess = self.session_creator.create_session()
            self.session_init._run_init(sess)
        return sess


def _tensors(handle: Any, names: Sequence[str], arg: str) -> list[Any]:
    """The tensors of a tower by name, with an error naming the missing one."""
    out = []
    for n in names:
        try:
            out.append(handle.get_tensor(n))
        except KeyError:
            where = f"tower {handle.ns_name!r}" if handle.ns_name else "the predict tower"
            raise KeyError(f"PredictConfig.{arg}: {where} has no tensor {n!r}; name a tensor the tower function "
                           f"creates (e.g. tf.identity(x, name={n.split(':')[0]!r})) or an input of the "
                           "input signature") from None
    return out
