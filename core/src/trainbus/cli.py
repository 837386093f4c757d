"""The ``trainbus`` command (also ``python -m trainbus``).

Subcommands:
  plugins            every installed plugin distribution, its version, bundle, plugin API and names
  order SPEC         the effective callback order per hook of a configured run; SPEC is
                     ``module:attr`` naming a TrainConfig, a list of callbacks, or a
                     function returning either
  train RUN.toml     train the run a TOML file describes (``--dry-run``: print the resolved
                     plan, train nothing); see ``trainbus.config_file``
  new-plugin NAME    create a plugin distribution ``trainbus-NAME`` (pyproject with entry
                     points, a callback, a monitor, tests, README) to start from
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import Any, Sequence

from trainbus.bus import registry as _registry
from trainbus.bus.catalogue import BUNDLES
from trainbus.bus.order import describe_order


def _bundle_of(dist: str) -> str:
    for bundle, members in BUNDLES.items():
        if dist in members:
            return bundle
    return "-"


def _api_problem(dname: str, spec: str | None) -> str | None:
    """The message for a distribution whose declared plugin API this core does not implement."""
    if spec is None:
        return None
    try:
        _registry._check_api(dname, spec)
    except Exception as e:  # noqa: BLE001 - PluginAPIVersionError or an unreadable spec
        return f"{type(e).__name__}: {e}"
    return None


def plugin_report(try_load: bool = True) -> list[dict[str, Any]]:
    """One entry per installed plugin distribution: name, version, bundle, declared plugin API
    (``api``), names, ambient plugins and errors (load failures, API mismatches, clashes)."""
    dists: dict[str, dict[str, Any]] = {}
    for group in (*_registry.NAME_GROUPS, _registry.PLUGIN_GROUP):
        for name, eps in sorted(_registry.index(group).items()):
            for ep in eps:
                dist = ep.dist
                dname = dist.metadata["Name"] if dist is not None else "<unknown>"
                rec = dists.get(dname)
                if rec is None:
                    spec = _registry.declared_api(ep)
                    rec = dists[dname] = {"name": dname, "version": dist.version if dist else "?",
                                          "bundle": _bundle_of(dname), "api": spec, "names": [], "plugins": [],
                                          "errors": []}
                    api_error = _api_problem(dname, spec)
                    rec["api_ok"] = api_error is None
                    if api_error:
                        rec["errors"].append(api_error)
                if group == _registry.PLUGIN_GROUP:
                    rec["plugins"].append(name)
                else:
                    rec["names"].append(f"{group}.{name}")
                if try_load and rec["api_ok"]:
                    try:
                        _registry.load(ep, f"{group}.{name}")
                    except Exception as e:  # noqa: BLE001 - reported, not raised
                        rec["errors"].append(f"{group}.{name}: {e}")
    for dname, rec in dists.items():
        providers = [n.rsplit(".", 1)[1] for n in rec["names"]]
        for other in dists.values():
            if other is not rec:
                clash = set(providers) & {n.rsplit(".", 1)[1] for n in other["names"]}
                for c in sorted(clash):
                    rec["errors"].append(f"{c} is also provided by {other['name']} {other['version']}")
    return sorted(dists.values(), key=lambda r: r["name"])


def cmd_plugins(args: argparse.Namespace) -> int:
    report = plugin_report(try_load=not args.no_load)
    if not report:
        print("no trainbus plugin distributions are installed (pip install 'trainbus[standard]')")
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
    return 1 if any(r["errors"] for r in report) and args.strict else 0


def _load_spec(spec: str) -> Any:
    if ":" not in spec:
        raise SystemExit(f"trainbus: SPEC must look like module:attr, got {spec!r}")
    mod, attr = spec.split(":", 1)
    sys.path.insert(0, ".")
    obj: Any = importlib.import_module(mod)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if callable(obj) and not isinstance(obj, type):
        obj = obj()
    return obj


def cmd_order(args: argparse.Namespace) -> int:
    obj = _load_spec(args.spec)
    if hasattr(obj, "callbacks") and hasattr(obj, "monitors"):
        callbacks = list(obj.callbacks) + list(getattr(obj, "extra_callbacks", []) or [])
        monitors = list(obj.monitors)
    elif isinstance(obj, (list, tuple)):
        callbacks, monitors = list(obj), []
    else:
        raise SystemExit(f"trainbus order: {args.spec} is {obj!r}; expected a TrainConfig or a list of callbacks")
    print(describe_order(callbacks, monitors))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from trainbus.config_file import RunConfigError, train_from_file
    from trainbus.train._signals import TrainingInterrupted

    try:
        result = train_from_file(args.config, dry_run=args.dry_run)
    except RunConfigError as e:
        print(f"trainbus train: {e}", file=sys.stderr)
        return 2
    except TrainingInterrupted as e:
        # SIGINT/SIGTERM/SIGHUP: the final checkpoint is written; one line, status 128+signal
        e.report()
        return e.exit_code
    if args.dry_run:
        print(result)
    return 0


def cmd_new_plugin(args: argparse.Namespace) -> int:
    from trainbus._scaffold import names_for, scaffold_plugin

    try:
        root = scaffold_plugin(args.name, args.dir)
    except (ValueError, FileExistsError) as e:
        print(f"trainbus new-plugin: {e}", file=sys.stderr)
        return 2
    n = names_for(args.name)
    print(f"wrote the plugin distribution {n['dist']} in {root}")
    print(f"  callback  trainbus.callbacks.{n['callback']}")
    print(f"  monitor   trainbus.callbacks.{n['monitor']}")
    print(f"next: pip install -e {root} && pytest {root / 'tests'}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trainbus", description="trainbus command line")
    sub = p.add_subparsers(dest="command", required=True)
    sp = sub.add_parser("plugins", help="list installed plugin distributions")
    sp.add_argument("--no-load", action="store_true", help="read metadata only, do not import plugins")
    sp.add_argument("--strict", action="store_true", help="exit 1 if a plugin fails to load or clashes")
    sp.set_defaults(func=cmd_plugins)
    so = sub.add_parser("order", help="print the callback order per hook of a configured run")
    so.add_argument("spec", help="module:attr naming a TrainConfig, a list of callbacks, or a function returning one")
    so.set_defaults(func=cmd_order)
    st = sub.add_parser("train", help="train the run described by a TOML file",
                        description="Train the run a TOML file describes (model, data, trainer, callbacks and "
                                    "monitors by registered name, loop options). Every mistake in the file is "
                                    "reported at once, with its line, before anything starts.")
    st.add_argument("config", help="the run file (TOML)")
    st.add_argument("--dry-run", action="store_true",
                    help="print the resolved plan (components, providing distributions, callback order per hook) "
                         "and train nothing")
    st.set_defaults(func=cmd_train)
    sn = sub.add_parser("new-plugin", help="create a plugin distribution to start from")
    sn.add_argument("name", help="the plugin's name, e.g. grad-stats (the distribution becomes trainbus-grad-stats)")
    sn.add_argument("--dir", default=None, help="where to write it (default ./trainbus-NAME); must be empty or new")
    sn.set_defaults(func=cmd_new_plugin)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
