"""``HorovodTrainer``: one process per device, gradients all-reduced by Horovod."""

from __future__ import annotations

import hashlib
import os
import signal
from typing import Any, Callable, Sequence

import numpy as np
import tensorflow as tf

from trainbus.callbacks.base import Callback
from trainbus.tfutils.tower import TowerFunc, TrainTowerContext
from trainbus.plugin_api import TrainingInterrupted, checkpoint_report, signum_of_reason
from trainbus.train.tower import SingleCostTrainer
from trainbus.utils import logger

tf1 = tf.compat.v1

__all__ = ["HorovodTrainer", "VariableMismatchError"]

class VariableMismatchError(RuntimeError):
    """The Horovod ranks built different sets of global variables."""


def _import_hvd() -> Any:
    try:
        import horovod.tensorflow as hvd
    except ImportError as e:
        raise ImportError(
            f"HorovodTrainer needs horovod built with TensorFlow support ({e}). Install it into this environment "
            "with tools/install_horovod.sh PATH/TO/python (builds horovod 0.28.1 with Gloo against the installed TF)."
        ) from e
    return hvd


class _StopBarrier(Callback):
    """After an agreed stop, every rank waits here (after the user's callbacks finished
    ``after_train``, e.g. the chief's final checkpoint) until all ranks got here: a launcher
    that ends the whole job when the first rank exits then cuts nobody's cleanup short."""

    _chief_only = False

    def _setup_graph(self) -> None:
        with tf1.name_scope(None):
            self._op = self.trainer.hvd.allreduce(tf.constant(0, tf.int32), name="trainbus_stop_barrier")

    def _after_train(self) -> None:
        if self.trainer.stop_agreed_at is not None:
            self.trainer.sess.run(self._op)

    def __str__(self) -> str:
        return "HorovodStopBarrier"


class _BroadcastEachEpoch(Callback):
    """Re-broadcast rank 0's variables after every epoch (all ranks take part)."""

    _chief_only = False

    def _trigger_epoch(self) -> None:
        self.trainer.broadcast_variables("after epoch")

    def __str__(self) -> str:
        return "HorovodBroadcastEachEpoch"


def variable_signature(variables: Sequence[Any]) -> list[str]:
    """``name|shape|dtype`` of each variable, sorted by name."""
    lines = []
    for v in variables:
        shape = v.shape.as_list() if v.shape.rank is not None else None
        dtype = v.dtype.base_dtype.name
        lines.append(f"{v.op.name}|{shape}|{dtype}")
    return sorted(lines)


def describe_mismatch(per_rank: Sequence[Sequence[str]]) -> str:
    """Human-readable differences of each rank's variable signature against rank 0's."""
    def as_map(lines: Sequence[str]) -> dict[str, str]:
        out = {}
        for ln in lines:
            name, rest = ln.split("|", 1)
            out[name] = rest
        return out

    base = as_map(per_rank[0])
    parts = []
    for r, lines in enumerate(per_rank[1:], start=1):
        other = as_map(lines)
        only0 = sorted(set(base) - set(other))
        only_r = sorted(set(other) - set(base))
        diff = sorted(n for n in set(base) & set(other) if base[n] != other[n])
        for n in only0:
            parts.append(f"variable {n!r} ({base[n]}) exists on rank 0 but not on rank {r}")
        for n in only_r:
            parts.append(f"variable {n!r} ({other[n]}) exists on rank {r} but not on rank 0")
        for n in diff:
            parts.append(f"variable {n!r} is {base[n]} on rank 0 but {other[n]} on rank {r}")
    return "; ".join(parts)


class HorovodTrainer(SingleCostTrainer):
    """Data-parallel training with one process per device (or per machine slot), launched
    by ``horovodrun`` (or ``mpirun``). Each process builds one tower; gradients are
    all-reduced with Horovod before the update, so every rank applies the same update.

    Rank 0 is the chief (``is_chief``): chief-only callbacks and monitors, and
    ``session_init``, run there only. Right after the session is initialized (and
    restored), rank 0's global variables are broadcast to every rank; before that the ranks
    compare the variables they built and stop with :class:`VariableMismatchError` naming
    the difference if they disagree.

    :param average: average (True) or sum the gradients over the ranks.
    :param compression: ``hvd.Compression.none`` (default) or ``hvd.Compression.fp16``
        (gradients travel as float16).
    """

    #: re-broadcast rank 0's variables after every epoch
    BROADCAST_EVERY_EPOCH = True

    def __init__(self, average: bool = True, compression: Any = None) -> None:
        hvd = _import_hvd()
        if compression is None:
            compression = hvd.Compression.none
        if not (hasattr(compression, "compress") and hasattr(compression, "decompress")):
            raise TypeError(f"HorovodTrainer: compression must be hvd.Compression.none or hvd.Compression.fp16, "
                            f"got {compression!r}")
        hvd.init()
        self.hvd = hvd
        self._rank = hvd.rank()
        self._size = hvd.size()
        self._local_rank = hvd.local_rank()
        self._local_size = hvd.local_size()
        self._average = bool(average)
        self._compression = compression
        super().__init__()
        #: True on rank 0 only
        self.is_chief = self._rank == 0
        self._broadcast_op: Any = None
        self._varcheck: Any = None
        # stop agreement: a local request is published with a step, every rank stops after it
        self._stop_ph: Any = None
        self._stop_agreed: Any = None
        self._local_stop: str | None = None
        self._peer_signal: tuple[int, int] | None = None
        #: the global step after which every rank stopped (None while training goes on)
        self.stop_agreed_at: int | None = None
        logger.info(f"HorovodTrainer: rank {self._rank} of {self._size} (local rank {self._local_rank} "
                    f"of {self._local_size}){' — chief' if self.is_chief else ''}.")

    @property
    def rank(self) -> int:
        return self._rank

    @property
    def size(self) -> int:
        return self._size

    @property
    def local_rank(self) -> int:
        return self._local_rank

    def allreduce(self, grads: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
        """All-reduce ``[(grad, var)]`` over the ranks (average or sum).

        The ranks' stop requests travel in the same all-reduce: a vector with one entry
        per rank is appended to the first dense floating-point gradient and split off after
        the reduction, so agreeing on a stop costs no extra collective operation."""
        if self._size == 1:
            return grads
        hvd = self.hvd
        op = hvd.Average if self._average else hvd.Sum
        out = []
        carrier = next((i for i, (g, _) in enumerate(grads) if isinstance(g, tf.Tensor) and g.dtype.is_floating
                        and g.shape.is_fully_defined()), None)
        with tf1.name_scope(None), tf1.name_scope("trainbus_stop"):
            self._stop_ph = tf1.placeholder_with_default(np.zeros([self._size], np.float32), [self._size], name="local")
        with tf1.name_scope("HorovodAllReduce"):
            for i, (g, v) in enumerate(grads):
                if i != carrier:
                    out.append((hvd.allreduce(g, op=op, compression=self._compression), v))
                    continue
                n = g.shape.num_elements()
                packed = tf.concat([tf.reshape(g, [-1]), tf.cast(self._stop_ph, g.dtype)], 0)
                reduced = hvd.allreduce(packed, op=op, compression=self._compression)
                out.append((tf.reshape(reduced[:n], g.shape), v))
                stop = tf.cast(reduced[n:], tf.float32)
                self._stop_agreed = stop * float(self._size) if self._average else stop
        if carrier is None:  # no dense floating gradient: a separate (tiny) all-reduce
            self._stop_agreed = hvd.allreduce(self._stop_ph, op=hvd.Sum, name="trainbus_stop_agreed")
        return out

    def _setup_graph(self, input: Any, get_cost_fn: TowerFunc, get_opt_fn: Callable[[], Any]) -> list:
        with TrainTowerContext(""):
            grads = self._make_get_grad_fn(input, get_cost_fn, get_opt_fn)()
            grads = self.allreduce(grads)
            opt = get_opt_fn()
            self.train_op = opt.apply_gradients(grads, name="train_op")
        extra: list = [_BroadcastEachEpoch()] if self.BROADCAST_EVERY_EPOCH else []
        if self._size > 1:
            extra.append(_StopBarrier())
        return extra

    # ---------------------------------------------------------------- stopping together
    def agree_stop(self, cause: str) -> bool:
        """Every rank stops after the same step: a stop cause of this rank (a signal,
        ``request_stop()``, ``run_context.request_stop()``, a ``StopTraining`` raised by a
        callback, e.g. a chief-only ``EarlyStopping``) travels with the next step's all-reduce,
        and every rank stops after that step. With one rank, stop after the current step."""
        if self._stop_agreed is None:
            return True
        if self._local_stop is None or signum_of_reason(cause) is not None:
            self._local_stop = cause
        return False

    def _stop_feed(self) -> dict:
        """Nothing to feed (the default is all zeros), or this rank's entry of the stop
        vector: the signal number for a signal, 1 for another request."""
        reason = self._local_stop
        if reason is None:
            return {}
        vec = np.zeros([self._size], np.float32)
        vec[self._rank] = float(signum_of_reason(reason) or 1)
        return {self._stop_ph: vec}

    def run_step(self) -> None:
        if self._stop_agreed is None:
            return super().run_step()
        _, agreed = self.hooked_sess.run([self.train_op, self._stop_agreed], feed_dict=self._stop_feed())
        if self.stop_agreed_at is None and agreed.any():
            kinds = [int(round(float(k))) for k in agreed]
            # the signalled rank (lowest first) names the stop; else the lowest requesting rank
            rank = min((r for r, k in enumerate(kinds) if k > 1), default=None)
            if rank is None:
                rank = min(r for r, k in enumerate(kinds) if k)
            kind = kinds[rank]
            if kind > 1:
                name = signal.Signals(kind).name
                if kinds[self._rank] <= 1:
                    self._peer_signal = (kind, rank)
                reason = f"signal {name}" if kinds[self._rank] > 1 else f"signal {name} received by rank {rank}"
            else:
                reason = self._local_stop if rank == self._rank else f"rank {rank} requested a stop"
            self.stop_agreed_at = self.global_step
            self.confirm_stop(reason)
            logger.info(f"HorovodTrainer: every rank stops after global step {self.global_step} ({reason}).")
        return None

    def train(self, *args: Any, **kwargs: Any) -> None:
        """As ``Trainer.train``; when another rank received SIGINT/SIGTERM and every rank
        stopped, this rank raises :class:`~trainbus.train.TrainingInterrupted` too (with
        ``origin`` naming that rank), so that every process of the job exits non-zero. The
        chief's names the final checkpoint its ``ModelSaver`` wrote, whichever rank received
        the signal; another rank's says nothing about checkpoints (its savers do not run)."""
        self._peer_signal = None
        try:
            super().train(*args, **kwargs)
        except TrainingInterrupted as e:
            if e.origin is None and not self.is_chief and not checkpoint_report(self):
                # the signal came here, to a rank without the chief-only savers: not "no checkpoint"
                raise TrainingInterrupted(e.signame, e.epoch, e.global_step, e.signum) from None
            raise
        if self._peer_signal is not None:
            signum, rank = self._peer_signal
            # the chief names its final checkpoint, as after a signal of its own
            raise TrainingInterrupted(signal.Signals(signum).name, self.epoch_num, self.global_step, signum,
                                      origin=f"rank {rank}", **checkpoint_report(self))

    def setup_callbacks(self, callbacks: Any, monitors: Any) -> None:
        super().setup_callbacks(callbacks, monitors)
        # built after every callback's setup_graph, so variables created there are included
        with self.graph.as_default(), tf1.name_scope(None):
            self._varcheck = self._build_variable_check()
            self._nr_vars = len(tf1.global_variables())
            self._broadcast_op = self.hvd.broadcast_global_variables(0)
            if self._size > 1:
                # rank 0's starting_epoch, so that resuming works when only rank 0 has a log
                # directory (global_step travels with the global variables)
                self._epoch_ph = tf1.placeholder(tf.int64, [], name="trainbus_starting_epoch")
                self._epoch_bcast = self.hvd.broadcast(self._epoch_ph, 0, name="trainbus_starting_epoch_bcast")

    def _build_variable_check(self) -> Any:
        lines = variable_signature(tf1.global_variables())
        data = "\n".join(lines).encode()
        digest = np.frombuffer(hashlib.sha256(data).digest(), dtype=np.uint8)
        hvd = self.hvd
        with tf1.name_scope("trainbus_horovod_varcheck"):
            dig = tf.constant(digest.reshape(1, -1), name="digest")
            text = tf.constant(np.frombuffer(data, dtype=np.uint8) if data else np.zeros([0], np.uint8), name="text")
            length = tf.constant([len(data)], dtype=tf.int64, name="length")
            return {
                "digest": hvd.allgather(dig, name="trainbus_varcheck_digest"),
                "text": hvd.allgather(text, name="trainbus_varcheck_text"),
                "length": hvd.allgather(length, name="trainbus_varcheck_length"),
            }

    def _check_variables(self) -> None:
        if self._size == 1:
            return
        res = self.sess.run(self._varcheck)
        digests = res["digest"]
        if all((digests[i] == digests[0]).all() for i in range(len(digests))):
            return
        per_rank = []
        offset = 0
        for n in res["length"]:
            chunk = res["text"][offset:offset + int(n)].tobytes().decode()
            per_rank.append(chunk.split("\n") if chunk else [])
            offset += int(n)
        detail = describe_mismatch(per_rank)
        raise VariableMismatchError(
            f"HorovodTrainer (rank {self._rank}): the ranks built different global variables, so rank 0's values "
            f"cannot be broadcast: {detail}. Build the same model on every rank; callbacks that create variables "
            "must run on every rank (set_chief_only(False))."
        )

    def broadcast_variables(self, when: str) -> None:
        """Make every rank's global variables rank 0's (``when`` names the moment in the log)."""
        if self.is_chief:
            logger.info(f"Broadcasting {self._nr_vars} global variables from rank 0 ({when}) ...")
        self.sess.run(self._broadcast_op)

    def main_loop(self, steps_per_epoch: int, starting_epoch: int, max_epoch: int) -> None:
        if self._size > 1 and self.sess is not None:
            chief_epoch = int(self.sess.run(self._epoch_bcast, feed_dict={self._epoch_ph: int(starting_epoch)}))
            if chief_epoch != starting_epoch:
                logger.info(f"HorovodTrainer (rank {self._rank}): starting at epoch {chief_epoch} like rank 0 "
                            f"(this rank was given starting_epoch={starting_epoch}).")
            starting_epoch = chief_epoch
        super().main_loop(steps_per_epoch, starting_epoch, max_epoch)

    def initialize(self, session_creator: Any, session_init: Any) -> None:
        config = getattr(session_creator, "config", None)
        if config is not None:
            _configure_session(config, self._local_rank, self._local_size)
        super().initialize(session_creator, session_init)

    def after_session_init(self) -> None:
        super().after_session_init()
        self._check_variables()
        # rank 0 has initialized (and restored); everyone starts from its values
        self.broadcast_variables("after initialization")


def _configure_session(config: Any, local_rank: int, local_size: int) -> None:
    """Pin each rank to its own GPU and share the CPU threads among the local ranks."""
    try:
        has_gpu = bool(tf.config.list_physical_devices("GPU"))
    except Exception:  # noqa: BLE001
        has_gpu = False
    if has_gpu:
        config.gpu_options.visible_device_list = str(local_rank)
    if config.inter_op_parallelism_threads == 0:
        config.inter_op_parallelism_threads = max(1, (os.cpu_count() or 1) // max(1, local_size))
