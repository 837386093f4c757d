"""HyperParam and its two kinds: a graph variable, an attribute of a Python object."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from typing import Any, Sequence

import numpy as np

from trainbus import plugin_api as _tf

__all__ = ["HyperParam", "GraphVarParam", "ObjAttrParam"]


class HyperParam(ABC):
    """Base class of hyperparameters: something a ``HyperParamSetter`` reads and sets.

    Subclasses implement ``get_value()`` and ``set_value(v)``, set ``_readable_name``, and may
    override ``setup_graph()`` (called from the setter's ``_setup_graph``).
    """

    _readable_name: str = ""

    def setup_graph(self) -> None:
        """Create what the param needs in the graph (called before the graph is finalized)."""

    @abstractmethod
    def set_value(self, v: Any) -> None:
        """Set the value of the param."""

    @abstractmethod
    def get_value(self) -> Any:
        """Get the value of the param."""

    @property
    def readable_name(self) -> str:
        """The name to display (and to put to the monitors)."""
        return self._readable_name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.readable_name!r})"


class GraphVarParam(HyperParam):
    """A variable of the graph as a hyperparameter (e.g. ``learning_rate``).

    :param name: the variable's name (``"learning_rate"`` or ``"learning_rate:0"``).
    :param shape: the variable's shape (``()`` for a scalar).
    """

    def __init__(self, name: str, shape: Sequence[int] = ()) -> None:
        from trainbus.tfutils.common import get_op_tensor_name

        if not isinstance(name, str) or not name:
            raise TypeError(f"GraphVarParam: name must be a variable name (str), got {name!r}")
        try:
            self.shape = tuple(int(d) for d in shape)
        except (TypeError, ValueError):
            raise TypeError(f"GraphVarParam({name!r}): shape must be a tuple of ints, got {shape!r}") from None
        self.name = name
        self._readable_name, self.var_name = get_op_tensor_name(name)
        self.var: Any = None
        self._ph: Any = None
        self._assign: Any = None
        self._own_runs = False

    def setup_graph(self) -> None:
        """Find the variable in the (default) graph and create its assign op."""
        tf1 = _tf.tf1()
        found = [v for v in tf1.global_variables() + tf1.local_variables() if v.name == self.var_name]
        if not found:
            names = sorted(v.name for v in tf1.global_variables() + tf1.local_variables())
            raise ValueError(f"GraphVarParam: {self.var_name} is not a variable in the graph; variables: {names}")
        self.var = found[0]
        vshape = tuple(self.var.shape.as_list()) if self.var.shape.rank is not None else None
        if vshape is not None and vshape != self.shape:
            raise ValueError(f"GraphVarParam({self.name!r}, shape={self.shape}): the variable has shape {vshape}; "
                             f"pass shape={vshape}")
        with tf1.name_scope(None):
            self._ph = tf1.placeholder(self.var.dtype.base_dtype, shape=self.shape, name=self._readable_name.replace("/", "_") + "_feed")
            assigned = tf1.assign(self.var, self._ph, name=self._readable_name.replace("/", "_") + "_set")
        # ref variables give a tensor, resource variables an unread-variable wrapper: run its op
        self._assign = assigned if isinstance(assigned, _tf.tf().Operation) else assigned.op
        self._own_runs = self._touch_only_this_variable()

    def _touch_only_this_variable(self) -> bool:
        """Whether setting and reading the variable run no op but the variable's own, its feed,
        the assignment and the read (no control dependency brings in others), and the variable
        is not the global step: such requests are left out of the session's count, so that the
        trainer still knows the global step without reading it (sesscreate.not_counted)."""
        tf1 = _tf.tf1()
        var = self.var
        if any(var is v for v in tf1.get_collection(tf1.GraphKeys.GLOBAL_STEP)):
            return False
        try:
            read = var._as_graph_element()  # what Session.run fetches for the variable
        except AttributeError:
            return False
        from trainbus.tfutils.dependency import ancestor_ops

        own = {var.op, self._ph.op, self._assign, read.op}
        return all(op in own for op in ancestor_ops([self._assign, read.op]))

    def _not_counted(self, sess: Any) -> Any:
        from trainbus.tfutils.sesscreate import not_counted

        return not_counted(sess) if self._own_runs else contextlib.nullcontext()

    def _session(self) -> Any:
        sess = _tf.tf1().get_default_session()
        if sess is None:
            raise RuntimeError(f"GraphVarParam({self.readable_name!r}) needs a default session (with sess.as_default())")
        if self.var is None:
            raise RuntimeError(f"GraphVarParam({self.readable_name!r}) was not set up: its setup_graph() runs in the setter's _setup_graph")
        return sess

    def set_value(self, v: Any) -> None:
        """Assign the variable a new value. A value with as many elements as the variable but
        another shape (``[0.1]`` for a scalar) is reshaped to the variable's shape."""
        sess = self._session()
        shape = np.shape(v)
        if shape != self.shape and int(np.prod(shape)) == int(np.prod(self.shape)):
            v = np.reshape(v, self.shape)
        with self._not_counted(sess):
            sess.run(self._assign, feed_dict={self._ph: v})

    def get_value(self) -> Any:
        """Evaluate the variable."""
        sess = self._session()
        with self._not_counted(sess):
            return sess.run(self.var)


class ObjAttrParam(HyperParam):
    """An attribute of a Python object as a hyperparameter.

    :param obj: the object.
    :param attrname: the attribute (it must exist).
    :param readable_name: the name to display and to set with (e.g. in ``hyper.txt``);
        default ``attrname``.
    """

    def __init__(self, obj: Any, attrname: str, readable_name: str | None = None) -> None:
        if not isinstance(attrname, str) or not attrname:
            raise TypeError(f"ObjAttrParam: attrname must be an attribute name (str), got {attrname!r}")
        if not hasattr(obj, attrname):
            raise AttributeError(f"ObjAttrParam: {obj!r} has no attribute {attrname!r}; set it before creating the param")
        self.obj = obj
        self.attrname = attrname
        self._readable_name = attrname if readable_name is None else str(readable_name)

    def set_value(self, v: Any) -> None:
        setattr(self.obj, self.attrname, v)

    def get_value(self) -> Any:
        return getattr(self.obj, self.attrname)
