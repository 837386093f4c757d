"""Trainers on TensorFlow's distributed runtime: ps tasks hold the variables, worker tasks
train; worker task 0 is the chief."""

from __future__ import annotations

import re
import signal
import time
from typing import Any, Callable

import tensorflow as tf

from trainbus.tfutils.common import get_global_step_var
from trainbus.tfutils.tower import TowerFunc
from trainbus.plugin_api import TrainingInterrupted, checkpoint_report, signum_of_reason
from trainbus.train.tower import SingleCostTrainer
from trainbus.utils import logger

from trainbus.graph_builder import (
    DataParallelBuilder,
    aggregate_grads_colocate,
    check_shared_grads,
    gpus_available,
    normalize_devices,
)

tf1 = tf.compat.v1

__all__ = ["DistributedTrainerBase", "DistributedTrainerParameterServer", "DistributedTrainerReplicated",
           "DistributedSessionCreator"]

#: name of the global variable the chief initializes last: its being initialized tells the
#: other workers that initialization (and any restore) is complete
INIT_DONE_FLAG = "trainbus_chief_init_done"
#: name of the variable on ps task 0 through which the workers agree to stop: one int32 per
#: worker (0, the number of the signal it received, 1 for another request, or
#: ``PS_SIGNAL + signum`` when a ps task received the signal). It is in no collection, so
#: checkpoints never hold it.
STOP_VAR = "trainbus_stop_request"
PS_SIGNAL = 1000


def _stop_variable(nr_workers: int) -> Any:
    with tf1.device("/job:ps/task:0"), tf1.name_scope(None):
        return tf1.Variable(tf.zeros([nr_workers], tf.int32), name=STOP_VAR, trainable=False, collections=[],
                            use_resource=False)


def _describe_stop(codes: Any) -> tuple[int, int] | None:
    """``(kind, worker)`` of the request that names a stop: a signalled worker first (lowest
    task), else the lowest requesting worker; None when nobody asked."""
    kinds = [int(k) for k in codes]
    for pick in ((lambda k: k > 1), (lambda k: k != 0)):
        for task, k in enumerate(kinds):
            if pick(k):
                return k, task
    return None


def _done_queue(ps_task: int, nr_workers: int) -> Any:
    with tf1.device(f"/job:ps/task:{ps_task}"):
        return tf1.FIFOQueue(max(1, nr_workers), [tf.int32], shapes=[[]],
                             shared_name=f"trainbus_done_queue_ps{ps_task}", name=f"trainbus_done_queue_ps{ps_task}")


def _filtered_config(config: Any, filters: list[str]) -> Any:
    """A copy of ``config`` (a ConfigProto or None) whose session sees only ``filters``
    (unless the user set device filters already).

    Why: a session's master contacts every task it may see when the session is created.
    A task whose server is not listening yet refuses that connection, and gRPC then keeps
    the channel to it in a failed state for up to a second (TensorFlow's reconnect
    backoff); a tensor transfer over that channel in that second fails at once
    (``RecvTensor`` is fail-fast) with ``UnavailableError ... Connection refused``, although
    the task is alive. A ps task that saw the workers would thus fail a worker's first step
    when that worker started a little later than the ps. With the filters a task only
    contacts the tasks it exchanges tensors with, and a ps connects to a worker only when
    that worker's step asks for it, i.e. when its server is already listening."""
    cfg = tf1.ConfigProto()
    if config is not None:
        cfg.CopyFrom(config)
    if not cfg.device_filters:
        cfg.device_filters.extend(filters)
    return cfg


def _cluster_of(server: Any) -> tuple[Any, str, int]:
    if not (hasattr(server, "server_def") and hasattr(server, "target")):
        raise TypeError(f"server must be a tf.compat.v1.train.Server, got {server!r} of type {type(server).__name__}")
    sd = server.server_def
    cluster = tf1.train.ClusterSpec(sd.cluster)
    return cluster, sd.job_name, int(sd.task_index)


def serve_parameter_server(server: Any, timeout: float | None = None) -> None:
    """Serve as a ps task until every worker reported that it finished (each worker
    enqueues a token into a shared-name queue on every ps task at the end of training).

    The ps counts the tokens by reading the queue's size, a few times a second; it never
    dequeues them. A dequeue run with a time limit could take a token in the same instant its
    run gave up, and that token would be lost. The ps would then wait forever for a worker
    that had already reported.

    :param timeout: give up (with a warning) after this many seconds; None waits forever.
    """
    cluster, job, task = _cluster_of(server)
    if job != "ps":
        raise ValueError(f"serve_parameter_server: this server is task {task} of job {job!r}, not a ps task")
    nr_workers = len(cluster.job_tasks("worker"))
    g = tf.Graph()
    with g.as_default():
        reported = _done_queue(task, nr_workers).size()
        # the workers' stop vector (same name on ps task 0: the same variable)
        stop_var = _stop_variable(nr_workers)
        code_ph = tf1.placeholder(tf.int32, [nr_workers])
        ask_stop = tf1.assign(stop_var, tf.maximum(stop_var, code_ph))
        read_stop = tf.identity(stop_var)
    logger.info(f"Parameter server task {task} is serving; waiting for {nr_workers} workers to finish ...")
    received: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        if received:  # a second signal: the default action, now
            signal.signal(signum, signal.SIG_DFL)
            signal.raise_signal(signum)
        received.append(signum)

    previous = {}
    if threading_is_main():
        for sig in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(sig) not in (signal.SIG_IGN, None):
                previous[sig] = signal.signal(sig, on_signal)
    # short runs and waits, so that a signal is acted on within half a second
    poll = tf1.RunOptions(timeout_in_ms=500)
    deadline = time.monotonic() + timeout if timeout else None
    asked = False
    try:
        # this ps task (and ps task 0, which holds the stop vector) only: never the workers
        filters = sorted({f"/job:ps/task:{task}", "/job:ps/task:0"})
        config = _filtered_config(server.server_def.default_session_config, filters)
        with tf1.Session(server.target, graph=g, config=config) as sess:
            done = 0
            while done < nr_workers:
                if received and not asked:
                    name = signal.Signals(received[0]).name
                    try:
                        sess.run(ask_stop, feed_dict={code_ph: [PS_SIGNAL + received[0]] * nr_workers}, options=poll)
                        asked = True
                        logger.warning(f"Parameter server task {task}: received {name}; asked every worker to stop "
                                       "after its current step.")
                    except tf.errors.OpError:
                        pass  # the workers have not initialized the variables yet: try again
                try:
                    done = int(sess.run(reported, options=poll))
                except tf.errors.DeadlineExceededError:
                    pass  # this task is busy serving the workers' steps: ask again
                if done < nr_workers:
                    if deadline is not None and time.monotonic() > deadline:
                        logger.warning(f"Parameter server task {task}: only {done} of {nr_workers} workers reported "
                                       f"done within {timeout} s; stopping anyway.")
                        return
                    time.sleep(0.2)
            stop = None
            if task == 0:
                try:
                    stop = _describe_stop(sess.run(read_stop, options=poll))
                except tf.errors.OpError:
                    stop = None
    finally:
        for sig, h in previous.items():
            signal.signal(sig, h)
    logger.info(f"Parameter server task {task}: all {nr_workers} workers finished.")
    if received:
        raise TrainingInterrupted(signal.Signals(received[0]).name, None, None, received[0])
    if stop is not None and 1 < stop[0] < PS_SIGNAL:
        raise TrainingInterrupted(signal.Signals(stop[0]).name, None, None, stop[0], origin=f"worker {stop[1]}")

def threading_is_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


class DistributedSessionCreator(tf1.train.SessionCreator):
    """Sessions for workers of a cluster: the chief initializes the global variables (except
    the init-done flag, which the trainer initializes after ``session_init``); the other
    workers poll every ``recovery_wait_secs`` (0.2 s, not TF's 30 s) until every global
    variable, the flag included, is initialized. Unless ``config`` sets ``device_filters``,
    the session sees only the ps tasks and this worker (a worker exchanges no tensors with
    the other workers; see ``_filtered_config`` for why that matters)."""

    def __init__(self, server: Any, is_chief: bool, config: Any = None, recovery_wait_secs: float = 0.2,
                 max_wait_secs: float = 600.0) -> None:
        self.server = server
        self.is_chief = is_chief
        self.config = config
        self.recovery_wait_secs = recovery_wait_secs
        self.max_wait_secs = max_wait_secs

    def create_session(self) -> Any:
        all_global = tf1.global_variables()
        flag = [v for v in all_global if v.op.name == INIT_DONE_FLAG]
        others = [v for v in all_global if v.op.name != INIT_DONE_FLAG]
        init_op = tf1.variables_initializer(others, name="trainbus_init_global")
        local_init = tf.group(tf1.local_variables_initializer(), tf1.tables_initializer(), name="trainbus_init_local")
        # the chief is ready once it initialized everything but the flag (it sets the flag
        # after session_init); the others wait for the flag too
        ready = tf1.report_uninitialized_variables(others if self.is_chief else others + flag)
        sm = tf1.train.SessionManager(local_init_op=local_init, ready_op=ready,
                                      recovery_wait_secs=self.recovery_wait_secs)
        # the ps tasks and this worker: a worker never exchanges tensors with another one
        _, _, task = _cluster_of(self.server)
        config = _filtered_config(self.config, ["/job:ps", f"/job:worker/task:{task}"])
        t0 = time.monotonic()
        if self.is_chief:
            sess = sm.prepare_session(self.server.target, init_op=init_op, config=config,
                                      max_wait_secs=self.max_wait_secs)
        else:
            logger.info("Waiting for the chief worker to initialize the variables ...")
            sess = sm.wait_for_session(self.server.target, config=config, max_wait_secs=self.max_wait_secs)
            if sess is None:
                raise RuntimeError(f"the chief worker did not initialize the variables within {self.max_wait_secs} s")
            logger.info(f"Variables are ready after {time.monotonic() - t0:.1f} s.")
        return sess


class DistributedTrainerBase(SingleCostTrainer):
    """Common part of the distributed trainers. On a ``ps`` task the trainer serves
    (``train`` returns once every worker has finished); on a ``worker`` task it trains."""

    #: every worker advances the one global_step on the parameter server
    global_step_shared = True

    def __init__(self, gpus: Any, server: Any) -> None:
        cluster, job, task = _cluster_of(server)
        if job not in ("ps", "worker"):
            raise ValueError(f"{type(self).__name__}: the server's job must be 'ps' or 'worker', got {job!r}")
        if "ps" not in cluster.jobs or "worker" not in cluster.jobs:
            raise ValueError(f"{type(self).__name__}: the cluster needs a 'ps' job and a 'worker' job, got {cluster.jobs}")
        #: list of device ids used by this worker, one tower each
        self.devices = normalize_devices(gpus, type(self).__name__)
        self.server = server
        self.cluster = cluster
        self.job_name = job
        self.task_index = task
        self.num_ps = len(cluster.job_tasks("ps"))
        self.num_worker = len(cluster.job_tasks("worker"))
        super().__init__()
        #: worker task 0 is the chief
        self.is_chief = job == "worker" and task == 0
        self._stop_read: Any = None
        self._local_stop: str | None = None
        self._stop_published = False
        self._stop_confirmed = False
        self._peer_signal: tuple[int, int] | None = None
        self._worker_device = f"/job:worker/task:{task}"
        kind = "gpu" if gpus_available() > 0 else "cpu"
        self._raw_devices = [f"{self._worker_device}/{kind}:{i}" for i in self.devices]
        self._worker_cpu = f"{self._worker_device}/cpu:0"
        if job == "ps":
            logger.info(f"{type(self).__name__}: this process is ps task {task}; train() serves the variables.")

    @property
    def raw_devices(self) -> list[str]:
        return list(self._raw_devices)

    def _ps_setter(self, worker_device: str | None = None) -> Any:
        return tf1.train.replica_device_setter(worker_device=worker_device or self._worker_cpu, cluster=self.cluster)

    # ---------------------------------------------------------------- ps role
    def setup_graph(self, inputs_desc: Any, input: Any, get_cost_fn: Callable[..., Any], get_opt_fn: Callable[[], Any]) -> None:
        if self.job_name == "ps":
            return  # a ps task builds nothing; it serves the workers' graphs
        # ops placed by nobody else run on this worker (never on another task by default)
        with self.graph.as_default(), tf1.device(self._worker_cpu):
            super().setup_graph(inputs_desc, input, get_cost_fn, get_opt_fn)

    def train(self, callbacks: Any, monitors: Any, session_creator: Any, session_init: Any, steps_per_epoch: int,
              starting_epoch: int = 1, max_epoch: int = 9999999) -> None:
        if self.job_name == "ps":
            serve_parameter_server(self.server)
            return
        self._peer_signal = None
        try:
            super().train(callbacks, monitors, session_creator, session_init, steps_per_epoch, starting_epoch,
                          max_epoch)
        except TrainingInterrupted as e:
            if e.origin is None and not self.is_chief and not checkpoint_report(self):
                # the signal came here, to a worker without the chief-only savers: not "no checkpoint"
                raise TrainingInterrupted(e.signame, e.epoch, e.global_step, e.signum) from None
            raise
        if self._peer_signal is not None:
            # every process of the job ends the same way: non-zero, with one line (the chief's
            # names its final checkpoint, as after a signal of its own)
            signum, task = self._peer_signal
            raise TrainingInterrupted(signal.Signals(signum).name, self.epoch_num, self.global_step, signum,
                                      origin=f"worker {task}" if task >= 0 else "a parameter server",
                                      **checkpoint_report(self))

    def train_with_config(self, config: Any) -> None:
        if self.job_name == "ps":
            serve_parameter_server(self.server)
            return
        super().train_with_config(config)

    # ---------------------------------------------------------------- worker role
    def _setup_graph(self, input: Any, get_cost_fn: TowerFunc, get_opt_fn: Callable[[], Any]) -> list:
        with tf1.device(self._ps_setter()):
            get_global_step_var()  # shared by all workers, on a ps task
            with tf1.device("/job:ps/task:0"):
                tf1.get_variable(INIT_DONE_FLAG, shape=[], dtype=tf.bool, initializer=tf1.ones_initializer(),
                                 trainable=False, use_resource=False)
        done_ops = [_done_queue(i, self.num_worker).enqueue([tf.constant(self.task_index)]) for i in range(self.num_ps)]
        # stop agreement: read along with every step; written once, by a worker asked to stop
        self._stop_var = _stop_variable(self.num_worker)
        with tf1.device("/job:ps/task:0"):
            self._stop_read = tf.identity(self._stop_var, name="trainbus_stop_read")
            self._stop_code = tf1.placeholder(tf.int32, [], name="trainbus_stop_code")
            self._stop_write = tf1.scatter_update(self._stop_var, [self.task_index],
                                                  tf.reshape(self._stop_code, [1]), name="trainbus_stop_write")
        self._done_ops = done_ops
        return list(self._build_training(input, get_cost_fn, get_opt_fn))

    def _build_training(self, input: Any, get_cost_fn: TowerFunc, get_opt_fn: Callable[[], Any]) -> list:
        raise TypeError(f"{type(self).__name__} must implement _build_training")

    def setup_callbacks(self, callbacks: Any, monitors: Any) -> None:
        # variables that callbacks create go to the ps tasks too
        with self.graph.as_default(), tf1.device(self._worker_cpu), tf1.device(self._ps_setter()):
            super().setup_callbacks(callbacks, monitors)

    def initialize(self, session_creator: Any, session_init: Any) -> None:
        from trainbus.tfutils.sesscreate import NewSessionCreator

        if not isinstance(session_creator, (NewSessionCreator, DistributedSessionCreator)):
            raise ValueError(
                f"{type(self).__name__} creates its own sessions on the cluster; got session_creator={session_creator!r}. "
                "Leave session_creator unset (a session_config is fine)."
            )
        if isinstance(session_creator, NewSessionCreator):
            session_creator = DistributedSessionCreator(self.server, self.is_chief, config=session_creator.config)
        with self.graph.as_default(), tf1.device(self._worker_cpu):
            super().initialize(session_creator, session_init)

    def before_session_close(self) -> None:
        """Tell every ps task this worker is done with it (also after a failure), once every
        callback's ``after_train`` ran and the last checkpoint is written: a ps ends when all
        workers are done, so nothing of this worker may need its variables afterwards."""
        super().before_session_close()
        if self.sess is None:
            return
        opts = tf1.RunOptions(timeout_in_ms=10000)
        for op in getattr(self, "_done_ops", ()):
            try:
                self.sess.run(op, options=opts)
            except Exception as e:  # noqa: BLE001 - a ps that is gone must not hide the real outcome
                logger.warning(f"Could not report 'done' to a parameter server: {type(e).__name__}: {e}")

    def after_session_init(self) -> None:
        super().after_session_init()
        if self.is_chief:
            flag = [v for v in tf1.global_variables() if v.op.name == INIT_DONE_FLAG][0]
            # the stop vector before the flag: the other workers wait for the flag
            self.sess.run(self._stop_var.initializer)
            self.sess.run(flag.initializer)

    # ---------------------------------------------------------------- stopping together
    def agree_stop(self, cause: str) -> bool:
        """Every worker stops: this worker writes its stop cause (a signal, ``request_stop()``,
        ``run_context.request_stop()``, a ``StopTraining`` raised by a callback) into a vector on
        ps task 0 before its next step, and every worker reads that vector along with each
        step, so each stops after its next step (workers are not synchronized: their last steps
        differ). A signal to a ps task asks every worker the same way."""
        if self._stop_read is None:
            return True
        if self._local_stop is None or signum_of_reason(cause) is not None:
            self._local_stop = cause
        return False

    def run_step(self) -> None:
        if self._stop_read is None:
            return super().run_step()
        if self._local_stop is not None and not self._stop_published:
            self.sess.run(self._stop_write, feed_dict={self._stop_code: signum_of_reason(self._local_stop) or 1})
            self._stop_published = True
        _, codes = self.hooked_sess.run([self.train_op, self._stop_read])
        if not self._stop_confirmed and codes.any():
            kind, task = _describe_stop(codes)
            mine = int(codes[self.task_index]) if self.task_index < len(codes) else 0
            if kind >= PS_SIGNAL:
                kind, task, mine = kind - PS_SIGNAL, -1, 0
            if kind > 1:
                name = signal.Signals(kind).name
                who = f"worker {task}" if task >= 0 else "a parameter server"
                if mine <= 1:
                    self._peer_signal = (kind, task)
                reason = f"signal {name}" if mine > 1 else f"signal {name} received by {who}"
            else:
                reason = self._local_stop if mine else f"worker {task} requested a stop"
            self._stop_confirmed = True
            self.confirm_stop(reason)
            logger.info(f"{type(self).__name__}: worker {self.task_index} stops after global step "
                        f"{self.global_step} ({reason}).")
        return None


class DistributedTrainerParameterServer(DistributedTrainerBase):
    """Distributed training with the variables on the ps tasks: each worker averages the
    gradients of its own towers and applies them to the ps variables (workers are not
    synchronized with each other). Reads of the variables are cached per step on the
    worker (``caching_device``).

    :param gpus: number or list of local device ids of this worker, one tower each.
    :param server: the ``tf.compat.v1.train.Server`` of this process.
    :param caching_device: ``'cpu'`` or ``'gpu'``: where a worker caches variables read from ps.
    """

    def __init__(self, gpus: Any, server: Any, caching_device: str = "cpu") -> None:
        if caching_device not in ("cpu", "gpu"):
            raise ValueError(f"DistributedTrainerParameterServer: caching_device must be 'cpu' or 'gpu', got {caching_device!r}")
        super().__init__(gpus, server)
        self.caching_device = caching_device

    def _build_training(self, input: Any, get_cost_fn: TowerFunc, get_opt_fn: Callable[[], Any]) -> list:
        n = len(self.devices)
        cache = self._worker_cpu if self.caching_device == "cpu" else self._raw_devices[0]
        logger.info(f"Building {n} towers on {self._raw_devices}; variables on {self.num_ps} ps task(s), cached on {cache} ...")
        get_grad_fn = self._make_get_grad_fn(input, get_cost_fn, get_opt_fn)
        setters = [self._ps_setter(d) for d in self._raw_devices]
        with tf1.variable_scope(tf1.get_variable_scope(), caching_device=cache):
            grad_lists = DataParallelBuilder.call_for_each_tower(self.devices, get_grad_fn, setters)
        check_shared_grads(grad_lists)
        with tf1.device(self._worker_cpu):
            grads = aggregate_grads_colocate(grad_lists, average=True)
        opt = get_opt_fn()
        with tf1.device(self._ps_setter()):
            self.train_op = opt.apply_gradients(grads, name="train_op")
        return []


class DistributedTrainerReplicated(DistributedTrainerBase):
    """Distributed replicated training: every worker keeps a local copy of the model per
    device (local variables ``tower{i}/...``); the global copy (same names without the
    tower prefix, what checkpoints hold) lives on the ps tasks. In each step a worker
    averages the gradients of its towers, applies them to the global copy, then copies the
    global values back into its towers. A worker starts from the global values once the
    chief has initialized (and restored) them.

    :param gpus: number or list of local device ids of this worker, one tower each.
    :param server: the ``tf.compat.v1.train.Server`` of this process.
    """

    def _build_training(self, input: Any, get_cost_fn: TowerFunc, get_opt_fn: Callable[[], Any]) -> list:
        n = len(self.devices)
        logger.info(f"Building {n} replicated towers on {self._raw_devices}; global copy on {self.num_ps} ps task(s) ...")
        get_grad_fn = self._make_get_grad_fn(input, get_cost_fn, get_opt_fn)
        # use_vs: every tower builds its own copies, as local variables
        grad_lists = DataParallelBuilder.call_for_each_tower(self.devices, get_grad_fn, self._raw_devices,
                                                             use_vs=[True] * n)
        _check_towers_match(grad_lists)
        # the global copy of every trainable variable, initialized like tower 0's
        global_vars = []
        with tf1.device(self._ps_setter()), tf1.name_scope(None):
            for _, v in grad_lists[0]:
                name = re.sub(r"^tower0/", "", v.op.name)
                with tf1.variable_scope(tf1.VariableScope(reuse=False), auxiliary_name_scope=False):
                    gv = tf1.get_variable(name, initializer=v.initial_value, trainable=False, use_resource=True)
                global_vars.append(gv)
        for gv in global_vars:
            tf1.add_to_collection(tf1.GraphKeys.MODEL_VARIABLES, gv)
        with tf1.device(self._worker_cpu), tf1.name_scope("AggregateLocalGrads"):
            avg = []
            for k in range(len(global_vars)):
                gs = [tf.convert_to_tensor(grad_lists[t][k][0]) for t in range(n)]
                avg.append(gs[0] if n == 1 else tf.multiply(tf.add_n(gs), 1.0 / n))
        opt = get_opt_fn()
        with tf1.device(self._ps_setter()):
            apply_op = opt.apply_gradients(list(zip(avg, global_vars)), name="apply_to_global")
        with tf1.control_dependencies([apply_op]):
            copy_back = self._copy_global_to_local(grad_lists, global_vars, "copy_back")
        self.train_op = tf.group(copy_back, name="train_op")
        self._sync_local_op = self._copy_global_to_local(grad_lists, global_vars, "sync_from_global")
        return []

    def _copy_global_to_local(self, grad_lists: Any, global_vars: list[Any], name: str) -> Any:
        ops = []
        with tf1.name_scope(name):
            for t, gl in enumerate(grad_lists):
                with tf1.device(self._raw_devices[t]):
                    for (_, lv), gv in zip(gl, global_vars):
                        ops.append(tf1.assign(lv, gv.read_value()))
        return tf.group(*ops, name=name)

    def after_session_init(self) -> None:
        super().after_session_init()
        # the chief's flag is set: global values are final; every worker starts from them
        self.sess.run(self._sync_local_op)


def _check_towers_match(grad_lists: Any) -> None:
    names = [[re.sub(r"^tower\d+/", "", v.op.name) for _, v in gl] for gl in grad_lists]
    for i, nm in enumerate(names[1:], start=1):
        if nm != names[0]:
            raise ValueError(f"tower {i} has gradients for {nm} but tower 0 for {names[0]}; the tower function must "
                             "create the same trainable variables in every tower")
