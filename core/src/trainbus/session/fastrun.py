"""One training step = one ``Session.run``, at the lowest Python cost TF 2.x allows.

``Session.make_callable`` is fast only without feeds: with a ``feed_list`` it falls back to
``Session.run`` and its per-call fetch/feed processing. trainbus feeds every step (``FeedInput``),
so it prepares the step itself, once per distinct fetch/feed structure, from the pieces
``Session.run`` uses once per call: the fetch handler (for the result structure) and the fetch,
target and feed lists. A step without ``RunOptions`` runs as a TensorFlow callable
(``Session::MakeCallable``: feeds by position, no per-call lookup of the executors by the names
of its feeds, fetches and targets); a step with options runs through the same C call as
``Session.run``. Values are converted and shape-checked like ``Session.run`` does.

If the session internals this relies on are missing (another TF version), or a feed is of a kind
this path does not handle (strings, sparse tensors), ``make_step_callable`` falls back to
``Session.run`` with the same results; if TensorFlow cannot make a callable of the step (another
kind of session), the step runs through ``Session.run``'s C call.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf

__all__ = ["make_step_callable", "make_plain_step"]

_UNSUPPORTED_FEED_DTYPES = (tf.string, tf.resource, tf.variant)


def make_step_callable(sess: Any, fetches: Any, extra: Sequence[Any], feed_keys: Sequence[Any], incr_op: Any,
                       with_options: bool) -> Callable[..., tuple[Any, list]]:
    """A function ``f(*feed_values, options=None, run_metadata=None) -> (step_result,
    extra_results)`` that runs ``fetches``, every fetch structure of ``extra`` and ``incr_op`` in
    one ``Session.run``, feeding ``feed_keys`` with the positional values."""
    step = _Prepared.make(sess, [fetches, list(extra)], list(feed_keys), incr_op, tf_callable=not with_options)
    if step is None:
        return _generic(sess, fetches, list(extra), list(feed_keys), incr_op)
    call, call_raw, convert = step.call, step.call_raw, step.convert
    # the common step: one op (the train op), nothing fetched, no structure to rebuild
    only_targets = step.nothing_fetched and not extra and isinstance(fetches, tf.Operation)
    build = step.handler.build_results

    def run(*vals: Any, options: Any = None, run_metadata: Any = None) -> tuple[Any, list]:
        if options is None and run_metadata is None:
            results = call(convert(vals))
        else:
            results = call_raw(convert(vals), options, run_metadata)
        if only_targets:
            return None, []
        out = build(sess, results)
        return out[0], out[1]

    return run


def make_plain_step(sess: Any, fetches: Any, feed_keys: Sequence[Any],
                    incr_op: Any) -> Callable[[Sequence], Any] | None:
    """A function ``f(feed_values) -> Session.run(fetches)``'s result that runs ``fetches`` and
    ``incr_op``, feeding ``feed_keys`` with ``feed_values`` (a sequence aligned with them), without
    options; None when only :func:`make_step_callable` can run it."""
    step = _Prepared.make(sess, fetches, list(feed_keys), incr_op)
    if step is None:
        return None
    call, convert = step.call, step.convert
    if step.nothing_fetched and isinstance(fetches, tf.Operation):
        if not step.n_feeds:
            def run_op(vals: Sequence, _none: tuple = ()) -> None:
                call(_none)
            return run_op

        def run_op_fed(vals: Sequence) -> None:
            call(convert(vals))
        return run_op_fed
    build = step.handler.build_results

    def run(vals: Sequence) -> Any:
        return build(sess, call(convert(vals)))
    return run


def _generic(sess: Any, fetches: Any, extra: list, feed_keys: list, incr_op: Any) -> Callable[..., tuple[Any, list]]:
    structure = [fetches, extra, incr_op if incr_op is not None else []]

    def run(*vals: Any, options: Any = None, run_metadata: Any = None) -> tuple[Any, list]:
        out = sess.run(structure, feed_dict=dict(zip(feed_keys, vals)), options=options, run_metadata=run_metadata)
        return out[0], out[1]

    return run


class _Prepared:
    """A fetch structure with its feeds, prepared once: ``call(values)`` runs it without options
    (a TF callable when the session makes one), ``call_raw(values, options, run_metadata)``
    with them; ``convert(feed_values)`` gives the checked values both take."""

    __slots__ = ("handler", "nothing_fetched", "n_feeds", "convert", "call", "call_raw")

    @classmethod
    def make(cls, sess: Any, structure: Any, feed_keys: list, incr_op: Any,
             tf_callable: bool = True) -> _Prepared | None:
        """The prepared step, or None when this path cannot run it (see the module doc);
        ``tf_callable=False``: ``call`` goes through ``call_raw`` too (a step run with options)."""
        try:
            from tensorflow.python.client import pywrap_tf_session as tf_session
            from tensorflow.python.client.session import _FetchHandler

            graph = sess.graph
            handler = _FetchHandler(graph, structure, {})
            fetch_tensors, target_ops = list(handler.fetches()), list(handler.targets())
            if incr_op is not None:
                target_ops.append(incr_op)
            feeds = [graph.as_graph_element(k) if isinstance(k, str) else k for k in feed_keys]
            for t in feeds:
                if not isinstance(t, tf.Tensor) or t.dtype in _UNSUPPORTED_FEED_DTYPES:
                    return None
            step = cls()
            step.handler = handler
            step.nothing_fetched = not fetch_tensors
            step.n_feeds = len(feeds)
            step.convert = _converter(feeds)
            sess._extend_graph()
            step.call_raw = _raw_call(sess, tf_session, feeds, fetch_tensors, target_ops)
            made = _tf_callable(sess, tf_session, feeds, fetch_tensors, target_ops) if tf_callable else None
            step.call = made or _without_options(step.call_raw)
        except (ImportError, AttributeError, TypeError, ValueError, KeyError):
            return None
        return step


def _raw_call(sess: Any, tf_session: Any, feeds: list, fetch_tensors: list,
              target_ops: list) -> Callable[[Sequence, Any, Any], list]:
    """``f(values, options, run_metadata)``: the C call ``Session.run`` makes (names looked up by
    TensorFlow at each call)."""
    from tensorflow.python.util import compat

    call_raw = sess._call_tf_sessionrun
    outs = [t._as_tf_output() for t in feeds]
    fetch_list = [t._as_tf_output() for t in fetch_tensors]
    target_list = [op._c_op for op in target_ops]

    def run(vals: Sequence, options: Any, run_metadata: Any) -> list:
        fd = dict(zip(outs, vals))
        if options is None and run_metadata is None:
            return call_raw(None, fd, fetch_list, target_list, None)
        options_ptr = (tf_session.TF_NewBufferFromString(compat.as_bytes(options.SerializeToString()))
                       if options else None)
        meta_ptr = tf_session.TF_NewBuffer() if run_metadata is not None else None
        try:
            results = call_raw(options_ptr, fd, fetch_list, target_list, meta_ptr)
            if run_metadata is not None:
                run_metadata.ParseFromString(compat.as_bytes(tf_session.TF_GetBuffer(meta_ptr)))
        finally:
            if meta_ptr:
                tf_session.TF_DeleteBuffer(meta_ptr)
            if options_ptr:
                tf_session.TF_DeleteBuffer(options_ptr)
        return results

    return run


def _without_options(call_raw: Callable[[Sequence, Any, Any], list]) -> Callable[[Sequence], list]:
    return lambda vals: call_raw(vals, None, None)


def _tf_callable(sess: Any, tf_session: Any, feeds: list, fetch_tensors: list,
                 target_ops: list) -> Callable[[Sequence], list] | None:
    """``f(values) -> results``: a TensorFlow callable of the step (``Session::MakeCallable``),
    released with the function; None when the session cannot make one (the feeds are not
    distinct, or another kind of session)."""
    from tensorflow.core.protobuf import config_pb2

    names = [t.name for t in feeds]
    if len(set(names)) != len(names):
        return None
    options = config_pb2.CallableOptions(feed=names, fetch=[t.name for t in fetch_tensors],
                                         target=list(dict.fromkeys(op.name for op in target_ops)))
    try:
        made = sess._make_callable_from_options(options)
        session, handle = sess._session, made._handle
    except (tf.errors.OpError, AttributeError, TypeError):
        return None
    run_callable = tf_session.TF_SessionRunCallable

    def call(vals: Sequence, _made: Any = made) -> list:  # holding `made` keeps the callable alive
        return run_callable(session, handle, vals, None)

    return call


def _converter(feeds: list) -> Callable[[Sequence], list]:
    """``f(values) -> list``: each value as an array of its tensor's dtype, checked against the
    tensor's static shape (an array already of that dtype and of a fully known shape costs two
    comparisons)."""
    specs = []
    for t in feeds:
        shape = t.shape
        full = tuple(shape.as_list()) if shape.is_fully_defined() else None
        specs.append((np.dtype(t.dtype.as_numpy_dtype), full, _shape_check(t)))
    specs_t = tuple(specs)
    asarray, ndarray = np.asarray, np.ndarray

    def convert(vals: Sequence) -> list:
        out = []
        for v, (dt, full, check) in zip(vals, specs_t):
            a = v if type(v) is ndarray and v.dtype is dt else asarray(v, dtype=dt)
            if a.shape != full and check is not None:
                check(a)
            out.append(a)
        return out

    return convert


def _shape_check(t: Any) -> Callable[[np.ndarray], None] | None:
    """A check that a fed value fits the tensor's static shape (None if any shape fits)."""
    shape = t.shape
    if shape.rank is None:
        return None
    rank = shape.rank
    known = [(i, d) for i, d in enumerate(shape.as_list()) if d is not None]
    name = t.name

    def check(a: np.ndarray) -> None:
        s = a.shape
        if len(s) != rank or any(s[i] != d for i, d in known):
            raise ValueError(f"Cannot feed value of shape {s} for Tensor {name!r}, which has shape {shape}")

    return check
