#!/usr/bin/env python
"""Startup: from process start to the first training step, trainbus against a bare loop.

Each measurement is a fresh interpreter training the defaults workload (the MLP 784-256-256-10
of ``bench_core.py`` with ``add_moving_summary``, trained with the default callbacks and
monitors) until its first step has run, then exiting. The kinds run interleaved, round after
round, so that machine load hits them alike; the table gives medians:

* **trainbus**: ``launch_train_with_config(TrainConfig(...), SimpleTrainer())``;
* **bare loop**: the same graph built by hand, ``tf.compat.v1.Session()``, the variables
  initialized, one ``sess.run(train_op, feed_dict)``;
* **bare loop, same logging**: the bare loop plus what ``add_moving_summary`` and the default
  monitors set up before the first step: the exponential moving average of the cost, its update
  grouped into the step, a scalar summary of it, ``merge_all`` and a
  ``tf.compat.v1.summary.FileWriter`` in a temporary directory (nothing written to it);
* **bare loop, same graph**: the same-logging loop plus what tensorpack's API itself asks of any
  trainer of it, done by hand: a ``global_step`` variable incremented by the step, the session
  made with tensorpack's default session configuration (``get_default_sess_config()``: one
  intra-op thread, soft placement) and the local variables initialized too. What a framework
  takes over this loop is its own machinery alone (imports, plugins, callbacks, hooks).
  A framework's overhead is given over all three bare loops; the target is over the first two;
* **trainbus, imported beforehand**: trainbus's training, with every module of trainbus's
  distributions and of pluggy that the training imports (those the run's first trainbus child
  named) imported before the clock starts: the training as it would be if trainbus's import cost
  nothing. trainbus against it, round by round, is what its import costs;
* **tensorpack** (``--tensorpack-python PATH``, an interpreter where ``import tensorpack``
  works): tensorpack's own ``launch_train_with_config``, and the three bare loops in that interpreter.

Seconds to the first step are counted from just before the process is started (interpreter
start-up and ``import tensorflow`` included, as a user waits for them); "after TF" counts from
the moment ``import tensorflow`` returned in that process, which leaves out the largest and
noisiest part both sides share. Peak RSS is the process's own (``os.wait4``). trainbus's own
time is split by phase (its import, TrainConfig + graph, callbacks setup, session creation
and initialization, the first step) by timing ``Trainer.setup_callbacks`` and
``Trainer.initialize`` from the outside; the bare loop's phases are beside them.

It also says which of scikit-learn, matplotlib, scipy and OpenCV each environment can import:
Keras imports each of them during every ``import tensorflow`` when it is importable.

Also measured, each in fresh interpreters: ``from trainbus import *`` after TensorFlow is
imported (and ``from tensorpack import *``), ``import trainbus`` alone (and whether it imported
TensorFlow), the ``trainbus plugins`` command, and on the defaults workload the least import of a
framework on pluggy and entry points after TensorFlow (``import pluggy``, then trainbus's registry
module and its one entry-point scan), set against the room the target leaves (below).

    python bench/bench_startup.py                       # 5 rounds
    python bench/bench_startup.py --rounds 9 --tensorpack-python /path/to/venv/bin/python
    python bench/bench_startup.py --workload queue      # fed by a QueueInput

``--workload queue`` feeds the model through a ``QueueInput`` instead (``TrainConfig(data=
QueueInput(dataflow))``; a queue in the graph that a thread fills, and the moving average of its
size). It is what trainbus makes of ``TrainConfig(dataflow=...)`` with any trainer, and what
tensorpack makes of it with every trainer but ``SimpleTrainer`` (which tensorpack feeds with a
``FeedInput``): it is given explicitly, so that both frameworks do the same work. Its bare loops
read from a ``FIFOQueue`` of the same capacity that a thread fills with ``sess.run(enqueue,
feed_dict)`` once the variables are initialized, the "same logging" one also keeping the moving
average of the queue's size. The target is judged on the defaults workload only.

Each overhead is given twice: the difference of the two kinds' medians, and the median (with
quartiles) of the rounds' own differences; a round runs the kinds back to back, so the second
figure moves less when the machine's load changes during the run. The ratio of the two medians after
``import tensorflow`` ends each overhead's line: it moves less than the seconds when the whole machine
is slower one day than another. The line under it also gives the median of the rounds' own ratios with
its 90% bootstrap interval: within one run the ratio scatters from round to round as the seconds do.
The overhead's target is judged on the median of the rounds' differences, with its 90% bootstrap
interval (the rounds resampled 2000 times, a fixed seed): **met** when the whole interval is at or
below 0.05 s, **not met** when the whole interval is above, else **not decided by this run** (the
rounds scatter more than the distance to the target: run more).
With tensorpack measured, trainbus's overhead over its bare loop is also set against tensorpack's over the
bare loop of tensorpack's interpreter, round by round (each round's difference of the two overheads), and
judged the same way against the target the benchmark proposes in place of the issue's: trainbus's overhead
at most tensorpack's (the median of those differences at or below 0).
On the defaults workload the report also gives the target's floor: the same-logging and same-graph
loops over the bare loop of their interpreter, round by round, with the 90% interval of the median.
That is the defaults' own work done by hand with no framework imported; a framework's overhead over
the bare loop is that plus its own code, so the target less the floor's interval is the room the
target leaves the framework's import and machinery ("none" when the work by hand alone is at or
above the target in the whole interval).
``--json PATH`` writes every measurement of the run; ``--from-json A.json B.json ...`` prints the
report again from such files, several runs pooled as one (their rounds together), without running
anything: three runs of 15 rounds judge the target on 45 rounds (each run once: the same run twice is refused).

Targets (issue "Startup"): overhead over the bare loop (in the same environment) to the first step <= 0.05 s; peak RSS
over the bare loop <= tensorpack's; ``from trainbus import *`` after TensorFlow <= 0.15 s;
``import trainbus`` <= 0.05 s without TensorFlow; ``trainbus plugins`` < 0.5 s.

The environment may ask Python not to write bytecode (``PYTHONDONTWRITEBYTECODE``); an
editable install then compiles every trainbus module again in every process, which no
installed package does. The children then keep their bytecode under one cache directory
(``PYTHONPYCACHEPREFIX``), and a first round that is not counted fills it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from _mlp import mlp_cost  # bench/ is sys.path[0]: the script and its children are run by path

HERE = os.path.abspath(__file__)
BATCH, STEPS = 64, 3


# ----------------------------------------------------------------------------- children
def _data(np):
    rng = np.random.RandomState(0)
    return [[rng.rand(BATCH, 784).astype("float32"), rng.randint(0, 10, size=BATCH).astype("int32")]
            for _ in range(STEPS + 1)]


def _now() -> tuple[float, float]:
    """(wall-clock time, CPU seconds this process used so far: all its threads)."""
    return time.time(), time.process_time()


def _reads_a_queue(graph) -> bool:
    """Whether the training's graph has a FIFO queue (the input of the queue workload); recorded
    after the first step, outside the measurement."""
    return any(op.type.startswith("FIFOQueue") for op in graph.get_operations())


def _report(marks: dict) -> None:
    import resource

    marks["rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sys.stdout.write("\nSTARTUP " + json.dumps(marks) + "\n")  # on its own line (after a progress bar)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the first step is where this measurement ends


def child_bare(logging_too: bool = False, same_graph: bool = False, workload: str = "defaults") -> None:
    """The bare loop; with ``logging_too``, "same logging": also what ``add_moving_summary``
    and the default monitors set up before the first step (the moving average of the cost
    updated with the step, its scalar summary, the merged summaries, an event file); with
    ``same_graph`` (which implies ``logging_too``), "same graph": also the ``global_step`` the
    step increments and tensorpack's default session configuration.

    On the ``queue`` workload the step reads its batch from a ``FIFOQueue`` (capacity 50)
    that a thread fills with ``sess.run(enqueue, feed_dict)``, started once the variables are
    initialized; "same logging" then also keeps the moving average of the queue's size (decay
    0.5) updated with the step and its scalar summary, as ``QueueInput`` does."""
    logging_too = logging_too or same_graph
    from_queue = workload == "queue"
    marks: dict = {}
    import tensorflow as tf

    marks["tf"] = _now()
    import numpy as np

    tf1 = tf.compat.v1
    dps = _data(np)
    marks["import"] = _now()
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, [BATCH, 784], name="x")
        y = tf1.placeholder(tf.int32, [BATCH], name="y")
        if from_queue:
            queue = tf1.FIFOQueue(50, [tf.float32, tf.int32], name="input_queue")
            enqueue = queue.enqueue([x, y])
            qx, qy = queue.dequeue()
            qx.set_shape([BATCH, 784])
            qy.set_shape([BATCH])
            cost = mlp_cost(tf, qx, qy)
        else:
            cost = mlp_cost(tf, x, y)
        train_op = tf1.train.GradientDescentOptimizer(0.01).minimize(cost)
        if same_graph:
            step = tf1.train.get_or_create_global_step()
            train_op = tf.group(train_op, step.assign_add(1, read_value=False))
        if logging_too:
            ema = tf1.train.ExponentialMovingAverage(0.95, zero_debias=True)
            train_op = tf.group(train_op, ema.apply([cost]))
            tf1.summary.scalar("cost-summary", ema.average(cost))
            if from_queue:
                size = tf.cast(queue.size(), tf.float32, name="queue_size")
                size_ema = tf1.train.ExponentialMovingAverage(0.5, zero_debias=True, name="queue_size_ema")
                train_op = tf.group(train_op, size_ema.apply([size]))
                tf1.summary.scalar("queue_size", size_ema.average(size))
            tf1.summary.merge_all()  # run at an epoch's end, as the default MergeAllSummaries does
        init = tf1.global_variables_initializer()
        marks["graph"] = _now()
        if logging_too:
            # with a file name suffix the event file is created now (without one, at the first write)
            writer = tf1.summary.FileWriter(tempfile.mkdtemp(prefix="bench-startup-bare-"),
                                            filename_suffix=f".{os.getpid()}")
            marks["writer"] = _now()
        if same_graph:
            # tensorpack's get_default_sess_config(), written out
            config = tf1.ConfigProto(allow_soft_placement=True, intra_op_parallelism_threads=1,
                                     inter_op_parallelism_threads=0)
            config.gpu_options.per_process_gpu_memory_fraction = 0.99
            config.gpu_options.allow_growth = True
            sess = tf1.Session(config=config)
            sess.run([init, tf1.local_variables_initializer()])
        else:
            sess = tf1.Session()
            sess.run(init)
        marks["session"] = _now()
        if from_queue:
            def fill() -> None:  # until the process ends (os._exit in _report)
                for dp in itertools.cycle(dps):
                    sess.run(enqueue, feed_dict={x: dp[0], y: dp[1]})

            threading.Thread(target=fill, daemon=True).start()
            sess.run(train_op)
        else:
            sess.run(train_op, feed_dict={x: dps[0][0], y: dps[0][1]})
        marks["first"] = _now()
        marks["queue"] = _reads_a_queue(tf1.get_default_graph())
        if logging_too:
            writer.close()  # after the measurement, as a training closes its event file at the end
    _report(marks)


def _time_trainer(trainer_cls, marks: dict) -> None:
    """Mark the start and end of ``setup_callbacks`` and the end of ``initialize``."""
    setup, initialize = trainer_cls.setup_callbacks, trainer_cls.initialize

    def timed_setup(self, *a, **k):
        marks.setdefault("setup0", _now())
        try:
            return setup(self, *a, **k)
        finally:
            marks.setdefault("setup1", _now())

    def timed_initialize(self, *a, **k):
        try:
            return initialize(self, *a, **k)
        finally:
            marks.setdefault("session", _now())

    trainer_cls.setup_callbacks, trainer_cls.initialize = timed_setup, timed_initialize


#: the environment variable that names the modules the "imported beforehand" child imports before its clock starts
PRELOAD_ENV = "BENCH_STARTUP_PRELOAD"


def _framework_modules(before: set) -> list[str]:
    """The modules of trainbus's distributions (``trainbus``, ``trainbus_*``) and of pluggy imported
    since ``before`` was taken, in import order: what trainbus's import is."""
    def ours(name: str) -> bool:
        top = name.partition(".")[0]
        return top in ("trainbus", "pluggy") or top.startswith("trainbus_")

    return [m for m in list(sys.modules) if m not in before and ours(m)]


def child_framework(which: str, workload: str = "defaults", preload: bool = False) -> None:
    """A framework's training to its first step. With ``preload`` (trainbus only), the modules
    named by ``$BENCH_STARTUP_PRELOAD`` (those an earlier trainbus child imported, comma-separated)
    are imported before the clock starts: what is left is the training without trainbus's import."""
    marks: dict = {}
    import tensorflow as tf

    if preload:
        import importlib

        for name in filter(None, os.environ.get(PRELOAD_ENV, "").split(",")):
            importlib.import_module(name)
    before = set(sys.modules)
    marks["tf"] = _now()
    import numpy as np

    tf1 = tf.compat.v1
    if which == "trainbus":
        from trainbus.callbacks import Callback
        from trainbus.dataflow import DataFromList
        from trainbus.input_source import FeedInput
        from trainbus.tfutils.summary import add_moving_summary
        from trainbus.train import ModelDesc, SimpleTrainer, TrainConfig, launch_train_with_config
        from trainbus.train.base import Trainer
        from trainbus.utils import logger

        if workload == "queue":
            from trainbus.input_source import QueueInput
    else:
        from tensorpack.callbacks import Callback
        from tensorpack.dataflow import DataFromList
        from tensorpack.input_source import FeedInput
        from tensorpack.tfutils.summary import add_moving_summary
        from tensorpack.train import ModelDesc, SimpleTrainer, TrainConfig, launch_train_with_config
        from tensorpack.train.base import Trainer

        if workload == "queue":
            from tensorpack.input_source import QueueInput
        from tensorpack.utils import logger
    dps = _data(np)
    marks["import"] = _now()
    _time_trainer(Trainer, marks)

    class Model(ModelDesc):
        def inputs(self):
            return [tf.TensorSpec([BATCH, 784], tf.float32, "x"), tf.TensorSpec([BATCH], tf.int32, "y")]

        def build_graph(self, x, y):
            cost = mlp_cost(tf, x, y)
            add_moving_summary(cost)
            return cost

        def optimizer(self):
            return tf1.train.GradientDescentOptimizer(0.01)

    class FirstStep(Callback):
        def _trigger_step(self):
            marks["first"] = _now()
            marks["queue"] = _reads_a_queue(self.graph)
            if which == "trainbus":  # what its import was: the modules of trainbus and pluggy the training imported
                marks["modules"] = _framework_modules(before)
            _report(marks)

    logger.set_logger_dir(tempfile.mkdtemp(prefix="bench-startup-"), action="k")
    logging.getLogger(which).setLevel(logging.WARNING)  # both write their INFO lines the same way
    # the input is given, not left to the default: tensorpack's SimpleTrainer would feed a dataflow
    source = QueueInput if workload == "queue" else FeedInput
    config = TrainConfig(model=Model(), data=source(DataFromList(dps, shuffle=False)), callbacks=[FirstStep()],
                         max_epoch=1, steps_per_epoch=STEPS)
    launch_train_with_config(config, SimpleTrainer())
    raise SystemExit("the training ended without a first step")


def child_star(package: str) -> None:
    import tensorflow  # noqa: F401

    t, c = time.perf_counter(), time.process_time()
    exec(f"from {package} import *", {})
    print("SECONDS", time.perf_counter() - t, time.process_time() - c)


def child_least() -> None:
    """The least a framework built on pluggy and entry points imports after TensorFlow: pluggy, and
    the bus finding the installed plugins (trainbus's registry module and its one entry-point scan)."""
    import tensorflow  # noqa: F401

    t = time.perf_counter()
    import pluggy  # noqa: F401

    t1 = time.perf_counter()
    from trainbus.bus import registry

    registry.scan()
    print("SECONDS", t1 - t, time.perf_counter() - t)


def child_import() -> None:
    t, c = time.perf_counter(), time.process_time()
    import trainbus  # noqa: F401

    d, dc = time.perf_counter() - t, time.process_time() - c
    print("SECONDS", d, dc, any(m == "tensorflow" or m.startswith("tensorflow.") for m in sys.modules))


# ----------------------------------------------------------------------------- parent
#: the kinds' names in the tables: the bare loop with the same logging, the one with the same graph,
#: and the three bare loops in tensorpack's interpreter
LOGGING, GRAPH = "bare, same logging", "bare, same graph"
#: trainbus with the modules of its import imported before the clock starts
PRELOADED = "trainbus, imported beforehand"
TP_BARE, TP_LOGGING, TP_GRAPH = "bare (tp python)", "bare, same logging (tp python)", "bare, same graph (tp python)"


def child_env() -> tuple[dict, str]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    note = ""
    if env.pop("PYTHONDONTWRITEBYTECODE", None) is not None and "PYTHONPYCACHEPREFIX" not in env:
        env["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "trainbus-bench-pycache")
        note = (f"PYTHONDONTWRITEBYTECODE is set here: the children keep their bytecode in "
                f"{env['PYTHONPYCACHEPREFIX']} instead (as an installed package has it)")
    return env, note


def spawn(python: str, args: list[str], env: dict) -> tuple[float, dict | str, int]:
    """Run one child; returns (the time it was started, its output line parsed or its raw
    output, its peak RSS in KB)."""
    with tempfile.TemporaryFile() as out:
        start = time.time()
        proc = subprocess.Popen([python, HERE, *args], stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    for line in text.splitlines():
        if "STARTUP " in line:
            return start, json.loads(line.split("STARTUP ", 1)[1]), usage.ru_maxrss
        if line.startswith("SECONDS "):
            return start, {"line": line.split()[1:]}, usage.ru_maxrss
    return start, text, usage.ru_maxrss


def importable(python: str, module: str, env: dict) -> str | None:
    """None if ``python -c 'import module'`` works, else why not (one line)."""
    try:
        res = subprocess.run([python, "-c", f"import {module}"], capture_output=True, text=True, env=env, timeout=300)
    except OSError as e:
        return f"{python} cannot be run: {e.strerror or e}"
    if res.returncode == 0:
        return None
    last = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    return f"`import {module}` fails there: {last[-1] if last else f'exit status {res.returncode}'}"


#: what --workload measures, as the report names it
WORKLOADS = {"defaults": "defaults workload (MLP 784-256-256-10, default callbacks and monitors, a FeedInput)",
             "queue": "queue workload (MLP 784-256-256-10, default callbacks and monitors, a QueueInput)"}
#: the target on trainbus's overhead over the first two bare loops, seconds (issue "Startup")
TARGET_OVERHEAD = 0.05


def median_interval(diffs: list[float], level: float = 0.90, resamples: int = 2000) -> tuple[float, float]:
    """The ``level`` bootstrap interval of the median of ``diffs`` (percentiles of the medians of
    ``resamples`` resamples with replacement; a fixed seed, so one set of rounds gives one answer)."""
    rng = random.Random(0)
    meds = sorted(statistics.median(rng.choices(diffs, k=len(diffs))) for _ in range(resamples))
    tail = (1.0 - level) / 2
    return meds[int(tail * resamples)], meds[min(resamples - 1, int((1.0 - tail) * resamples))]


#: the fewest rounds a bootstrap interval is given for
MIN_ROUNDS = 5


def verdict(diffs: list[float], target: float = TARGET_OVERHEAD) -> str:
    """Whether the rounds' differences show the median overhead at or below ``target``."""
    if len(diffs) < MIN_ROUNDS:
        return f"not decided: {len(diffs)} rounds are too few for an interval (run at least {MIN_ROUNDS})"
    lo, hi = median_interval(diffs)
    span = f"90% interval of the median {lo:+.3f} to {hi:+.3f} s"
    if hi <= target:
        return f"met ({span})"
    if lo > target:
        return f"NOT met ({span})"
    return f"not decided by this run ({span}, around the target {target}; run more rounds)"


#: packages Keras imports during every `import tensorflow` when they are importable (issue "Startup":
#: none of them in the environments the README sets up)
HEAVY = ("sklearn", "matplotlib", "scipy", "cv2")


def heavy_importable(python: str, env: dict) -> str:
    """Which of :data:`HEAVY` the interpreter ``python`` can import (without importing them)."""
    code = ("import importlib.util; print(' '.join(m for m in %r if importlib.util.find_spec(m) is not None))"
            % (HEAVY,))
    res = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    found = res.stdout.strip() if res.returncode == 0 else f"(cannot tell: {res.stderr.strip()[-200:]})"
    return found or "none"


def med(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds (median of these; default 5)")
    p.add_argument("--tensorpack-python", default=None,
                   help="an interpreter where tensorpack imports (its own environment)")
    p.add_argument("--json", default=None, metavar="PATH",
                   help="also write every measurement of the run here (each child's marks and peak RSS)")
    p.add_argument("--from-json", nargs="+", default=None, metavar="PATH",
                   help="print the report from files written by --json (several: pooled), running nothing")
    p.add_argument("--workload", choices=WORKLOADS, default=None,
                   help="defaults (the default): the model fed by a FeedInput; queue: fed by a QueueInput (what "
                        "trainbus makes of TrainConfig(dataflow=...)), against bare loops fed by a FIFOQueue")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        workload = args.workload or "defaults"
        {"bare": lambda: child_bare(workload=workload), "bare-logging": lambda: child_bare(True, workload=workload),
         "bare-graph": lambda: child_bare(same_graph=True, workload=workload),
         "trainbus": lambda: child_framework("trainbus", workload),
         "trainbus-preloaded": lambda: child_framework("trainbus", workload, preload=True),
         "tensorpack": lambda: child_framework("tensorpack", workload),
         "star-trainbus": lambda: child_star("trainbus"),
         "star-tensorpack": lambda: child_star("tensorpack"), "import": child_import,
         "least": child_least}[args.child]()
        return

    if args.from_json:
        given = [flag for flag, value in (("--rounds", args.rounds), ("--tensorpack-python", args.tensorpack_python),
                                          ("--json", args.json), ("--workload", args.workload)) if value is not None]
        if given:
            p.error(f"--from-json reports runs already made and runs nothing: {', '.join(given)} does not apply")
        report(*pooled(args.from_json))
        return
    if args.rounds is None:
        args.rounds = 5
    if args.workload is None:
        args.workload = "defaults"
    env, note = child_env()
    # the children's log directories (they end with os._exit and cannot remove them): one folder
    # of this run's, removed at its end
    scratch = tempfile.mkdtemp(prefix="bench-startup-run-")
    env["TMPDIR"] = scratch
    try:
        measure(args, env, note)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measure(args, env: dict, note: str) -> None:
    env.pop(PRELOAD_ENV, None)  # named by this run's first trainbus child
    kinds = [("trainbus", sys.executable, "trainbus"), ("bare", sys.executable, "bare"),
             (LOGGING, sys.executable, "bare-logging"), (GRAPH, sys.executable, "bare-graph"),
             (PRELOADED, sys.executable, "trainbus-preloaded")]
    tp_note = ""
    if args.tensorpack_python:
        tp_note = importable(args.tensorpack_python, "tensorpack", env)
        if tp_note is None:
            kinds += [("tensorpack", args.tensorpack_python, "tensorpack"),
                      (TP_BARE, args.tensorpack_python, "bare"), (TP_LOGGING, args.tensorpack_python, "bare-logging"),
                      (TP_GRAPH, args.tensorpack_python, "bare-graph")]
    else:
        tp_note = "not measured: no --tensorpack-python given"

    runs: dict[str, list[tuple[float, dict, int]]] = {k: [] for k, _, _ in kinds}
    star: dict[str, list[list[str]]] = {"trainbus": [], "tensorpack": []}
    imports: list[list[str]] = []
    least: list[list[str]] = []
    plugins_cmd: list[float] = []
    for rnd in range(args.rounds + 1):  # round 0 warms caches and is not counted
        order = kinds[rnd % len(kinds):] + kinds[:rnd % len(kinds)]
        for name, python, child in order:
            start, res, rss = spawn(python, ["--child", child, "--workload", args.workload], env)
            if not isinstance(res, dict):
                raise SystemExit(f"the {name} child failed:\n{res[-3000:]}")
            if name == "trainbus" and PRELOAD_ENV not in env:
                # the first trainbus child (the warm-up round starts with it) names what the
                # "imported beforehand" children import before their clock starts
                env[PRELOAD_ENV] = ",".join(res["modules"])
            if rnd:
                runs[name].append((start, res, rss))
        for package, python in (("trainbus", sys.executable), ("tensorpack", args.tensorpack_python)):
            if package == "trainbus" or "tensorpack" in runs:
                _, res, _ = spawn(python, ["--child", f"star-{package}"], env)
                if rnd:
                    star[package].append(res["line"])
        _, res, _ = spawn(sys.executable, ["--child", "import"], env)
        if rnd:
            imports.append(res["line"])
        if args.workload == "defaults":  # for the target's floor, which is the defaults workload's
            _, res, _ = spawn(sys.executable, ["--child", "least"], env)
            if rnd:
                least.append(res["line"])
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "trainbus", "plugins"], capture_output=True, env=env, check=True)
        if rnd:
            plugins_cmd.append(time.perf_counter() - t)
        print(f"round {rnd}/{args.rounds} done" + (" (warm-up, not counted)" if not rnd else ""), file=sys.stderr)
    heavy = {"trainbus": heavy_importable(sys.executable, env)}
    if "tensorpack" in runs:
        heavy["tensorpack"] = heavy_importable(args.tensorpack_python, env)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"format": 1, "workload": args.workload, "rounds": args.rounds, "load": os.getloadavg(),
                       "cpus": os.cpu_count(),
                       "kinds": kinds,
                       "runs": {name: [{"spawned": start, "marks": res, "rss_kb": rss} for start, res, rss in rs]
                                for name, rs in runs.items()},
                       "star": star, "imports": imports, "plugins_cmd": plugins_cmd, "note": note,
                       "tp_note": tp_note, "heavy": heavy, "least": least}, f, indent=1)
    report(args.rounds, kinds, runs, star, imports, plugins_cmd, note, tp_note, heavy, workload=args.workload,
           least=least)


def pooled(paths: list[str]) -> tuple:
    """The arguments of :func:`report` from the files ``--json`` wrote, their rounds together
    (every file must have measured the same kinds)."""
    rounds, kinds, runs = 0, None, {}
    star: dict[str, list] = {"trainbus": [], "tensorpack": []}
    imports: list = []
    least: list = []
    plugins_cmd: list = []
    notes, tp_note, heavy, loads, cpus = [], None, {}, [], set()
    workload = None
    seen: dict[tuple, str] = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise SystemExit(f"--from-json: cannot read {path}: {e}") from None
        if not isinstance(data, dict) or data.get("format") != 1:
            raise SystemExit(f"--from-json: {path} was not written by this benchmark's --json")
        # a run is known by when its children were started: the same run twice would count its rounds twice
        stamp = tuple(r["spawned"] for rs in data["runs"].values() for r in rs)
        if stamp in seen:
            raise SystemExit(f"--from-json: {path} holds the same run as {seen[stamp]}; pooling it twice "
                             "would count its rounds twice. Pool each run once.")
        seen[stamp] = path
        these = [tuple(k) for k in data["kinds"]]
        if kinds is not None and [k[0] for k in these] != [k[0] for k in kinds]:
            raise SystemExit(f"--from-json: {path} measured other kinds ({', '.join(k[0] for k in these)}) "
                             f"than {paths[0]} ({', '.join(k[0] for k in kinds)}); pool runs of one command line")
        this_workload = data.get("workload", "defaults")  # files written before --workload measured the defaults
        if workload is not None and this_workload != workload:
            raise SystemExit(f"--from-json: {path} measured the {this_workload} workload, {paths[0]} the {workload} "
                             "workload; pool runs of one command line")
        workload = this_workload
        if kinds is None:  # the first file's kinds and its word on tensorpack stand for all
            kinds, tp_note = these, data["tp_note"]
        rounds += data["rounds"]
        for name, rs in data["runs"].items():
            runs.setdefault(name, []).extend((r["spawned"], r["marks"], r["rss_kb"]) for r in rs)
        for package, lines in data["star"].items():
            star[package].extend(lines)
        imports += data["imports"]
        least += data.get("least", [])  # runs written before it have none
        plugins_cmd += data["plugins_cmd"]
        notes.append(data["note"])
        heavy.update(data["heavy"])
        loads.append(data["load"])
        cpus.add(data.get("cpus"))
    note = "; ".join(sorted({n for n in notes if n}))
    pooled_from = f"pooled from {len(paths)} runs: {', '.join(paths)}"
    return rounds, kinds, runs, star, imports, plugins_cmd, f"{note}; {pooled_from}" if note else pooled_from, \
        tp_note, heavy, loads, "/".join(str(c) for c in sorted(cpus - {None})), workload, least


def floor(differences, pairs, least: list[list[str]]) -> None:
    """What the overhead target leaves a framework's own code: the bare loops that do the defaults
    workload's own work by hand, with no framework imported, over the bare loop of their interpreter.

    ``differences(a, b, c)`` gives the rounds' differences of kind ``a`` over kind ``b``; ``pairs``
    holds each framework's (name, bare, same logging, same graph) kinds. A framework's overhead
    over the bare loop is its own code's cost plus this floor, so the target minus the floor's
    interval is the room the target leaves; when the whole interval is at or above the target,
    there is none: a framework would have to do the defaults' work faster than the loop by hand.
    ``least`` holds the "least" children's lines (pluggy's import, and with the entry-point scan):
    the least any framework on pluggy and entry points imports, set against that room."""
    print(f"\nThe target's floor: the defaults' own work done by hand, no framework imported, over the bare loop "
          f"(round by round after import tensorflow); the target <= {TARGET_OVERHEAD} s leaves a framework's own "
          "code the target less the floor")
    most = None
    for fw, bare, *by_hand in pairs:
        if fw != "trainbus" and fw != "tensorpack":
            continue  # trainbus's other kind shares trainbus's bare loops
        for kind in by_hand:
            diffs = differences(kind, bare, 0)
            q = f"median {statistics.median(diffs):+.3f} s"
            if len(diffs) < MIN_ROUNDS:
                print(f"  {kind!r} over {bare!r}: {q}; {len(diffs)} rounds are too few for an interval "
                      f"(run at least {MIN_ROUNDS})")
                continue
            lo, hi = median_interval(diffs)
            room = ("none: the work by hand is at or above the target in the whole interval; a framework meets "
                    "the target only by doing it faster than by hand" if lo >= TARGET_OVERHEAD else
                    f"{TARGET_OVERHEAD - hi:+.3f} to {TARGET_OVERHEAD - lo:+.3f} s")
            print(f"  {kind!r} over {bare!r}: {q} (90% interval {lo:+.3f} to {hi:+.3f} s); "
                  f"room left by the target: {room}")
            if kind == GRAPH:  # what tensorpack's API asks of any trainer of it: the room a framework has
                most = TARGET_OVERHEAD - lo
    label = "  the least a framework on pluggy and entry points imports after TensorFlow"
    if not least:
        print(f"{label}: not measured in these runs (made before the benchmark measured it)")
        return
    alone, scan = med([float(x[0]) for x in least]), med([float(x[1]) for x in least])
    room = f"; the room over {GRAPH!r} is at most {most:+.3f} s" if most is not None else ""
    print(f"{label} (medians of {len(least)} fresh interpreters): pluggy {alone:.4f} s; pluggy, trainbus's "
          f"registry and one entry-point scan {scan:.4f} s{room}")


def report(rounds, kinds, runs, star, imports, plugins_cmd, note, tp_note, heavy, loads=None, cpus=None,
           workload="defaults", least=None) -> None:
    # every mark is (wall-clock time, CPU seconds of the process): c=0 wall, c=1 CPU
    def total(name: str, c: int) -> float:  # from process start (wall: from the spawn)
        return med([r["first"][0] - s if c == 0 else r["first"][1] for s, r, _ in runs[name]])

    def span(name: str, a: str, b: str, c: int) -> float:
        return med([r[b][c] - r[a][c] for _, r, _ in runs[name] if a in r and b in r])

    def after_tf(name: str, c: int) -> float:  # from the moment `import tensorflow` returned
        return span(name, "tf", "first", c)

    def rss(name: str) -> float:
        return med([kb / 1024 for _, _, kb in runs[name]])

    def by_round(fw: str, bare: str, c: int) -> list[tuple[float, float]]:
        """Each round's two times after import tensorflow (the kinds of a round run back to back,
        so the load a round met hits both)."""
        return [(rf["first"][c] - rf["tf"][c], rb["first"][c] - rb["tf"][c])
                for (_, rf, _), (_, rb, _) in zip(runs[fw], runs[bare])]

    def differences(fw: str, bare: str, c: int) -> list[float]:
        """Each round's difference after import tensorflow."""
        return sorted(a - b for a, b in by_round(fw, bare, c))

    def ratios(fw: str, bare: str) -> str:
        """The median of each round's ratio of the two times after import tensorflow, with its 90%
        bootstrap interval: how far the ratio itself moves from round to round."""
        rs = [a / b for a, b in by_round(fw, bare, 0)]
        if len(rs) < MIN_ROUNDS:
            return f"ratio: median {med(rs):.2f}x"
        lo, hi = median_interval(rs)
        return f"ratio: median {med(rs):.2f}x (90% interval {lo:.2f}x to {hi:.2f}x)"

    def paired(fw: str, bare: str, c: int) -> str:
        """The median, and the quartiles, of each round's difference: steadier than a
        difference of medians."""
        return spread(differences(fw, bare, c))

    def spread(diffs: list[float]) -> str:
        """The median of ``diffs`` and, from two of them on, their quartiles."""
        if len(diffs) < 2:
            return f"{med(diffs):+.3f}"
        q1, _, q3 = statistics.quantiles(diffs, n=4)
        return f"{med(diffs):+.3f} (quartiles {q1:+.3f} to {q3:+.3f})"

    # each framework against the three bare loops of its own interpreter: the plain one (cost and
    # train_op only), the one with the same logging (moving average, summaries, event file) and the
    # one with the same graph (also global_step, tensorpack's session configuration)
    pairs = [("trainbus", "bare", LOGGING, GRAPH)] + ([("tensorpack", TP_BARE, TP_LOGGING, TP_GRAPH)]
                                                     if "tensorpack" in runs else [])
    if PRELOADED in runs:  # runs written before it have no such kind
        pairs.insert(1, (PRELOADED, "bare", LOGGING, GRAPH))
    loads = loads or [os.getloadavg()]
    load = ", ".join(f"{la[0]:.2f} {la[1]:.2f} {la[2]:.2f}" for la in loads)
    print(f"\nStartup on the {WORKLOADS[workload]}: median of "
          f"{rounds} interleaved rounds of fresh interpreters; load average {load} on {cpus or os.cpu_count()} "
          "CPUs. Wall seconds, and the process's CPU seconds (all threads) in brackets: the CPU figure moves "
          "less with the machine's load")
    queue = workload == "queue"
    print('"bare": the graph by hand (cost, train_op), a Session, one step'
          + (" reading its batch from a FIFOQueue that a thread started after the initialization fills"
             if queue else "")
          + '; "bare, same logging": that plus the moving average of the cost updated with the step, its scalar '
          + ("summary, the same of the queue's size, " if queue else "summary, ")
          + "merge_all and an event file (FileWriter) created before the first step; \"bare, same graph\": that "
          "plus the global_step the step increments and tensorpack's default session configuration (what "
          "tensorpack's API asks of a trainer)")
    if note:
        print(note)
    w = max(len(k) for k, _, _ in kinds) + 2
    print(f"\n{'':<{w}}{'to the first step':>22}{'after import tensorflow':>26}{'peak RSS':>10}")
    for name, _, _ in kinds:
        print(f"{name:<{w}}{f'{total(name, 0):.3f} s [{total(name, 1):.3f}]':>22}"
              f"{f'{after_tf(name, 0):.3f} s [{after_tf(name, 1):.3f}]':>26}{f'{rss(name):.0f} MB':>10}")
    print()
    for fw, *bares in pairs:
        target_note = f" (target <= {TARGET_OVERHEAD})" if workload == "defaults" and fw == "trainbus" else ""
        for bare in bares:
            print(f"{fw} over {bare!r}: to the first step {total(fw, 0) - total(bare, 0):+.3f} s "
                  f"[CPU {total(fw, 1) - total(bare, 1):+.3f} s]; after import tensorflow "
                  f"{after_tf(fw, 0) - after_tf(bare, 0):+.3f} s "
                  f"[CPU {after_tf(fw, 1) - after_tf(bare, 1):+.3f} s]"
                  f"{' (its own machinery)' if bare in (GRAPH, TP_GRAPH) else target_note}; "
                  f"peak RSS {rss(fw) - rss(bare):+.0f} MB; {after_tf(fw, 0) / after_tf(bare, 0):.2f}x its time "
                  "after import tensorflow")
            print(f"    the rounds' differences after import tensorflow: median {paired(fw, bare, 0)} s, "
                  f"CPU {paired(fw, bare, 1)} s; the rounds' own {ratios(fw, bare)}")
            if fw == "trainbus" and bare != GRAPH and workload == "defaults":
                print(f"    target <= {TARGET_OVERHEAD} s: {verdict(differences(fw, bare, 0))}")
    if "tensorpack" in runs:
        # each framework's overhead over the bare loop of its own interpreter, in the same round
        rel = sorted((a - b) - (p - q) for (a, b), (p, q) in zip(by_round("trainbus", "bare", 0),
                                                                  by_round("tensorpack", TP_BARE, 0)))
        print(f"trainbus's overhead over 'bare' against tensorpack's over {TP_BARE!r}, round by round after import "
              f"tensorflow: median {spread(rel)} s; trainbus's the smaller in {sum(d < 0 for d in rel)} of "
              f"{len(rel)} rounds")
        if workload == "defaults":
            print(f"    proposed target, trainbus's overhead <= tensorpack's: {verdict(rel, target=0.0)}")
    if PRELOADED in runs:
        named = max((len(r.get("modules", ())) for _, r, _ in runs["trainbus"]), default=0)
        after = max((len(r.get("modules", ())) for _, r, _ in runs[PRELOADED]), default=0)
        print(f"trainbus's import: trainbus over {PRELOADED!r}, the rounds' differences after import tensorflow: "
              f"median {paired('trainbus', PRELOADED, 0)} s, CPU {paired('trainbus', PRELOADED, 1)} s "
              f"({named} modules of trainbus's distributions and pluggy, imported before the clock started; "
              f"{'none' if not after else after} of them imported after it)")
    if workload == "defaults":
        floor(differences, pairs, least or [])
    else:
        print(f"(the target <= {TARGET_OVERHEAD} s is on the defaults workload: --workload defaults)")
    if "tensorpack" not in runs:
        print(f"tensorpack: {tp_note}")
    phase_kinds = (["trainbus"] + ([PRELOADED] if PRELOADED in runs else []) + ["bare", LOGGING, GRAPH]
                   + (["tensorpack"] if "tensorpack" in runs else []))

    def width(k: str) -> int:
        return max(20, len(k) + 2)

    print(f"\n{'Phases, median s [CPU s]':<30}" + "".join(f"{k:>{width(k)}}" for k in phase_kinds))
    # (label, the framework's marks, the bare loop's, the bare loop with logging's)
    rows = [("import the framework", ("tf", "import"), ("tf", "import"), ("tf", "import")),
            ("TrainConfig + graph", ("import", "setup0"), ("import", "graph"), ("import", "graph")),
            ("callbacks setup / FileWriter", ("setup0", "setup1"), None, ("graph", "writer")),
            ("session + initialization", ("setup1", "session"), ("graph", "session"), ("writer", "session")),
            ("first step", ("session", "first"), ("session", "first"), ("session", "first"))]
    for label, fw_span, bare_span, logging_span in rows:
        def cell(name: str, sp: tuple[str, str] | None) -> str:
            return "-" if sp is None else f"{span(name, *sp, 0):.3f} [{span(name, *sp, 1):.3f}]"

        spans = {"trainbus": fw_span, PRELOADED: fw_span, "bare": bare_span, LOGGING: logging_span,
                 GRAPH: logging_span, "tensorpack": fw_span}
        print(f"  {label:<28}" + "".join(f"{cell(k, spans[k]):>{width(k)}}" for k in phase_kinds))

    def timed(lines: list[list[str]]) -> str:
        return f"{med([float(x[0]) for x in lines]):.3f} s [CPU {med([float(x[1]) for x in lines]):.3f} s]"

    print(f"\nfrom trainbus import * after TensorFlow: {timed(star['trainbus'])} (target <= 0.15)"
          + (f"; from tensorpack import *: {timed(star['tensorpack'])}" if star["tensorpack"] else ""))
    tf_imported = any(x[2] == "True" for x in imports)
    print(f"import trainbus: {timed(imports)} (target <= 0.05), TensorFlow "
          f"{'IMPORTED' if tf_imported else 'not imported'}")
    print(f"trainbus plugins: {med(plugins_cmd):.3f} s wall, interpreter start-up included (target < 0.5)")
    print(f"importable of what Keras imports during `import tensorflow` ({', '.join(HEAVY)}): "
          + "; ".join(f"{k}'s environment: {v}" for k, v in heavy.items()) + " (target: none in trainbus's)")

if __name__ == "__main__":
    main()
