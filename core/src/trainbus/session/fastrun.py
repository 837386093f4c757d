"""One training step = one ``Session.run``, at the lowest Python cost TF 2.x allows.

``Session.make_callable`` is fast only without feeds: with a ``feed_list`` it falls back to
``Session.run`` and its per-call fetch/feed processing. trainbus feeds every step (``FeedInput``),
so it builds the callable itself from the same pieces ``Session.run`` uses once per call: the fetch
handler (for the result structure) and the C-level fetch/target/feed lists, prepared once per
distinct structure. Values are converted and shape-checked like ``Session.run`` does.

If the session internals this relies on are missing (another TF version), or a feed is of a kind
this path does not handle (strings, sparse tensors), ``make_step_callable`` falls back to
``Session.run`` with the same results.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf

__all__ = ["make_step_callable"]

_UNSUPPORTED_FEED_DTYPES = (tf.string, tf.resource, tf.variant)


def make_step_callable(sess: Any, fetches: Any, extra: Sequence[Any], feed_keys: Sequence[Any], incr_op: Any,
                       with_options: bool) -> Callable[..., tuple[Any, list]]:
    """A function ``f(*feed_values, options=None, run_metadata=None) -> (step_result,
    extra_results)`` that runs ``fetches``, every fetch structure of ``extra`` and ``incr_op`` in
    one ``Session.run``, feeding ``feed_keys`` with the positional values."""
    fast = _fast(sess, fetches, list(extra), list(feed_keys), incr_op)
    if fast is not None:
        return fast
    return _generic(sess, fetches, list(extra), list(feed_keys), incr_op)


def _generic(sess: Any, fetches: Any, extra: list, feed_keys: list, incr_op: Any) -> Callable[..., tuple[Any, list]]:
    structure = [fetches, extra, incr_op if incr_op is not None else []]

    def run(*vals: Any, options: Any = None, run_metadata: Any = None) -> tuple[Any, list]:
        out = sess.run(structure, feed_dict=dict(zip(feed_keys, vals)), options=options, run_metadata=run_metadata)
        return out[0], out[1]

    return run


def _fast(sess: Any, fetches: Any, extra: list, feed_keys: list, incr_op: Any) -> Callable[..., tuple[Any, list]] | None:
    try:
        from tensorflow.python.client import pywrap_tf_session as tf_session
        from tensorflow.python.client.session import _FetchHandler
        from tensorflow.python.util import compat

        graph = sess.graph
        handler = _FetchHandler(graph, [fetches, extra], {})
        fetch_list = [t._as_tf_output() for t in handler.fetches()]
        target_list = [op._c_op for op in handler.targets()]
        if incr_op is not None:
            target_list.append(incr_op._c_op)
        feeds = [graph.as_graph_element(k) if isinstance(k, str) else k for k in feed_keys]
        for t in feeds:
            if not isinstance(t, tf.Tensor) or t.dtype in _UNSUPPORTED_FEED_DTYPES:
                return None
        outs = [t._as_tf_output() for t in feeds]
        np_dtypes = [t.dtype.as_numpy_dtype for t in feeds]
        checks = [_shape_check(t) for t in feeds]
        sess._extend_graph()
        call_raw = sess._call_tf_sessionrun
    except (ImportError, AttributeError, TypeError, ValueError, KeyError):
        return None
    # the common step: one op (the train op), nothing fetched, no structure to rebuild
    only_targets = not fetch_list and not extra and isinstance(fetches, tf.Operation)
    build = handler.build_results

    def feed_dict(vals: tuple) -> dict:
        fd = {}
        for out, v, dt, check in zip(outs, vals, np_dtypes, checks):
            a = v if type(v) is np.ndarray and v.dtype == dt else np.asarray(v, dtype=dt)
            if check is not None:
                check(a)
            fd[out] = a
        return fd

    def run(*vals: Any, options: Any = None, run_metadata: Any = None) -> tuple[Any, list]:
        fd = feed_dict(vals) if vals else {}
        if options is None and run_metadata is None:
            results = call_raw(None, fd, fetch_list, target_list, None)
        else:
            options_ptr = tf_session.TF_NewBufferFromString(compat.as_bytes(options.SerializeToString())) if options else None
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
        if only_targets:
            return None, []
        out = build(sess, results)
        return out[0], out[1]

    return run


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
