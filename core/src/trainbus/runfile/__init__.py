"""Training runs described by a TOML file (``trainbus train RUN.toml``).

A run file names every component; callbacks, monitors, the trainer and the session
initializer by their registered names (``trainbus plugins`` lists them)::

    [model]                          # a ModelDesc: "module:Class" and its arguments
    class = "mymodels:Net"
    args = { lr = 0.1 }

    [data]                           # "module:function" returning a DataFlow or an InputSource
    function = "mydata:train_data"
    args = { batch = 32 }

    [trainer]                        # default: SimpleTrainer
    name = "SimpleTrainer"

    [[callbacks]]
    name = "ModelSaver"
    args = { max_to_keep = 2 }

    [[callbacks]]                    # an argument may itself be a component:
    name = "PeriodicTrigger"         #   { callback = "Name", args = {...} }, { monitor = ... },
    args = { triggerable = { callback = "ModelSaver" }, every_k_steps = 5 }
                                     #   { session_init = ... }, { object = "module:attr", args = {...} }
    [[callbacks]]                    # state_key: the key its saved state goes under
    name = "MinSaver"                #   (default: the class and what identifies the instance)
    state_key = "best-cost"
    args = { monitor_stat = "cost" }

    [[monitors]]                     # no [[monitors]] at all = DEFAULT_MONITORS()
    name = "ScalarPrinter"

    [session_init]                   # optional
    name = "SmartInit"
    args = { session_init = "train_log/old/checkpoint" }

    [train]
    steps_per_epoch = 100            # default: the size of the data
    max_epoch = 10
    starting_epoch = 1
    logdir = "train_log/net"         # optional; relative to the current directory
    logdir_action = "k"              # k(eep) d(elete) b(ackup) n(ew) q(uit), if logdir is not empty
    resume = true                    # continue from the newest checkpoint in logdir (the default)
    default_callbacks = true         # append DEFAULT_CALLBACKS() (tensorpack's extra_callbacks)
    seed = 42                        # optional: seed every RNG, TF op determinism (trainbus.utils.seed)

``module`` paths are imported with the run file's directory and the current directory on
``sys.path``. Every mistake (unknown names, arguments that do not fit a signature or the
types it is annotated with, missing plugins, bad loop options, what the constructors reject,
two stateful callbacks with one state key) is collected and reported at once, each with its
line, before anything starts (:class:`RunConfigError`); ``logdir_action`` is carried out only
when training starts, so a run with mistakes leaves the file system as it was. Running a file again continues the run
from the newest checkpoint of its log directory (``AutoResumeTrainConfig``); a run that already
reached ``max_epoch`` trains nothing and says so. ``trainbus train RUN.toml --set PATH=VALUE``
changes one value without editing the file (:mod:`trainbus.runfile.overrides`).

The modules: :mod:`trainbus.runfile.scan` (reading the file, the line of every key, the
problems), :mod:`trainbus.runfile.check` (the one-pass check that resolves every entry) and
:mod:`trainbus.runfile.plan` (the checked plan: dry run, building, training).
"""

from __future__ import annotations

from trainbus.runfile.check import Component
from trainbus.runfile.plan import FinishedRun, RunPlan, load_run_file, train_from_file
from trainbus.runfile.scan import Problem, RunConfigError, scan_key_lines

__all__ = ["RunConfigError", "Problem", "Component", "RunPlan", "FinishedRun", "load_run_file", "train_from_file", "scan_key_lines"]
