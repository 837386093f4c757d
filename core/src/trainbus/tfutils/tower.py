"""Tower contexts and tower functions: build a model several times (training towers,
inference towers) and find each build's tensors again."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import tensorflow as tf

from trainbus.tfutils.collection import backup_collection, restore_collection
from trainbus.tfutils.common import get_op_or_tensor_by_name, get_op_tensor_name

tf1 = tf.compat.v1

__all__ = ["get_current_tower_context", "BaseTowerContext", "TowerContext", "TrainTowerContext",
           "PredictTowerContext", "TowerFunc", "TowerFuncWrapper", "TowerTensorHandle", "TowerTensorHandles",
           "tower_freeze_keys"]

_CurrentTowerContext: BaseTowerContext | None = None


#: collection of the moving-average summary ops (``add_moving_summary``)
MOVING_SUMMARY_OPS_KEY = "MOVING_SUMMARY_OPS"


def tower_freeze_keys() -> list[str]:
    """The graph collections a tower must leave as it found them.

    An inference or predict tower adds nothing to ``SUMMARIES``, to the
    moving-summary collection (``MOVING_SUMMARY_OPS``) and to ``UPDATE_OPS``: a summary or an
    update op built there would need that tower's inputs, which the training step does not
    feed. A training tower other than the first freezes the same three
    collections, so summaries and update ops exist once, for the main tower.
    """

    return [tf1.GraphKeys.SUMMARIES, MOVING_SUMMARY_OPS_KEY, tf1.GraphKeys.UPDATE_OPS]


class BaseTowerContext:
    """A context a model is built in; create one with :func:`TowerContext`."""

    def __init__(self, ns_name: str, vs_name: str = "") -> None:
        self._name = ns_name
        self._vs_name = vs_name
        if vs_name and not ns_name:
            raise ValueError("TowerContext: a tower with its own variable scope needs a name scope too")
        self._ctxs: list[Any] = []
        self._starts: dict[str, int] = {}
        self._ends: dict[str, int] | None = None

    @property
    def is_main_training_tower(self) -> bool:
        """Whether this is the main (first) training tower."""
        return False

    @property
    def has_own_variables(self) -> bool:
        """Whether this tower creates its own trainable variables."""
        return False

    @property
    def is_training(self) -> bool:
        return False

    @property
    def name(self) -> str:
        """The name scope of the tower."""
        return self._name

    @property
    def ns_name(self) -> str:
        """The name scope of the tower."""
        return self._name

    @property
    def vs_name(self) -> str:
        """The variable scope of the tower."""
        return self._vs_name

    def get_collection_in_tower(self, key: str) -> list[Any]:
        """Items added to collection ``key`` while this tower was being built (the items
        added between entering and leaving the context, not necessarily created in it)."""
        items = tf1.get_default_graph().get_collection(key)
        start = self._starts.get(key, 0)
        end = None if self._ends is None else self._ends.get(key, start)
        return items[start:end]

    def _get_scopes(self) -> list[Any]:
        return []

    def _keys_to_freeze(self) -> list[str]:
        """Collections restored on exit to their content at entry (see :func:`tower_freeze_keys`)."""
        return []

    def __enter__(self) -> BaseTowerContext:
        global _CurrentTowerContext
        if _CurrentTowerContext is not None:
            raise RuntimeError(f"cannot nest TowerContext {self._name!r} inside {_CurrentTowerContext.name!r}")
        _CurrentTowerContext = self
        g = tf1.get_default_graph()
        self._starts = {k: len(g.get_collection(k)) for k in g.get_all_collection_keys()}
        self._ends = None
        self._frozen = backup_collection(self._keys_to_freeze())
        self._ctxs = self._get_scopes()
        for c in self._ctxs:
            c.__enter__()
        return self

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> bool:
        global _CurrentTowerContext
        _CurrentTowerContext = None
        for c in reversed(self._ctxs):
            c.__exit__(exc_type, exc_val, exc_tb)
        g = tf1.get_default_graph()
        with g.as_default():
            restore_collection(self._frozen)
        self._ends = {k: len(g.get_collection(k)) for k in g.get_all_collection_keys()}
        return False

    def __str__(self) -> str:
        return f"TowerContext(name={self._name!r}, is_training={self.is_training})"


class TrainTowerContext(BaseTowerContext):
    """A training tower. ``index``/``total`` place it among data-parallel towers; a tower
    with ``index > 0`` adds nothing to ``SUMMARIES``, ``MOVING_SUMMARY_OPS`` or ``UPDATE_OPS``."""

    def __init__(self, ns_name: str, vs_name: str = "", index: int = 0, total: int = 1) -> None:
        super().__init__(ns_name, vs_name)
        self.index = int(index)
        self.total = int(total)
        if not 0 <= self.index < self.total:
            raise ValueError(f"TrainTowerContext: index {index} out of range for {total} towers")

    @property
    def is_training(self) -> bool:
        return True

    @property
    def is_main_training_tower(self) -> bool:
        return self.index == 0

    @property
    def has_own_variables(self) -> bool:
        return self.index == 0 or len(self._vs_name) > 0

    def _keys_to_freeze(self) -> list[str]:
        return [] if self.index == 0 else tower_freeze_keys()

    def _get_scopes(self) -> list[Any]:
        if not self._name:
            return []
        ret = []
        if self._vs_name:
            ret.append(tf1.variable_scope(self._vs_name))
        else:
            # shared variables: towers after the first reuse the first one's
            ret.append(tf1.variable_scope(tf1.get_variable_scope(), reuse=self.index > 0 or None))
        ret.append(tf1.name_scope(self._name + "/"))
        return ret


class PredictTowerContext(BaseTowerContext):
    """An inference tower: reuses variables that exist, creates the ones that do not (so a
    predictor can also be built in a fresh graph). Nothing built inside it lands in
    ``SUMMARIES``, ``MOVING_SUMMARY_OPS`` or ``UPDATE_OPS``."""

    def __init__(self, ns_name: str, vs_name: str = "") -> None:
        super().__init__(ns_name, vs_name)

    def _keys_to_freeze(self) -> list[str]:
        return tower_freeze_keys()

    def _get_scopes(self) -> list[Any]:
        ret = [tf1.variable_scope(self._vs_name or tf1.get_variable_scope(), reuse=tf1.AUTO_REUSE)]
        if self._name:
            ret.append(tf1.name_scope(self._name + "/"))
        return ret


def TowerContext(tower_name: str, is_training: bool, vs_name: str = "") -> BaseTowerContext:
    """The context for a tower function: ``with TowerContext('', is_training=True): ...``."""
    if is_training:
        return TrainTowerContext(tower_name, vs_name=vs_name)
    return PredictTowerContext(tower_name, vs_name=vs_name)


def get_current_tower_context() -> BaseTowerContext | None:
    """The TowerContext being built in, or None."""
    return _CurrentTowerContext


def _to_spec(x: Any) -> Any:
    if isinstance(x, tf.TensorSpec):
        return x
    if isinstance(x, tf.Tensor):
        return tf.TensorSpec(shape=x.shape, dtype=x.dtype, name=x.op.name)
    build = getattr(x, "build_placeholder", None)  # tensorpack-style InputDesc
    if build is not None:
        return tf.TensorSpec(shape=x.shape, dtype=x.type, name=x.name)
    raise TypeError(f"an input signature entry must be a tf.TensorSpec (or a placeholder), got {x!r}")


class TowerFunc:
    """A function that builds one tower; records every call's context, inputs and outputs.

    :param tower_fn: builds the tower from input tensors; may return anything.
    :param input_signature: list of ``tf.TensorSpec`` naming the inputs.
    """

    def __init__(self, tower_fn: Callable[..., Any], input_signature: Sequence[Any]) -> None:
        if isinstance(tower_fn, TowerFunc):
            tower_fn = tower_fn._tower_fn
        if not callable(tower_fn):
            raise TypeError(f"TowerFunc: tower_fn must be callable, got {tower_fn!r}")
        self._tower_fn = tower_fn
        self._input_signature = [_to_spec(s) for s in input_signature]
        names = [s.name for s in self._input_signature]
        if len(set(names)) != len(names) or any(not n for n in names):
            raise ValueError(f"TowerFunc: every input of the signature needs a distinct name, got {names}")
        self._handles: list[TowerTensorHandle] = []

    def __call__(self, *args: Any) -> Any:
        ctx = get_current_tower_context()
        if ctx is None:
            raise RuntimeError("a tower function must be called under a TowerContext")
        output = self._tower_fn(*args)
        self._handles.append(TowerTensorHandle(ctx, args, output, self._input_signature))
        return output

    @property
    def towers(self) -> TowerTensorHandles:
        """A :class:`TowerTensorHandles` over every call so far."""
        return TowerTensorHandles(self._handles)

    @property
    def input_signature(self) -> list[Any]:
        return list(self._input_signature)


#: tensorpack's older name
TowerFuncWrapper = TowerFunc


class TowerTensorHandle:
    """Access to one tower's tensors, inputs and outputs by name."""

    def __init__(self, ctx: BaseTowerContext, inputs: Sequence[Any], outputs: Any,
                 input_signature: Sequence[Any] | None = None) -> None:
        self._ctx = ctx
        self._inputs = list(inputs)
        self._outputs = outputs
        self._extra: dict[str, Any] = {}
        if input_signature is not None:
            for spec, t in zip(input_signature, inputs):
                if spec.name:
                    self._extra[get_op_tensor_name(spec.name)[1]] = t

    @property
    def vs_name(self) -> str:
        return self._ctx.vs_name

    @property
    def ns_name(self) -> str:
        return self._ctx.ns_name

    @property
    def is_training(self) -> bool:
        return self._ctx.is_training

    def get_tensor(self, name: str) -> Any:
        """An input of this tower by its name in the input signature, or a tensor of this
        tower by its name without the tower prefix."""
        name = get_op_tensor_name(name)[1]
        if name in self._extra:
            # an input name means this tower's input, even when the graph also has a tensor
            # of that name (the signature's placeholders exist under every input source)
            return self._extra[name]
        full = f"{self.ns_name}/{name}" if self.ns_name else name
        try:
            with self._graph().as_default():
                return get_op_or_tensor_by_name(full)
        except KeyError:
            raise KeyError(f"tower {self.ns_name!r} has no tensor {name!r}") from None

    def get_tensors(self, names: Sequence[str]) -> list[Any]:
        return [self.get_tensor(n) for n in names]

    def __getitem__(self, name: str) -> Any:
        return self.get_tensor(name)

    def get_variable(self, name: str) -> Any:
        """A variable of this tower by its name without the tower's variable scope: the
        ``tf.Variable`` itself when the graph has one of that name (so ``sess.run`` gives its
        value, also for resource variables), else the tensor of that name."""
        name = get_op_tensor_name(name)[1]
        full = f"{self.vs_name}/{name}" if self.vs_name else name
        graph = self._graph()
        for key in (tf1.GraphKeys.GLOBAL_VARIABLES, tf1.GraphKeys.LOCAL_VARIABLES):
            for v in graph.get_collection(key):
                if v.name == full:
                    return v
        with graph.as_default():
            return get_op_or_tensor_by_name(full)

    def get_variables(self, names: Sequence[str]) -> list[Any]:
        return [self.get_variable(n) for n in names]

    def get_collection(self, key: str | None = None, name: str | None = None) -> list[Any]:
        """Items added to collection ``key`` while building this tower."""
        if name is not None:
            key = name
        return self._ctx.get_collection_in_tower(key)

    def _graph(self) -> Any:
        for t in self._inputs:
            g = getattr(t, "graph", None)
            if g is not None:
                return g
        return tf1.get_default_graph()

    @property
    def inputs(self) -> list[Any]:
        """The input tensors of this tower."""
        return list(self._inputs)

    @property
    def outputs(self) -> Any:
        """What the tower function returned."""
        return self._outputs


class TowerTensorHandles:
    """A list of :class:`TowerTensorHandle`, indexable by position or by tower name."""

    def __init__(self, handles: Sequence[TowerTensorHandle]) -> None:
        self._handles = list(handles)
        self._name_to_handle = {k.ns_name: k for k in self._handles}

    def __len__(self) -> int:
        return len(self._handles)

    def __getitem__(self, name_or_index: str | int) -> TowerTensorHandle:
        if isinstance(name_or_index, int):
            return self._handles[name_or_index]
        try:
            return self._name_to_handle[name_or_index]
        except KeyError:
            raise KeyError(f"no tower named {name_or_index!r}; towers: {list(self._name_to_handle)}") from None

    def training(self) -> TowerTensorHandles:
        """Only the training towers."""
        return TowerTensorHandles([h for h in self._handles if h.is_training])

    def inference(self) -> TowerTensorHandles:
        """Only the inference towers."""
        return TowerTensorHandles([h for h in self._handles if not h.is_training])
