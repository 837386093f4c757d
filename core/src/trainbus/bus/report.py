"""What is installed: one record per plugin distribution, read from metadata (for
``trainbus plugins``, ``collect_env_info`` and bug reports)."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
from typing import Any

from trainbus.bus import registry as _registry
from trainbus.bus.catalogue import BUNDLES
from trainbus.exceptions import PluginAPIVersionError, PluginLoadError

__all__ = ["plugin_report"]


def _bundle_of(dist: str) -> str:
    for bundle, members in BUNDLES.items():
        if dist in members:
            return bundle
    return "-"


def _api_of(ep: Any) -> tuple[str | None, str | None]:
    """(the plugin API the distribution declares, as written; the message when this core does
    not implement it or the declaration is unreadable)."""
    try:
        api = _registry.check_api(ep)
    except PluginAPIVersionError as e:
        return _registry.declared_api(ep).text, f"{type(e).__name__}: {e}"  # type: ignore[union-attr]
    except PluginLoadError as e:  # unreadable
        return "unreadable", f"{type(e).__name__}: {e}"
    return (api.text if api is not None else None), None


def _module_missing(module: str, found: dict[str, Any] | None = None) -> str | None:
    """Why ``module`` cannot be imported, found without executing any module (None if it is there).
    ``found`` keeps the top-level packages already looked up (one search of ``sys.path`` each)."""
    parts = module.split(".")
    found = {} if found is None else found
    try:
        if parts[0] not in found:
            found[parts[0]] = importlib.util.find_spec(parts[0])
        spec = found[parts[0]]
    except (ImportError, ValueError) as e:
        return f"{type(e).__name__}: {e}"
    for i, part in enumerate(parts[1:], start=1):
        if spec is None:
            break
        locations = spec.submodule_search_locations
        if locations is None:
            return f"{'.'.join(parts[:i])} is a module, not a package, so it has no {part!r}"
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: i + 1]), list(locations))
        if spec is None:
            return f"No module named {'.'.join(parts[: i + 1])!r}"
    if spec is None:
        return f"No module named {parts[0]!r}"
    return None


def plugin_report(try_load: bool = True, check_modules: bool = True) -> list[dict[str, Any]]:
    """One entry per installed plugin distribution: name, version, bundle, declared plugin API
    (``api``), names, ambient plugins and errors (load failures, API mismatches, clashes).

    ``try_load`` imports every entry point (a plugin module that imports TensorFlow at import
    time then imports it); without it, ``check_modules`` still finds each entry point's module
    on ``sys.path`` without executing it."""
    dists: dict[str, dict[str, Any]] = {}
    missing: dict[str, str | None] = {}  # module -> why it cannot be found, each module looked up once
    tops: dict[str, Any] = {}  # top-level package -> its spec
    for group in (*_registry.NAME_GROUPS, _registry.PLUGIN_GROUP):
        for name, eps in sorted(_registry.index(group).items()):
            for ep in eps:
                dname, version = _registry.dist_name_version(ep) or ("<unknown>", "?")
                rec = dists.get(dname)
                if rec is None:
                    spec, api_error = _api_of(ep)
                    rec = dists[dname] = {"name": dname, "version": version,
                                          "bundle": _bundle_of(dname), "api": spec, "names": [], "plugins": [],
                                          "errors": []}
                    rec["api_ok"] = api_error is None
                    if api_error:
                        rec["errors"].append(api_error)
                qualname = f"{group}.{name}"
                if group == _registry.PLUGIN_GROUP:
                    rec["plugins"].append(name)
                else:
                    rec["names"].append(qualname)
                if not rec["api_ok"]:
                    continue
                if try_load:
                    try:
                        _registry.load(ep, qualname)
                    except Exception as e:  # noqa: BLE001 - reported, not raised
                        rec["errors"].append(f"{qualname}: {e}")
                elif check_modules:
                    if ep.module not in missing:
                        missing[ep.module] = _module_missing(ep.module, tops)
                    why = missing[ep.module]
                    if why:
                        rec["errors"].append(f"{qualname}: {qualname} comes from {_registry.describe(ep)}, but its "
                                             f"module cannot be found: {why}. Reinstall or uninstall that distribution.")
    for dname, rec in dists.items():
        providers = [n.rsplit(".", 1)[1] for n in rec["names"]]
        for other in dists.values():
            if other is not rec:
                clash = set(providers) & {n.rsplit(".", 1)[1] for n in other["names"]}
                for c in sorted(clash):
                    rec["errors"].append(f"{c} is also provided by {other['name']} {other['version']}")
    return sorted(dists.values(), key=lambda r: r["name"])
