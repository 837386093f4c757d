"""Name -> object resolution for plugin distributions, from entry-point metadata only.

A name users import from module ``M`` (``trainbus.callbacks``, ``trainbus.train``,
``trainbus.tfutils.sessinit``) is declared by an installed distribution in entry-point group
``M``. Reading the index imports nothing; only the resolved entry point is loaded.

The installed distributions' entry points are read in one scan per process (:func:`scan`),
the first time any group is asked for; every group, the plugin API declarations and each
distribution's name and version come from it. ``clear_cache()`` forgets it (after installing
or removing distributions at run time). The scan reads the ``entry_points.txt`` files itself and
makes the standard library's ``importlib.metadata`` objects (which TensorFlow has imported
already); the ``importlib_metadata`` backport is imported only where the environment has what
only its search handles (a zip archive or an ``.egg`` on ``sys.path``, another distribution
finder). Neither is imported by ``import trainbus``.
"""

from __future__ import annotations

import functools
import importlib
from trainbus.bus.catalogue import BUNDLES, KNOWN_PROVIDERS
from trainbus.exceptions import PluginAPIVersionError, PluginConflictError, PluginLoadError

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing: `import trainbus` stays light
if TYPE_CHECKING:
    from typing import Any, Callable, Iterable, Mapping

    from importlib_metadata import EntryPoint

#: The groups through which names are resolved, named after the facade modules.
NAME_GROUPS = ("trainbus.callbacks", "trainbus.train", "trainbus.tfutils.sessinit", "trainbus.dataflow")
#: Ambient plugins (observers, profilers, default contributions) load from this group.
PLUGIN_GROUP = "trainbus.plugins"
#: The plugin API version this core implements. A plugin distribution declares the versions it
#: is written for in entry-point group :data:`API_GROUP` (see :func:`declared_api`).
PLUGIN_API_VERSION = 1
#: The entry-point group in which a plugin distribution declares the plugin API versions it is
#: written for: one entry point per version, named by the version, whose value is the
#: distribution's package (never imported)::
#:
#:     [project.entry-points."trainbus.plugin_api"]
#:     "1" = "trainbus_mything"
API_GROUP = "trainbus.plugin_api"

#: tensorpack names and module paths (as ``trainbus.<...>``) trainbus does not provide, with the
#: reason and what to use instead; importing one raises an ``ImportError`` that says so
OUT_OF_SCOPE: dict[str, str] = {
    "trainbus.utils.loadcaffe": "loading Caffe models needs Caffe's protobuf compiler and is out of scope for "
                                "trainbus; convert the weights to a .npz once and load them with SmartInit",
    "load_caffe": "loading Caffe models is out of scope for trainbus; convert the weights to a .npz once and "
                  "load them with SmartInit",
    "get_caffe_pb": "loading Caffe models is out of scope for trainbus",
    "trainbus.tfutils.distributed": "it held tensorpack's internal helpers for distributed graph building; "
                                    "trainbus.graph_builder has the public ones",
    "trainbus.libinfo": "use trainbus.__version__",
    "BytePSTrainer": "BytePS is not maintained for TensorFlow 2.x and is out of scope for trainbus; "
                     "HorovodTrainer (trainbus-trainers-horovod) covers the same all-reduce data parallelism",
}


class _Scan:
    """One read of every installed distribution's entry points (see :func:`scan`)."""

    __slots__ = ("groups", "api")

    def __init__(self) -> None:
        #: group -> its entry points, in the order the distributions were found
        self.groups: dict[str, list[EntryPoint]] = {}
        #: id(distribution) -> (the distribution, its (name, value) pairs in API_GROUP)
        self.api: dict[int, tuple[Any, list[tuple[str, str]]]] = {}


#: how many times the installed distributions' entry points were read in this process
#: (once, unless ``clear_cache()`` asked for a new read)
scans = 0


#: modules of the finders whose distributions :func:`_path_distributions` finds itself
_PATH_FINDER_MODULES = ("importlib_metadata", "importlib.metadata", "_frozen_importlib_external",
                        "importlib._bootstrap_external")


#: a section header of a trainbus entry-point group, in an ``entry_points.txt``
_DECLARES = r"(?m)^\s*\[\s*trainbus\."


def _normalized(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "_", name).lower()


def _metadata() -> Any:
    """The ``importlib.metadata`` module the listing makes its objects with: the standard
    library's from Python 3.11 on (its ``EntryPoint`` and ``PathDistribution`` have the API
    trainbus uses there, and TensorFlow imports it anyway), the backport before."""
    import sys

    if sys.version_info >= (3, 11):
        import importlib.metadata as md
    else:  # pragma: no cover - Python 3.10
        import importlib_metadata as md
    return md


def _path_distributions() -> list[Any] | None:
    """The distributions ``importlib_metadata.distributions()`` finds (first one of each name,
    in ``sys.path`` order, then a directory's entries in reverse name order), keeping only
    those whose ``entry_points.txt`` declares a trainbus group: found by listing the
    directories on ``sys.path``, several times faster than ``importlib_metadata``'s own
    search (the other distributions' files are read, not parsed). None where the
    environment has what only that search handles (a zip file or an ``.egg`` on ``sys.path``,
    another finder of distributions on ``sys.meta_path``)."""
    listing = _path_listing()
    return None if listing is None else [dist for dist, _, _ in listing]


def _path_listing() -> list[tuple[Any, str, str]] | None:
    """:func:`_path_distributions`, each with its path and the text of its ``entry_points.txt``.

    What a listing found is kept on disk for the next process of the same environment
    (:mod:`trainbus.bus.listcache`): it is used only while every folder on ``sys.path`` and every
    ``entry_points.txt`` it read are unchanged, else the folders are listed again."""
    import sys

    from trainbus.bus import listcache

    global _listing_source
    for finder in sys.meta_path:
        # the standard library's PathFinder is on sys.meta_path as a class (the backport, once
        # imported, takes its find_distributions away and adds a finder instance of its own)
        module = finder.__module__ if isinstance(finder, type) else type(finder).__module__
        if hasattr(finder, "find_distributions") and module not in _PATH_FINDER_MODULES:
            return None
    entries = list(sys.path)
    if not all(isinstance(entry, str) for entry in entries):
        return None
    bypass = _BYPASS_DISK[0]
    _BYPASS_DISK[0] = False
    cache = listcache.ListingCache(entries)
    found = None if bypass else cache.load()
    if found is not None:
        _listing_source = "cache"
    else:
        stamps = cache.stamp_folders()  # before listing: a change while listing is seen next time
        if stamps is None:
            return None
        found = _list_sys_path(entries)
        if found is None:
            return None
        cache.store(stamps, found)
        _listing_source = "listing"
    if not found:
        return []
    import os
    import pathlib

    md = _metadata()
    out = []
    for index, child, text in found:
        path = os.path.join(entries[index], child)
        out.append((md.PathDistribution(pathlib.Path(path)), path, text))
    return out


#: where the last scan's distributions came from: "listing" (the folders were read), "cache" (what
#: an earlier process of this environment read, unchanged since), "importlib_metadata" (its own
#: search, see :func:`_path_distributions`), or None (no scan yet)
_listing_source: str | None = None
#: set by clear_cache(): the next listing reads the folders whatever the disk cache says
_BYPASS_DISK = [False]


def _list_sys_path(entries: list[str]) -> list[tuple[int, str, str]] | None:
    """The distributions of :func:`_path_distributions` as (index of the ``sys.path`` entry, the
    ``.dist-info`` folder's name, the text of its ``entry_points.txt``); None where only
    ``importlib_metadata`` can search (see there)."""
    import os
    import re

    seen: set[str] = set()
    found = []
    for index, entry in enumerate(entries):
        root = entry or "."
        try:
            children = os.listdir(root)
        except OSError:
            if os.path.isfile(root):  # a zip archive: importlib_metadata reads inside it
                return None
            continue
        if entry.lower().endswith(".egg"):
            return None
        for child in sorted(children, key=str.lower, reverse=True):
            low = child.lower()
            if not low.endswith((".dist-info", ".egg-info")):
                continue
            name = _normalized(low.rpartition(".")[0].partition("-")[0])
            if name in seen:
                continue
            seen.add(name)
            try:
                with open(os.path.join(root, child, "entry_points.txt"), encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            if re.search(_DECLARES, text):  # only distributions declaring trainbus groups are parsed
                found.append((index, child, text))
    return found


def _trainbus_entry_points(dist: Any, path: str, text: str) -> list[Any]:
    """The entry points in trainbus groups of ``dist`` (installed at ``path``), whose
    ``entry_points.txt`` says ``text``, read as ``importlib.metadata`` reads that file (lines
    stripped, ``#`` comments and blank lines skipped, ``[group]`` headers, ``name = value`` split
    at the first ``=``); the other groups are not parsed. Each entry point knows its distribution (``ep.dist``)."""
    md = _metadata()
    if not hasattr(md.EntryPoint, "_for"):  # pragma: no cover - a metadata module without it: let it parse
        return [ep for ep in dist.entry_points if ep.group.startswith("trainbus.")]
    eps = []
    group = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            group = line.strip("[]")
            continue
        if group is None or not group.startswith("trainbus."):
            continue
        name, sep, value = line.partition("=")
        if not sep:
            raise PluginLoadError(
                f"the distribution installed at {path} has an unreadable entry point line "
                f"{line!r} in group [{group}] of its entry_points.txt (expected 'name = value'). Reinstall or "
                "uninstall that distribution.")
        eps.append(md.EntryPoint(name.strip(), value.strip(), group)._for(dist))
    return eps


@functools.lru_cache(maxsize=None)
def scan() -> _Scan:
    """The installed distributions' entry points in trainbus's groups (``trainbus.*``; no other
    group is kept), read once per process (``clear_cache()`` forgets them). Imports no entry
    point."""
    global scans
    scans += 1
    found = _Scan()
    listing = _path_listing()
    if listing is None:
        global _listing_source
        _listing_source = "importlib_metadata"
        import importlib_metadata

        eps = list(importlib_metadata.entry_points())
    else:
        eps = [ep for dist, path, text in listing for ep in _trainbus_entry_points(dist, path, text)]
    for ep in eps:
        if not ep.group.startswith("trainbus."):
            continue
        found.groups.setdefault(ep.group, []).append(ep)
        dist = getattr(ep, "dist", None)
        if dist is not None:
            # the scan keeps each distribution object alive, so its id stays its own
            seen = found.api.setdefault(id(dist), (dist, []))
            if ep.group == API_GROUP:
                seen[1].append((ep.name, ep.value))
    return found


@functools.lru_cache(maxsize=None)
def index(group: str) -> dict[str, tuple[EntryPoint, ...]]:
    """Entry points of ``group`` by name, from the process's one scan. Imports nothing."""
    found: dict[str, list[EntryPoint]] = {}
    for ep in scan().groups.get(group, ()):
        same = found.setdefault(ep.name, [])
        # the same distribution seen twice on sys.path (editable + lib64 symlink) is one provider
        if all(other.value != ep.value or _dist_name(other) != _dist_name(ep) for other in same):
            same.append(ep)
    return {name: tuple(eps) for name, eps in found.items()}


def clear_cache() -> None:
    """Forget the cached scan and everything read from it (after installing or removing
    distributions at run time); the next scan lists the folders on ``sys.path`` again, whatever
    the disk cache of :mod:`trainbus.bus.listcache` holds."""
    _BYPASS_DISK[0] = True
    scan.cache_clear()
    index.cache_clear()
    _parse_api.cache_clear()
    _dist_label.cache_clear()
    _packages_distributions.cache_clear()
    _declared_packages.cache_clear()
    _holds_distributions.cache_clear()


@functools.lru_cache(maxsize=None)
def _dist_label(dist: Any) -> tuple[str, str]:
    """(name, version) of a distribution, read once: from the header lines of its metadata file
    (parsing the whole file, description included, costs more than the scan itself)."""
    head: dict[str, str] = {}
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line
        key, sep, value = line.partition(":")
        if sep and key in ("Name", "Version") and key not in head:
            head[key] = value.strip()
    if len(head) < 2:  # unusual metadata: let importlib_metadata read it
        meta = dist.metadata
        head = {"Name": meta.get("Name") or "", "Version": meta.get("Version") or ""}
    return head["Name"] or "<unnamed distribution>", head["Version"] or "?"


def _dist_name(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    return _dist_label(dist)[0] if dist is not None else "<unknown distribution>"


def dist_name_version(ep: EntryPoint) -> tuple[str, str] | None:
    """(name, version) of the distribution that declares ``ep``, or None when unknown."""
    dist = getattr(ep, "dist", None)
    return _dist_label(dist) if dist is not None else None


def describe(ep: EntryPoint) -> str:
    """``"dist version (name = value)"`` for messages."""
    label = dist_name_version(ep)
    who = f"{label[0]} {label[1]}" if label is not None else "<unknown distribution>"
    return f"{who} ({ep.name} = {ep.value})"


class PluginAPI:
    """The plugin API versions an installed distribution declares it is written for.

    :ivar dist: the distribution's name.
    :ivar versions: the versions, a frozenset of ints.
    :ivar text: the versions for messages: ``"1"``, ``"1, 2"``.
    """

    __slots__ = ("dist", "versions", "text")

    def __init__(self, dist: str, versions: frozenset[int]) -> None:
        self.dist, self.versions = dist, versions
        self.text = ", ".join(str(v) for v in sorted(versions))

    def supports(self, version: int = PLUGIN_API_VERSION) -> bool:
        """Whether the distribution is written for plugin API ``version``."""
        return version in self.versions

    def __repr__(self) -> str:
        return f"PluginAPI({self.dist!r}, {self.text!r})"


@functools.lru_cache(maxsize=None)
def _parse_api(dist: str, eps: tuple[tuple[str, str], ...]) -> PluginAPI | None:
    if not eps:
        return None
    versions = set()
    for name, value in eps:
        if not (name.isascii() and name.isdigit()):
            raise PluginLoadError(
                f"the plugin distribution {dist!r} declares its plugin API unreadably: its entry point {name} = "
                f"{value} [group {API_GROUP}] is not named by a plugin API version (a whole number such as "
                f"\"{PLUGIN_API_VERSION}\"). Declare it in its pyproject.toml as [project.entry-points.\"{API_GROUP}\"] "
                f"\"{PLUGIN_API_VERSION}\" = \"<its package>\" (one entry point per version it is written for), or "
                f"reinstall a fixed version of {dist}.")
        versions.add(int(name))
    return PluginAPI(dist, frozenset(versions))


def declared_api(source: Any) -> PluginAPI | None:
    """The plugin API versions a distribution declares (``source``: the distribution, or one of
    its entry points), read from its entry points in :data:`API_GROUP`; None when it declares
    none (it is then not checked). This is the one place the declaration is read: one it
    cannot read raises :class:`~trainbus.exceptions.PluginLoadError` naming the distribution
    and what is wrong with it."""
    dist = getattr(source, "dist", None) if _is_entry_point(source) else source
    if dist is None:
        return None
    seen = scan().api.get(id(dist))
    if seen is not None and seen[0] is dist:  # a distribution of the scan: read there
        eps = tuple(seen[1])
    else:
        eps = tuple((ep.name, ep.value) for ep in dist.entry_points if ep.group == API_GROUP)
    return _parse_api(_dist_label(dist)[0], eps)


def _is_entry_point(obj: Any) -> bool:
    """Whether ``obj`` is an entry point (of ``importlib.metadata`` or of the backport), not a
    distribution."""
    return hasattr(obj, "group") and hasattr(obj, "value") and hasattr(obj, "load")


def check_api(source: Any) -> PluginAPI | None:
    """:func:`declared_api`, and a :class:`~trainbus.exceptions.PluginAPIVersionError` when the
    distribution is not written for the plugin API this core implements."""
    api = declared_api(source)
    if api is not None and not api.supports():
        raise PluginAPIVersionError(
            f"the plugin distribution {api.dist!r} supports trainbus plugin API {api.text}, but this "
            f"trainbus implements plugin API {PLUGIN_API_VERSION}. Install a version of "
            f"{api.dist} made for plugin API {PLUGIN_API_VERSION}, or a trainbus that implements {api.text}."
        )
    return api


def load(ep: EntryPoint, qualname: str) -> Any:
    """Load one entry point; failures name the distribution, version and entry point. The
    distribution's plugin API declaration is checked first (:func:`check_api`)."""
    check_api(ep)
    try:
        return ep.load()
    except Exception as exc:  # a broken plugin must say who it is
        raise PluginLoadError(
            f"{qualname} comes from {describe(ep)}, but loading it failed: "
            f"{type(exc).__name__}: {exc}. Reinstall or uninstall that distribution."
        ) from exc


def install_hint(requirement: str) -> str:
    """How to install ``requirement`` (a distribution or ``trainbus[bundle]``), as one line for
    messages. The trainbus distributions are not on a public package index, so the line gives
    the plain command and the one that works from a trainbus checkout, whose ``dist/``
    wheelhouse ``tools/build_wheels.sh`` builds::

        pip install trainbus-saver (from a trainbus checkout: tools/build_wheels.sh, then pip install --find-links dist trainbus-saver)
    """
    req = f"'{requirement}'" if "[" in requirement else requirement  # quoted for the shell
    return f"pip install {req} (from a trainbus checkout: tools/build_wheels.sh, then pip install --find-links dist {req})"


def provider(groups: Iterable[str], name: str) -> tuple[str, EntryPoint] | None:
    """The (group, entry point) that provides ``name``; raises on conflicts."""
    hits = [(g, ep) for g in groups for ep in index(g).get(name, ())]
    if len(hits) > 1:
        listing = "\n".join(f"  - {describe(ep)} [group {g}]" for g, ep in hits)
        raise PluginConflictError(
            f"{name} is provided by more than one installed distribution:\n{listing}\n"
            "Uninstall all but one of them, or import the class from its own package."
        )
    return hits[0] if hits else None


def resolve(module: str, name: str, groups: Iterable[str] | None = None) -> Any:
    """Return the object that module ``module`` exports as ``name`` through a plugin."""
    groups = tuple(groups) if groups is not None else (module,)
    found = provider(groups, name)
    if found is not None:
        group, ep = found
        return load(ep, f"{group}.{name}")
    for group in groups:
        dist = KNOWN_PROVIDERS.get(group, {}).get(name)
        if dist is not None:
            bundle = next((b for b, members in BUNDLES.items() if dist in members), None)
            hint = f"\n    {install_hint(dist)}"
            if bundle:
                hint += f"\n    or the whole bundle: {install_hint(f'trainbus[{bundle}]')}"
            # ModuleNotFoundError, not AttributeError: `from m import X` would replace an
            # AttributeError's message by its own "cannot import name".
            raise ModuleNotFoundError(
                f"{module}.{name} is provided by the {dist!r} distribution, which is not installed.{hint}",
                name=dist.replace("-", "_"),
            )
    if name in OUT_OF_SCOPE:
        raise ImportError(f"{module}.{name} is not provided by trainbus: {OUT_OF_SCOPE[name]}.", name=module)
    raise AttributeError(f"module {module!r} has no attribute {name!r}")


@functools.lru_cache(maxsize=None)
def _packages_distributions() -> dict[str, list[str]]:
    from importlib_metadata import packages_distributions

    return packages_distributions()


@functools.lru_cache(maxsize=None)
def _declared_packages() -> dict[str, tuple[str, str]]:
    """Top-level package -> (name, version) of the distribution whose trainbus entry points
    live in it, from the process's one scan (no file is read)."""
    out: dict[str, tuple[str, str]] = {}
    for eps in scan().groups.values():
        for ep in eps:
            label = dist_name_version(ep)
            if label is not None:
                out.setdefault(ep.value.split(":", 1)[0].split(".", 1)[0], label)
    return out


def _beside_distributions(path: str | None) -> bool:
    """Whether the module file ``path`` was imported from a folder of installed distributions
    (one that holds ``*.dist-info`` or ``*.egg-info`` entries), not from the user's own files."""
    import os
    import sys

    if not path:
        return False
    path = os.path.abspath(path)
    for entry in sys.path:
        root = os.path.abspath(entry or ".")
        if path.startswith(root + os.sep) and _holds_distributions(root):
            return True
    return False


@functools.lru_cache(maxsize=None)
def _holds_distributions(folder: str) -> bool:
    import os

    try:
        return any(n.endswith((".dist-info", ".egg-info")) for n in os.listdir(folder))
    except OSError:
        return False


def provider_of(module: str) -> str | None:
    """``"name version"`` of the installed distribution that provides ``module``, or None.
    Packages that declare trainbus entry points are known from the scan; any other module is
    looked up in the installed files of every distribution (read once per process) only when
    it was imported from a folder of installed distributions: a module of the user's own
    files has none."""
    import sys

    top = (module or "").split(".", 1)[0]
    if not top:
        return None
    label = _declared_packages().get(top)
    if label is not None:
        return f"{label[0]} {label[1]}"
    if not _beside_distributions(getattr(sys.modules.get(top), "__file__", None)):
        return None
    try:
        names = _packages_distributions().get(top) or []
        if not names:
            return None
        from importlib_metadata import version

        return f"{names[0]} {version(names[0])}"
    except Exception:  # noqa: BLE001 - only a description
        return None


def distribution_of(module: str) -> str | None:
    """``"name version"`` of the installed distribution that provides ``module`` (see
    :func:`provider_of`), or None; None for trainbus's own modules (for messages)."""
    top = (module or "").split(".", 1)[0]
    if top == "trainbus":
        return None
    try:
        return provider_of(module)
    except Exception:  # noqa: BLE001 - only a hint in a message
        return None


def installed_names(groups: Iterable[str]) -> list[str]:
    return sorted({n for g in groups for n in index(g)})


def _raise_missing(module: str, name: str, known: Callable[[], Iterable[str]]) -> None:
    """A name the module does not have. Imported by ``from module import name``: an
    ``ImportError`` with the closest of the names ``known()`` gives (Python's own says only
    "cannot import name"); looked up as an attribute (``hasattr``, ``getattr``): an
    ``AttributeError``, as usual, and ``known`` is not called (it may import modules)."""
    import dis
    import sys

    frame = sys._getframe(2)  # the code that asked: __getattr__'s caller
    try:
        importing = frame.f_code.co_code[frame.f_lasti] == dis.opmap["IMPORT_FROM"]
    except (IndexError, KeyError, AttributeError):
        importing = False
    finally:
        del frame
    if not importing:
        raise AttributeError(f"module {module!r} has no attribute {name!r}", name=name, obj=sys.modules.get(module))
    import difflib

    public = list(dict.fromkeys(n for n in known() if not n.startswith("_")))
    close = difflib.get_close_matches(name, public, n=3, cutoff=0.6)
    if not close:
        close = [n for n in public if n.lower() == name.lower()]
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else \
        f" (see `trainbus plugins` for every installed name, or dir({module}))"
    raise ImportError(f"cannot import name {name!r} from {module!r}{hint}", name=module)


def make_module_getattr(module: str, groups: tuple[str, ...], namespace: dict,
                        core_all: Iterable[str] | None = None, *, lazy: Mapping[str, str] | None = None,
                        submodules: Iterable[str] = ()) -> tuple[Any, Any]:
    """PEP 562 ``__getattr__``/``__dir__`` pair for a facade module.

    A name is looked up, in this order, in ``lazy`` (name -> the module it is imported from
    on first use, then kept in ``namespace``), in ``submodules`` (names of the package's
    submodules, imported on attribute access), then among the names installed distributions
    declare in ``groups`` (no groups: the module has no other names).

    With ``core_all`` (the module's own public names; the module then defines no ``__all__``),
    ``module.__all__`` is computed on access: those names, then every name an installed
    distribution declares in ``groups`` (read from metadata, importing nothing), so that
    ``from module import *`` binds the plugins' names too.
    """
    core_names = tuple(core_all) if core_all is not None else None
    lazy = dict(lazy or {})
    subs = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        if name == "__all__" and core_names is not None:
            return list(dict.fromkeys([*core_names, *installed_names(groups)]))
        if name.startswith("__"):
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        if name in lazy:
            value = getattr(importlib.import_module(lazy[name]), name)
        elif name in subs:
            return importlib.import_module(f"{module}.{name}")
        else:
            try:
                if not groups:
                    raise AttributeError(f"module {module!r} has no attribute {name!r}")
                value = resolve(module, name, groups)
            except AttributeError as e:
                if str(e) != f"module {module!r} has no attribute {name!r}":
                    raise
                _raise_missing(module, name, __dir__)
        namespace[name] = value  # later lookups skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *installed_names(groups), *lazy, *subs})

    return __getattr__, __dir__
