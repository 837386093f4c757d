"""The ``trainbus`` command (also ``python -m trainbus``).

Subcommands:
  plugins            every installed plugin distribution, its version, bundle, plugin API and names
                     (``--load`` also imports each entry point to report load errors)
  order SPEC         the effective callback order per hook of a configured run; SPEC is
                     ``module:attr`` naming a TrainConfig, a list of callbacks, or a
                     function returning either
  train RUN.toml     train the run a TOML file describes (``--dry-run``: print the resolved
                     plan, train nothing; ``--set PATH=VALUE``: change one value); see
                     ``trainbus.runfile``. A run that already reached max_epoch trains
                     nothing and says how to go on (status 0)
  show LOGDIR...     the per-epoch scalars, best values and checkpoints of log directories, several
                     side by side (``--plot FILE.png``: their curves); imports no TensorFlow
  port SRC [DST]     port a tensorpack project written for TF 1.x to trainbus on TF 2.21: the
                     imports, TensorFlow's own upgrade rules or the tf.compat.v1 route per file,
                     tf.contrib's maintained homes, Keras 2 where needed; ``--in-place`` (after a
                     backup), ``--diff`` (write nothing); writes PORT_REPORT.md; exit 1 when
                     something needs the user
  new-plugin NAME    create a plugin distribution ``trainbus-NAME`` (pyproject with entry
                     points, a callback, a monitor, tests, README) to start from
  --version          the versions of trainbus, of each plugin distribution and of TensorFlow

Only what a task needs is imported: listing plugins, ``--version``, ``show`` and ``new-plugin`` never
import TensorFlow, ``plugins`` imports plugin modules only with ``--load``/``--strict``.

A mistake on the command line (a bad SPEC, a missing run file, a plugin that does not load
under ``--strict``) is reported in one or two lines on stderr with exit status 2; set
``TRAINBUS_DEBUG=1`` to see the traceback as well. An unknown subcommand or option is one line
naming the valid ones (status 2). SIGINT/SIGTERM/SIGHUP during ``train`` (also while the run file
is checked) end with one line and status 128+signal.

TensorFlow's C++ log lines are hidden (``TF_CPP_MIN_LOG_LEVEL=3``, and the notices written while it is imported) unless the environment sets
``TF_CPP_MIN_LOG_LEVEL`` itself; docs/cli.md lists every command, option and exit status.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import importlib.util
import os
import pathlib
import shlex
import sys
import traceback
from typing import Any, NoReturn, Sequence

from trainbus.bus import registry as _registry
from trainbus.bus.report import plugin_report
from trainbus.exceptions import PluginLoadError

#: distributions that provide the ``tensorflow`` module, in the order ``--version`` looks for them
TF_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-macos", "tensorflow-intel",
                    "tf-nightly", "tf-nightly-cpu")


class CLIError(Exception):
    """A mistake in what the command was asked to do: reported in one or two lines, exit status 2."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def _debug() -> bool:
    return os.environ.get("TRAINBUS_DEBUG", "").strip() not in ("", "0", "false", "no")


def cmd_plugins(args: argparse.Namespace) -> int:
    load = (args.load or args.strict) and not args.no_load
    report = plugin_report(try_load=load, check_modules=not args.no_load)
    if not report:
        print("no trainbus plugin distributions are installed; the standard bundle: "
              f"{_registry.install_hint('trainbus[standard]')}")
        return 0
    for rec in report:
        api = f"plugin API {rec['api']}" if rec["api"] else "plugin API not declared"
        print(f"{rec['name']} {rec['version']}  [bundle: {rec['bundle']}]  [{api}]")
        for n in rec["names"]:
            print(f"    {n}")
        for p in rec["plugins"]:
            print(f"    plugin {p}")
        for e in rec["errors"]:
            print(f"    ERROR {e}")
    broken = [r["name"] for r in report if r["errors"]]
    if broken and args.strict:
        sys.stdout.flush()
        raise CLIError(f"{len(broken)} plugin distribution(s) do not load cleanly: {', '.join(broken)}",
                       "see the ERROR lines above; reinstall, upgrade or uninstall them")
    return 0


def _distribution_versions() -> list[tuple[str, str, str | None]]:
    """(name, version, declared plugin API) of each installed plugin distribution, from metadata."""
    seen: dict[str, tuple[str, str, str | None]] = {}
    for group in (*_registry.NAME_GROUPS, _registry.PLUGIN_GROUP):
        for eps in _registry.index(group).values():
            for ep in eps:
                label = _registry.dist_name_version(ep)
                if label is None:
                    continue
                dname, version = label
                if dname not in seen:
                    try:
                        api = _registry.declared_api(ep)
                    except PluginLoadError:
                        seen[dname] = (dname, version, "unreadable: see `trainbus plugins`")
                    else:
                        seen[dname] = (dname, version, api.text if api is not None else None)
    return sorted(seen.values())


def version_text() -> str:
    """trainbus, its plugin API, each plugin distribution and TensorFlow, read from metadata
    (TensorFlow is not imported)."""
    from importlib_metadata import PackageNotFoundError, version

    from trainbus import __version__
    from trainbus.bus.registry import PLUGIN_API_VERSION

    lines = [f"trainbus {__version__} (plugin API {PLUGIN_API_VERSION})"]
    for name, ver, api in _distribution_versions():
        lines.append(f"  {name} {ver} (plugin API {api or 'not declared'})")
    tf = None
    for dname in TF_DISTRIBUTIONS:
        try:
            tf = f"{dname} {version(dname)}"
            break
        except PackageNotFoundError:
            continue
    lines.append(f"TensorFlow: {tf or 'not installed'}")
    return "\n".join(lines)


class _VersionAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *a: Any, **kw: Any) -> None:
        print(version_text())
        sys.stdout.flush()
        parser.exit(0)


def _load_spec(spec: str) -> Any:
    mod, sep, attr = spec.partition(":")
    if not sep or not mod or not attr:
        raise CLIError(f"SPEC must look like module:attr (e.g. mytrain:config), got {spec!r}")
    here = os.getcwd()
    sys.path.insert(0, here)
    try:
        try:
            obj: Any = importlib.import_module(mod)
        except ModuleNotFoundError as e:
            if e.name and (mod == e.name or mod.startswith(e.name + ".")):
                raise CLIError(f"{spec}: no module named {e.name!r} (looked in the current directory and sys.path)",
                               "run from the directory that holds the module, or set PYTHONPATH") from e
            raise CLIError(f"{spec}: importing {mod!r} failed: {type(e).__name__}: {e}") from e
        except Exception as e:  # noqa: BLE001 - the user's module failed while importing
            raise CLIError(f"{spec}: importing {mod!r} failed: {type(e).__name__}: {e}",
                           "set TRAINBUS_DEBUG=1 to see the traceback") from e
        where = mod
        for part in attr.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError as e:
                raise CLIError(f"{spec}: {where} has no attribute {part!r}") from e
            where = f"{where}.{part}"
        if callable(obj) and not isinstance(obj, type):
            try:
                obj = obj()
            except Exception as e:  # noqa: BLE001 - the user's function failed
                raise CLIError(f"{spec}: calling {where}() failed: {type(e).__name__}: {e}",
                               "set TRAINBUS_DEBUG=1 to see the traceback") from e
    finally:
        sys.path.remove(here)
    return obj


def cmd_order(args: argparse.Namespace) -> int:
    obj = _load_spec(args.spec)
    if hasattr(obj, "callbacks") and hasattr(obj, "monitors"):
        callbacks = list(obj.callbacks) + list(getattr(obj, "extra_callbacks", []) or [])
        monitors = list(obj.monitors)
    elif isinstance(obj, (list, tuple)):
        callbacks, monitors = list(obj), []
    else:
        shown = repr(obj)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        raise CLIError(f"{args.spec} is a {type(obj).__name__} ({shown}); expected a TrainConfig, a list of "
                       "callbacks, or a function returning one")
    from trainbus.bus.order import describe_order

    print(describe_order(callbacks, monitors))
    return 0


def _readable_file(path: str) -> None:
    p = pathlib.Path(path)
    if not p.exists():
        raise CLIError(f"the run file {path} does not exist", f"working directory: {os.getcwd()}")
    if not p.is_file():
        raise CLIError(f"the run file {path} is not a file")
    try:
        p.read_bytes().decode("utf-8")
    except OSError as e:
        raise CLIError(f"cannot read the run file {path}: {e.strerror or e}") from e
    except UnicodeDecodeError as e:
        raise CLIError(f"cannot read the run file {path}: it is not UTF-8 text ({e.reason} at byte {e.start})") from e


def cmd_train(args: argparse.Namespace) -> int:
    _readable_file(args.config)
    from trainbus.runfile import RunConfigError, train_from_file
    from trainbus.checkpoint import RunDirBusyError
    from trainbus.train._signals import TrainingInterrupted, interrupts_before_training

    try:
        # SIGINT/SIGTERM/SIGHUP while the file is checked (its modules imported, its components
        # built) end like those during the graph's construction: one line, status 128+signal,
        # nothing done to the log directory; training installs its own handling inside.
        with interrupts_before_training() as setup:
            setup.during = f"checking the run file {args.config}"
            result = train_from_file(args.config, dry_run=args.dry_run, overrides=args.set or ())
    except RunConfigError as e:
        # every problem of the file, one per line, with its line number
        print(f"trainbus train: {e}", file=sys.stderr)
        return 2
    except TrainingInterrupted as e:
        # SIGINT/SIGTERM/SIGHUP: the final checkpoint is written; one line, status 128+signal
        e.report()
        return e.exit_code
    except RunDirBusyError as e:
        # another training holds the log directory: nothing was read or changed there
        e.report()
        return e.exit_code
    if args.dry_run:
        print(result)
    elif hasattr(result, "last_epoch") and hasattr(result, "message"):  # a run that already finished
        print(f"trainbus train: {result.message()}")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from trainbus.show import PLOT_INSTALL_HINT, ShowError, format_runs, load_run, plot_runs

    try:
        runs = [load_run(d) for d in args.logdirs]
        if args.tail is not None and args.tail < 1:
            raise CLIError(f"--tail must be a positive number of epochs, got {args.tail}")
        print(format_runs(runs, tail=args.tail))
        if args.plot:
            try:
                plot_runs(runs, args.plot)
            except ModuleNotFoundError as e:
                if e.name != "matplotlib":
                    raise
                raise CLIError(f"--plot needs matplotlib, which is not installed here: {PLOT_INSTALL_HINT}") from None
            except OSError as e:
                raise CLIError(f"cannot write the plot {args.plot}: {e.strerror or e}") from None
            print(f"curves of {len(runs)} run(s) written to {args.plot}")
    except ShowError as e:
        raise CLIError(str(e)) from None
    return 0


def cmd_port(args: argparse.Namespace) -> int:
    from trainbus.port import REPORT_NAME, PortArgumentError, port_tree

    # porting imports TensorFlow (its upgrader): keep its start-up log lines off the report
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

    try:
        report = port_tree(args.src, args.dst, in_place=args.in_place, diff=args.diff)
    except PortArgumentError as e:
        raise CLIError(str(e)) from e
    if args.diff:
        # the diff alone on stdout (it can be piped to `patch -p1`), the report on stderr
        sys.stdout.write(report.diff)
        sys.stdout.flush()
        print(report.to_markdown(), file=sys.stderr)
    else:
        print(report.to_markdown())
        where = report.dst if report.mode == "copy" else report.src
        base = where if os.path.isdir(where) else os.path.dirname(where) or "."
        print(f"report written to {os.path.join(base, REPORT_NAME)}")
    return report.exit_code


def cmd_new_plugin(args: argparse.Namespace) -> int:
    from trainbus._scaffold import names_for, scaffold_plugin

    try:
        root = scaffold_plugin(args.name, args.dir)
    except (ValueError, FileExistsError) as e:
        raise CLIError(str(e)) from e
    n = names_for(args.name)
    print(f"wrote the plugin distribution {n['dist']} in {root}")
    print(f"  callback  trainbus.callbacks.{n['callback']}")
    print(f"  monitor   trainbus.callbacks.{n['monitor']}")
    # with its `test` extra (pytest, the trainer of its training test), then its tests from its
    # own directory (its pyproject holds their pytest configuration)
    where = shlex.quote(str(root))
    print(f"next: pip install -e {shlex.quote(f'{root}[test]')} && (cd {where} && pytest)")
    return 0


class _Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes are ONE line on stderr naming what is valid there (the
    subcommands and options of ``trainbus``, the arguments and options of a subcommand), with
    exit status 2; no usage block, no traceback."""

    def valid(self) -> list[str]:
        """What may be given to this (sub)command: subcommands, positionals, then options."""
        out: list[str] = []
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                out += list(action.choices)
            elif not action.option_strings:
                out.append(action.metavar or action.dest)
        for action in self._actions:
            if action.option_strings and action.help is not argparse.SUPPRESS:
                out.append("/".join(action.option_strings))
        return out

    def subcommands(self) -> dict[str, argparse.ArgumentParser]:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return dict(action.choices)
        return {}

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        import difflib
        import re

        wrong = re.match(r"argument COMMAND: invalid choice: '(.*?)'", message)
        if wrong and self.subcommands():
            close = difflib.get_close_matches(wrong.group(1), list(self.subcommands()), n=1, cutoff=0.6)
            message = f"unknown command {wrong.group(1)!r}" + (f"; did you mean {close[0]}?" if close else "")
        elif message.startswith("unrecognized arguments: "):
            words = message[len("unrecognized arguments: "):]
            message = f"unknown argument{'s' if ' ' in words else ''} {words}"
        self.exit(2, f"{self.prog}: {message} (valid: {', '.join(self.valid())})\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="trainbus", description="trainbus command line")
    p.add_argument("--version", action=_VersionAction,
                   help="print the versions of trainbus, of each plugin distribution and of TensorFlow, and exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sp = sub.add_parser("plugins", help="list installed plugin distributions")
    sp.add_argument("--load", action="store_true",
                    help="also import every entry point and report what fails to load (imports the plugin modules)")
    sp.add_argument("--no-load", action="store_true",
                    help="read metadata only: do not import plugins nor look for their modules")
    sp.add_argument("--strict", action="store_true",
                    help="imply --load; exit with status 2 if a plugin fails to load, declares an unsupported "
                         "plugin API or clashes with another distribution")
    sp.set_defaults(func=cmd_plugins)
    so = sub.add_parser("order", help="print the callback order per hook of a configured run")
    so.add_argument("spec", metavar="SPEC",
                    help="module:attr naming a TrainConfig, a list of callbacks, or a function returning one")
    so.set_defaults(func=cmd_order)
    st = sub.add_parser("train", help="train the run described by a TOML file",
                        description="Train the run a TOML file describes (model, data, trainer, callbacks and "
                                    "monitors by registered name, loop options). Every mistake in the file is "
                                    "reported at once, with its line, before anything starts.")
    st.add_argument("config", metavar="RUN.toml", help="the run file (TOML)")
    st.add_argument("--dry-run", action="store_true",
                    help="print the resolved plan (components, providing distributions, callback order per hook) "
                         "and train nothing")
    st.add_argument("--set", metavar="PATH=VALUE", action="append", default=None,
                    help="change one value of the run file (repeatable): PATH as the file's problems print it "
                         "(train.max_epoch, callbacks[0].args.max_to_keep), VALUE a TOML value (10, 0.1, true, "
                         "\"text\"); checked with the file")
    st.set_defaults(func=cmd_train)
    sw = sub.add_parser("show", help="the scalars, best values and checkpoints of training log directories",
                        description="Show what training runs left in their log directories: a per-epoch table of "
                                    "the scalars of stats.json, the best values, the checkpoints present (each "
                                    "checked readable), several runs side by side. Imports no TensorFlow.")
    sw.add_argument("logdirs", metavar="LOGDIR", nargs="+", help="a log directory of a training (its logdir)")
    sw.add_argument("--plot", metavar="FILE.png", default=None,
                    help="also draw the curves (one panel per scalar, the runs overlaid) into this PNG; needs "
                         "matplotlib (pip install \"trainbus[plot]\")")
    sw.add_argument("--tail", metavar="N", type=int, default=None, help="show only the last N epochs in the tables")
    sw.set_defaults(func=cmd_show)
    spo = sub.add_parser("port", help="port a tensorpack / TF 1.x project to trainbus on TF 2.21",
                         description="Port a tensorpack project written for TensorFlow 1.x: tensorpack imports become "
                                     "trainbus imports, each file gets the edits TensorFlow 2.21 needs, tf.contrib "
                                     "pieces go to their maintained homes; only the changed characters are rewritten. "
                                     "Exit status 0: ported; 1: something needs you (listed); 2: bad arguments.")
    spo.add_argument("src", metavar="SRC", help="a .py file or a directory (every .py under it is ported)")
    spo.add_argument("dst", metavar="DST", nargs="?", default=None,
                     help="where to write the ported tree (a new or empty directory; for a file, the new file)")
    spo.add_argument("--in-place", action="store_true",
                     help="port SRC where it is, after copying it to SRC.port-backup")
    spo.add_argument("--diff", action="store_true", help="print the unified diff (report on stderr) and write nothing")
    spo.set_defaults(func=cmd_port)
    sn = sub.add_parser("new-plugin", help="create a plugin distribution to start from")
    sn.add_argument("name", metavar="NAME",
                    help="the plugin's name, e.g. grad-stats (the distribution becomes trainbus-grad-stats)")
    sn.add_argument("--dir", default=None, help="where to write it (default ./trainbus-NAME); must be empty or new")
    sn.set_defaults(func=cmd_new_plugin)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; returns the exit status (2 for a mistake, reported on stderr)."""
    try:
        status = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except BrokenPipeError:
        # the reader of the output went away (``trainbus plugins | head``): no traceback
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def quiet_tensorflow_logs() -> bool:
    """Hide TensorFlow's C++ log lines (absl, oneDNN, cuInit, rendezvous notices: what TensorFlow
    also reports as Python exceptions, or does not matter) unless the user chose a level in
    ``TF_CPP_MIN_LOG_LEVEL``; done before TensorFlow is imported. True when quieted."""
    if "TF_CPP_MIN_LOG_LEVEL" in os.environ:
        return False
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    return True


#: C++ lines TensorFlow writes to stderr while it is imported, before its log level applies
_IMPORT_NOISE = ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",)
#: an INFO or WARNING line of TensorFlow's C++ logging: "I0000 00:00:1795607075.283622   14964 file.cc:31] ..."
_GLOG_LINE = r"^[IW]\d{4} [\d:.]+\s+\d+ \S+\.(cc|h):\d+\] "


def _import_tensorflow_quietly() -> None:
    """Import TensorFlow with its import-time C++ notices (written to file descriptor 2 before
    ``TF_CPP_MIN_LOG_LEVEL`` is read) filtered out; any other line it writes is passed on."""
    import re
    import tempfile

    if "tensorflow" in sys.modules:
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        return
    with tempfile.TemporaryFile() as tmp:
        try:
            os.dup2(tmp.fileno(), 2)
            try:
                import tensorflow  # noqa: F401
            except Exception:  # noqa: BLE001 - reported again (with its message) where it is used
                pass
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        text = tmp.read().decode("utf-8", "replace")
    kept = [ln for ln in text.splitlines() if ln.strip() and ln not in _IMPORT_NOISE and not re.match(_GLOG_LINE, ln)]
    if kept:
        print("\n".join(kept), file=sys.stderr)


def _main(argv: Sequence[str] | None) -> int:
    quiet = quiet_tensorflow_logs()
    parser = build_parser()
    # argparse's errors (status 2) are one line naming what is valid, see _Parser
    args, extra = parser.parse_known_args(argv)
    if args.command is None:
        parser.error(f"unrecognized arguments: {' '.join(extra)}" if extra else "a command is required")
    if extra:  # reported by the subcommand, which names its own arguments and options
        parser.subcommands()[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    if quiet and args.command in ("train", "order"):
        _import_tensorflow_quietly()
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:
        raise
    except CLIError as e:
        if _debug():
            traceback.print_exc()
        print(f"trainbus {args.command}: {e}", file=sys.stderr)
        if e.hint:
            print(f"  {e.hint}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - the command line shows no traceback unless asked
        if _debug() or (args.command == "train" and not args.dry_run):
            raise  # a crash while training keeps its traceback: it is not a command-line mistake
        print(f"trainbus {args.command}: {type(e).__name__}: {e}", file=sys.stderr)
        print("  set TRAINBUS_DEBUG=1 to see the traceback", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
