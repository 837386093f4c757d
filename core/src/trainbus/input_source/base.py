"""What every input source shares: the :class:`InputSource` base class, the signature's
placeholders (:func:`build_or_reuse_placeholder`), :class:`FeedfreeInput`, and sources that wrap
another one (:class:`ProxyInputSource`, :func:`remap_input_source`)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf

from trainbus.callbacks.base import Callback
from trainbus.tfutils.common import get_op_tensor_name
from trainbus.tfutils.tower import _to_spec

tf1 = tf.compat.v1

#: what :meth:`InputSource.step_feed` returns: the placeholders to feed, and a function giving
#: the next values for them (a tuple aligned with the placeholders), called once per step
StepFeed = tuple[Sequence[Any], Callable[[], Sequence[Any]]]


def build_or_reuse_placeholder(spec: Any) -> Any:
    """The placeholder named after ``spec`` (a ``tf.TensorSpec``) in the default graph: the
    existing one when the graph has a placeholder of that name and a compatible dtype and
    shape, else a new one (created outside any name scope, so its name is ``spec.name``)."""
    spec = _to_spec(spec)
    g = tf1.get_default_graph()
    try:
        op = g.get_operation_by_name(spec.name)
    except KeyError:
        op = None
    if op is not None:
        if op.type != "Placeholder":
            raise ValueError(f"the graph has an op {spec.name!r} of type {op.type}, but the input {spec.name!r} of the "
                             "input signature needs a placeholder of that name; rename that op or the input")
        t = op.outputs[0]
        if t.dtype != spec.dtype or not spec.shape.is_compatible_with(t.shape):
            raise ValueError(f"the graph has a placeholder {t.name!r} of {t.dtype.name}{t.shape}, incompatible with "
                             f"the input signature's {spec.dtype.name}{spec.shape}; give one of them another name")
        if t.shape.rank == spec.shape.rank and (t.shape.rank is None or t.shape.as_list() == spec.shape.as_list()):
            return t
        # compatible but of another shape: this tower gets a placeholder of its own
    with tf1.name_scope(None):
        return tf1.placeholder(spec.dtype, shape=spec.shape, name=spec.name)


_placeholder = build_or_reuse_placeholder


#: what :func:`explain_datapoint` checks a datapoint against: per input, its name (or None for a
#: nameless component), dtype and static shape
InputSpec = tuple[Any, Any, Any]


def inputs_of(tensors: Sequence[Any]) -> list[InputSpec]:
    """The :data:`InputSpec` of each placeholder (or ``tf.TensorSpec``) of ``tensors``."""
    out = []
    for t in tensors:
        name = t.op.name if hasattr(t, "op") else t.name
        out.append((name, tf.as_dtype(t.dtype), tf.TensorShape(t.shape)))
    return out


def _describe_value(value: Any) -> str:
    """A short description of a datapoint component: its type, dtype and shape."""
    if isinstance(value, np.ndarray):
        return f"an array of {value.dtype} with shape {value.shape}"
    if isinstance(value, (list, tuple)):
        try:
            arr = np.asarray(value)
        except Exception:  # noqa: BLE001 - ragged or odd content: say what it is
            return f"a {type(value).__name__} of {len(value)} items"
        return f"a {type(value).__name__} (as an array: {arr.dtype} with shape {arr.shape})"
    return f"{type(value).__name__} {value!r:.60}"


def _component(k: int, name: Any) -> str:
    return f"component {k} ({name!r})" if name is not None else f"component {k}"


def explain_datapoint(source: str, dataflow: Any, dp: Any, inputs: Sequence[InputSpec]) -> str | None:
    """What is wrong with the datapoint ``dp`` of ``dataflow`` for ``inputs`` (number of
    components, each one's dtype and shape), as a one-line message naming the input source, the
    dataflow, the component (index and input name), what was expected and what came; None when
    nothing is wrong. It converts every component: call it once a datapoint failed (or to check one
    datapoint), not for every datapoint."""
    df = type(dataflow).__name__
    names = [n for n, _, _ in inputs]
    if not hasattr(dp, "__len__") or isinstance(dp, (np.ndarray, str, bytes, dict)):
        return (f"{source}: the dataflow {df} produced a datapoint that is {_describe_value(dp)}, not a list of "
                f"components; expected a list with one component per input {names}, in the order of the model's "
                "inputs()")
    if len(dp) != len(inputs):
        got = "; ".join(f"{k}: {_describe_value(v)}" for k, v in enumerate(list(dp)[:6]))
        if len(dp) > 6:
            got += "; ..."
        if None in names:  # components of given types, not the model's inputs
            want = f"{len(inputs)} components were expected ({', '.join(d.name for _, d, _ in inputs)})"
        else:
            want = (f"the model has {len(inputs)} inputs {names}: expected one component per input, in the order of "
                    "the model's inputs()")
        return (f"{source}: the dataflow {df} produced a datapoint of {len(dp)} component"
                f"{'' if len(dp) == 1 else 's'}, but {want}; got [{got}]")
    for k, (value, (name, dtype, shape)) in enumerate(zip(dp, inputs)):
        try:
            arr = np.asarray(value, dtype=dtype.as_numpy_dtype)
        except Exception as e:  # noqa: BLE001 - described below
            return (f"{source}: {_component(k, name)} of a datapoint from the dataflow {df} cannot be converted to "
                    f"{dtype.name}: the input signature expects {dtype.name} of shape {shape}, got "
                    f"{_describe_value(value)} ({type(e).__name__}: {e}); make the dataflow produce {dtype.name} "
                    "values there, or change the dtype of that input in inputs()")
        if not shape.is_compatible_with(arr.shape):
            ranks = f" (rank {shape.rank}, got rank {arr.ndim})" if shape.rank != arr.ndim else ""
            return (f"{source}: {_component(k, name)} of a datapoint from the dataflow {df} has shape "
                    f"{tuple(arr.shape)}, but the input signature expects {shape}{ranks}; make the dataflow produce "
                    "that shape (e.g. batch it) or change the TensorSpec of that input in inputs()")
    return None


class InputSource:
    """Base class of input sources. ``setup(input_signature)`` builds what is needed and
    returns the callbacks the trainer must run; ``get_input_tensors()`` gives the tensors."""

    _name_scope: str | None = None
    _setup_done = False
    #: the input source this one is wrapped in (e.g. by a ``StagingInput``), named in its errors
    _wrapped_by: str | None = None

    def setup(self, input_signature: Sequence[Any]) -> list[Callback]:
        """Build the input pipeline for ``input_signature`` (a list of ``tf.TensorSpec``);
        returns the callbacks to register with the trainer. Called once."""
        if self._setup_done:
            raise RuntimeError(f"{self} was already set up; an InputSource can be used by one trainer")
        self._input_signature = [_to_spec(s) for s in input_signature]
        self._setup(self._input_signature)
        # every input source leaves the signature's placeholders in the graph, so that
        # graph.get_tensor_by_name('x:0') works whatever the model reads from
        self._signature_placehdrs = [build_or_reuse_placeholder(s) for s in self._input_signature]
        self._setup_done = True
        return self.get_callbacks()

    @property
    def input_placeholders(self) -> list[Any]:
        """The placeholders named after the input signature (after :meth:`setup`)."""
        if not self._setup_done:
            raise RuntimeError(f"{self}: input_placeholders exist after setup(input_signature)")
        return list(self._signature_placehdrs)

    def setup_done(self) -> bool:
        return self._setup_done

    def _setup(self, input_signature: list[Any]) -> None:
        """Build graph parts of the input (placeholders, queues)."""

    def get_input_tensors(self) -> list[Any]:
        """The input tensors, in the order of the signature (call inside a tower)."""
        return self._get_input_tensors()

    def _get_input_tensors(self) -> list[Any]:
        raise TypeError(f"{type(self).__name__} must implement _get_input_tensors()")

    def get_callbacks(self) -> list[Callback]:
        """Callbacks that keep this input running (started/stopped with training)."""
        cbs = self._get_callbacks()
        for cb in cbs:
            cb.set_chief_only(False)
        return cbs

    def _get_callbacks(self) -> list[Callback]:
        return []

    def step_feed(self) -> StepFeed | None:
        """The feed this input needs in every step, or None (the default) when its tensors need
        no feed (queues, datasets, constants).

        The trainer holds its input source and asks it once, after :meth:`setup` and once the
        session exists; its ``hooked_sess`` then feeds ``placeholders`` with ``next_values()``
        in the step's own ``Session.run``. ``next_values`` is on the per-step path: keep it a
        plain call that returns a tuple (or list) aligned with ``placeholders``.
        """
        return None

    def reset_state(self) -> None:
        """Reinitialize the input (called before each run over it)."""

    def size(self) -> int:
        """Number of datapoints (steps) in one pass."""
        raise ValueError(f"{self} has no known size")

    def failure(self) -> BaseException | None:
        """The exception that broke the input (e.g. in a feeding thread), if any."""
        return None

    def skip_datapoints(self, n: int) -> bool:
        """Ask the input to pass over its first ``n`` datapoints when it starts (a run resumed in
        the middle of an epoch skips those the interrupted epoch consumed). Returns whether it
        will; the default input cannot."""
        return False

    def wrapped_in(self, wrapper: str) -> None:
        """Name the input source this one is wrapped in (``describe()`` of the wrapper), for its
        errors; a wrapper calls it when it sets up the source it wraps."""
        self._wrapped_by = wrapper

    def use_name_scope(self, name: str) -> None:
        """Build this source's ops under the name scope ``name`` (default: its class name)."""
        self._name_scope = name

    def describe(self) -> str:
        """How errors name this input source: ``str(self)``, and the source it is wrapped in."""
        return str(self) if self._wrapped_by is None else f"{self} (inside {self._wrapped_by})"

    def name_scope_name(self) -> str:
        """The absolute name scope this input source makes its ops in (``cached_name_scope``)."""
        return self._name_scope or type(self).__name__

    def cached_name_scope(self) -> Any:
        return tf1.name_scope(self.name_scope_name() + "/")

    def __str__(self) -> str:
        return type(self).__name__


class FeedfreeInput(InputSource):
    """Base of the input sources whose tensors need no feed (queues, datasets, tensors):
    the training step runs without a ``feed_dict``."""


class ProxyInputSource(InputSource):
    """An input source that hands every call to another one (``self._input``)."""

    def __init__(self, input: InputSource) -> None:
        if not isinstance(input, InputSource):
            raise TypeError(f"{type(self).__name__} wraps an InputSource, got {input!r}")
        self._input = input

    def _get_input_tensors(self) -> list[Any]:
        return self._input.get_input_tensors()

    def _setup(self, input_signature: list[Any]) -> None:
        self._input.wrapped_in(self.describe())
        self._input_callbacks = self._input.setup(input_signature)

    def _get_callbacks(self) -> list[Callback]:
        return list(self._input_callbacks)

    def size(self) -> int:
        return self._input.size()

    def reset_state(self) -> None:
        self._input.reset_state()

    def failure(self) -> BaseException | None:
        return self._input.failure()

    def step_feed(self) -> StepFeed | None:
        return self._input.step_feed()


def remap_input_source(input: InputSource, names: Sequence[str]) -> InputSource:
    """Use ``input``, which produces only some of the model's inputs (``names``, in its own
    order), for a model with more inputs: the other inputs stay placeholders (to be fed, or
    left unused by the tower).

    ``remap_input_source(FeedInput(ds), ['image', 'label'])`` gives an input source whose
    dataflow feeds ``image`` and ``label`` whatever other inputs the model has.

    :param input: the InputSource producing the tensors of ``names``.
    :param names: the model input names ``input`` produces, in the order it produces them.
    """
    names = [get_op_tensor_name(n)[0] for n in names]
    if not names or len(set(names)) != len(names):
        raise ValueError(f"remap_input_source: names must be distinct input names, got {names!r}")

    class _Remapped(ProxyInputSource):
        def _setup(self, input_signature: list[Any]) -> None:
            self._all_placehdrs = [build_or_reuse_placeholder(s) for s in input_signature]
            self._input.wrapped_in(self.describe())
            by_name = {s.name: s for s in input_signature}
            missing = [n for n in names if n not in by_name]
            if missing:
                raise ValueError(f"remap_input_source: {missing} are not inputs of the model; its inputs are "
                                 f"{list(by_name)}")
            self._input_callbacks = self._input.setup([by_name[n] for n in names])

        def _get_input_tensors(self) -> list[Any]:
            produced = self._input.get_input_tensors()
            if len(produced) != len(names):
                raise ValueError(f"remap_input_source: {self._input} produced {len(produced)} tensors for {names}")
            ret = list(self._all_placehdrs)
            pos = {s.name: i for i, s in enumerate(self._input_signature)}
            for n, t in zip(names, produced):
                ret[pos[n]] = t
            return ret

        def __str__(self) -> str:
            return f"Remapped({self._input}, {names})"

    return _Remapped(input)
