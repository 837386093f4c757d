"""``trainer.hooked_sess``: the session a training step runs through."""

from __future__ import annotations

import copy
from typing import Any, Callable, Sequence

from trainbus.callbacks.run_values import RunValuesByRequester
from trainbus.utils import lazytf as _tf

__all__ = ["HookedSession"]


class HookedSession:
    """``trainer.hooked_sess``: ``run()`` fires ``before_run``/``after_run`` through the bus's
    dispatcher (``bus.before_run``/``bus.after_run``, compiled by :mod:`trainbus.bus.dispatch`)
    and runs the requested extra fetches, feeds and options in the same ``Session.run`` as the
    step.

    Each ``run()`` advances the trainer's ``global_step`` (``trainer.loop.advance_step()``; the
    TF variable too, by an op fetched in the same call).

    ``feed`` is the per-step feed of the trainer's input source
    (``InputSource.step_feed()``: ``(placeholders, next_values)``, or None): every ``run()``
    feeds ``placeholders`` with ``next_values()`` in the same ``Session.run``.

    Without run hooks (nobody implements ``before_run``/``after_run``), a ``run(fetches)`` without
    ``feed_dict``, options or run metadata is a plain step: the feed's next values, the step (a
    TensorFlow callable, :func:`trainbus.session.fastrun.make_plain_step`) and the count, in one
    function prepared once per fetch structure; the last plain step's fetches (an operation or a
    tensor) are recognised by identity.
    """

    _MAX_CALLABLES = 256

    def __init__(self, sess: Any, trainer: Any, bus: Any, step_incr_op: Any,
                 feed: tuple[Sequence[Any], Callable[[], Sequence[Any]]] | None = None) -> None:
        self.sess = sess
        self._trainer = trainer
        self._advance_step = trainer.loop.advance_step
        self._notify_ready = getattr(trainer.loop, "first_step_ready", None)
        self._br = bus.before_run
        self._ar = bus.after_run
        self._incr = step_incr_op
        self._callables: dict[Any, Any] = {}
        # without run hooks, a step with no feed_dict or options is a "plain" step: one prepared
        # function per fetch structure (fastrun.make_plain_step), the last one's fetch at hand
        self._hooked = self._br is not None or self._ar is not None
        self._plain_steps: dict[Any, Any] = {}
        self._last_plain: tuple[Any, Any] = (_NO_FETCHES, None)  # (fetches, step): one object, thread-safe
        self._feed_keys: tuple = tuple(feed[0]) if feed is not None else ()
        self._feed_next: Any = feed[1] if feed is not None else None
        self._stop = False
        self._args: Any = None  # the last step's SessionRunArgs
        tf1 = _tf.tf1()
        self._Ctx = tf1.train.SessionRunContext
        self._Args = tf1.train.SessionRunArgs
        self._RunOptions = tf1.RunOptions
        self._RunMetadata = tf1.RunMetadata

    @property
    def graph(self) -> Any:
        return self.sess.graph

    def should_stop(self) -> bool:
        """Whether a callback asked to stop (``run_context.request_stop()``)."""
        return self._stop

    def take_stop_request(self) -> bool:
        """Whether a callback asked to stop since the last call (and forget the request): how
        a strategy turns the request into one all processes agree on."""
        stop, self._stop = self._stop, False
        return stop

    def run(self, fetches: Any, feed_dict: dict | None = None, options: Any = None, run_metadata: Any = None) -> Any:
        last = self._last_plain
        if fetches is last[0] and feed_dict is None and options is None and run_metadata is None:
            return last[1]()
        if not self._hooked and not feed_dict and options is None and run_metadata is None:
            step = self._plain_step(fetches)
            if step is not None:
                return step()
        return self._run_hooked(fetches, feed_dict, options, run_metadata)

    def _plain_step(self, fetches: Any) -> Callable[[], Any] | None:
        """The prepared plain step of ``fetches`` (None: it runs through the general path)."""
        key = _fkey(fetches)
        step = self._plain_steps.get(key)
        if step is None:
            step = self._make_plain_step(fetches, key)
        if step and key is fetches:  # an Operation or a Tensor: the next run of it skips the key too
            self._last_plain = (fetches, step)
        return step or None

    def _make_plain_step(self, fetches: Any, key: Any) -> Callable[[], Any] | bool:
        from trainbus.session.fastrun import make_plain_step

        if len(self._plain_steps) >= self._MAX_CALLABLES:
            self._forget_steps()
        call = make_plain_step(self.sess, fetches, self._feed_keys, self._incr)
        if call is None:
            self._plain_steps[key] = False
            return False
        self._step_ready()
        advance, feed_next = self._advance_step, self._feed_next
        if feed_next is None:
            def step() -> Any:
                out = call(())
                advance()
                return out
        else:
            n_feeds = len(self._feed_keys)  # the step holds no reference to this session

            def step() -> Any:  # type: ignore[misc]
                vals = feed_next()
                try:
                    out = call(vals)
                except (ValueError, TypeError) as e:  # a fed value of the wrong type or shape
                    explained = _explain_feed_error(feed_next, e, tuple(vals[:n_feeds]))
                    if explained is None:
                        raise
                    raise explained from e
                advance()
                return out
        self._plain_steps[key] = step
        return step

    def _forget_steps(self) -> None:
        self._callables.clear()
        self._plain_steps.clear()
        self._last_plain = (_NO_FETCHES, None)

    def _run_hooked(self, fetches: Any, feed_dict: dict | None, options: Any, run_metadata: Any) -> Any:
        trainer = self._trainer
        feed_keys = self._feed_keys
        feed_vals = self._feed_next() if self._feed_next is not None else ()
        if feed_dict:
            feed_keys = feed_keys + tuple(feed_dict)
            feed_vals = tuple(feed_vals) + tuple(feed_dict.values())
        ctx = None
        requests: Any = ()
        if self._br is not None or self._ar is not None:
            args = self._args
            if args is None or args.fetches is not fetches or args.feed_dict is not feed_dict:
                # SessionRunArgs is immutable: the steps that run the same fetches share one
                args = self._args = self._Args(fetches, feed_dict)
            ctx = self._Ctx(args, self.sess)
            if self._br is not None:
                requests = self._br(trainer, ctx)
        if requests:
            extra_fetches = tuple(args.fetches for _, args in requests)
            for req, args in requests:
                if args.feed_dict:
                    for k, v in args.feed_dict.items():
                        if k in feed_keys:
                            raise RuntimeError(f"{req} feeds {k!r} in before_run, but that tensor is already fed by the step or another callback")
                        feed_keys = feed_keys + (k,)
                        feed_vals = tuple(feed_vals) + (v,)
                if args.options is not None:
                    if options is None:
                        options = self._RunOptions()
                    else:
                        options = copy.deepcopy(options)
                    timeout = max(options.timeout_in_ms, args.options.timeout_in_ms)
                    options.MergeFrom(args.options)
                    options.timeout_in_ms = timeout
            key = (_fkey(fetches), tuple(_fkey(f) for f in extra_fetches), feed_keys, options is not None)
        else:
            extra_fetches = ()
            key = (_fkey(fetches), (), feed_keys, options is not None)
        fn = self._callables.get(key)
        if fn is None:
            fn = self._make_callable(fetches, extra_fetches, feed_keys, options is not None)
        try:
            if options is not None:
                if run_metadata is None:
                    run_metadata = self._RunMetadata()
                out = fn(*feed_vals, options=options, run_metadata=run_metadata)
            else:
                out = fn(*feed_vals)
        except (ValueError, TypeError) as e:  # a fed value of the wrong type or shape
            explained = _explain_feed_error(self._feed_next, e, tuple(feed_vals[:len(self._feed_keys)]))
            if explained is None:
                raise
            raise explained from e
        self._advance_step()
        if ctx is not None:
            if self._ar is not None:
                self._ar(trainer, ctx, RunValuesByRequester.pack(requests, out[1], options, run_metadata))
            if ctx.stop_requested:
                self._stop = True
        return out[0]

    def _make_callable(self, fetches: Any, extra: tuple, feed_keys: tuple, with_options: bool) -> Any:
        from trainbus.session.fastrun import make_step_callable

        if len(self._callables) >= self._MAX_CALLABLES:
            self._forget_steps()
        fn = make_step_callable(self.sess, fetches, extra, feed_keys, self._incr, with_options)
        key = (_fkey(fetches), tuple(_fkey(f) for f in extra), feed_keys, with_options)
        self._callables[key] = fn
        self._step_ready()
        return fn

    def _step_ready(self) -> None:
        """A step is prepared and about to run: the first time, the loop's waiters are told
        (``TrainLoop.on_first_step_ready``)."""
        notify, self._notify_ready = self._notify_ready, None
        if notify is not None:
            notify()

    def run_step_fn(self, fetches: Any) -> Any:
        """Return a zero-argument function equivalent to ``run(fetches)``."""
        return lambda: self.run(fetches)

    def close(self) -> None:
        self._forget_steps()
        self.sess.close()


def _explain_feed_error(feed_next: Any, exc: BaseException, feed_vals: tuple) -> BaseException | None:
    """The input source's account of a step whose feed failed (which input, which dataflow,
    what was expected and got), when the per-step feed is a bound method of an object with
    ``explain_feed_error(exc, values)`` (``FeedInput``); None otherwise. Runs only on failure."""
    explain = getattr(getattr(feed_next, "__self__", None), "explain_feed_error", None)
    if explain is None:
        return None
    try:
        return explain(exc, feed_vals)
    except Exception:  # noqa: BLE001 - the original error is better than a failed explanation
        return None


#: the fetch of no plain step yet (``run`` compares fetches to the last plain step's by identity)
_NO_FETCHES = object()


def _fkey(f: Any) -> Any:
    """A hashable key for a fetch structure (Tensors and Operations hash by identity)."""
    if isinstance(f, (list, tuple)):
        return (type(f), tuple(_fkey(x) for x in f))
    if isinstance(f, dict):
        return (dict, tuple((k, _fkey(v)) for k, v in f.items()))
    try:
        hash(f)
        return f
    except TypeError:
        return (type(f), id(f))
