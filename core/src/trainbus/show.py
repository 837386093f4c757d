"""Looking at finished or running trainings without TensorFlow: ``trainbus show LOGDIR...``.

What a log directory holds that this module reads:

* ``stats.json`` (written by ``JSONWriter``): a list of records, each with ``epoch_num``,
  ``global_step`` and the scalars put at that step. Non-finite values may be the strings
  ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (strict JSON) or the bare tokens older files have;
  both read as floats. A record whose value is not a number is kept without that value.
* checkpoints: every ``<prefix>.index`` with its ``<prefix>.data-NNNNN-of-MMMMM`` shards
  (``model-<step>`` of ``ModelSaver``, ``min-<stat>.tfmodel``/``max-<stat>.tfmodel`` of
  ``MinSaver``/``MaxSaver``). A checkpoint is *readable* when its index file ends with the table
  format's magic number and every data shard it names is present; this is checked from the
  bytes, without TensorFlow.

:func:`load_run` gives a :class:`RunView` (per-epoch values, best values, checkpoints);
:func:`format_runs` the text ``trainbus show`` prints; :func:`plot_runs` the curves as a PNG
(matplotlib, the ``trainbus[plot]`` extra). :func:`best_values` is shared with the end-of-run
summary of a training. Importing this module imports no TensorFlow and no matplotlib.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import math
import os
import re
from typing import Any, Iterable, Sequence

__all__ = ["ShowError", "RunView", "Checkpoint", "Best", "load_run", "read_stats", "per_epoch", "best_values",
           "find_checkpoints", "format_runs", "plot_runs", "PLOT_INSTALL_HINT"]

STATS_FILE = "stats.json"
#: what to install for ``--plot``
PLOT_INSTALL_HINT = "pip install \"trainbus[plot]\" (or: pip install matplotlib)"

_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf, "nan": math.nan, "inf": math.inf,
              "-inf": -math.inf}
_RESERVED = ("epoch_num", "global_step")
#: the last 8 bytes of a TensorFlow checkpoint index (a LevelDB-style table): its magic number
_TABLE_MAGIC = (0xdb4775248b80fb57).to_bytes(8, "little")
_SHARD = re.compile(r"\.data-(\d+)-of-(\d+)$")


class ShowError(ValueError):
    """A log directory that cannot be shown (missing, empty, an unreadable ``stats.json``):
    one line saying which and why."""


@dataclasses.dataclass
class Checkpoint:
    """One checkpoint found in a log directory."""

    prefix: str            # the path without .index / .data-*
    size: int              # bytes of its files together
    problem: str | None    # None: readable

    @property
    def name(self) -> str:
        return os.path.basename(self.prefix)

    @property
    def readable(self) -> bool:
        return self.problem is None


@dataclasses.dataclass
class Best:
    """The best value of one scalar in one direction."""

    name: str
    mode: str              # "min" or "max"
    value: float
    epoch: int | None
    step: int | None


@dataclasses.dataclass
class RunView:
    """What ``trainbus show`` knows of one log directory."""

    logdir: str
    epochs: list[dict[str, Any]]   # one per epoch: epoch_num, global_step and the scalars (last value that epoch)
    scalars: list[str]             # every scalar name, in order of first appearance
    checkpoints: list[Checkpoint]
    directions: dict[str, str]     # scalar -> "min"/"max", where a MinSaver/MaxSaver file says it
    note: str | None = None        # e.g. no stats.json

    @property
    def label(self) -> str:
        return os.path.basename(os.path.normpath(self.logdir)) or self.logdir

    def series(self, name: str) -> tuple[list[int], list[float]]:
        """(epochs, values) of one scalar, skipping epochs without it."""
        xs, ys = [], []
        for rec in self.epochs:
            v = rec.get(name)
            if isinstance(v, float):
                xs.append(rec["epoch_num"])
                ys.append(v)
        return xs, ys

    def best(self) -> list[Best]:
        return best_values(self.epochs, self.scalars, self.directions)


# ----------------------------------------------------------------------------- reading
def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str) and v in _NONFINITE:
        return _NONFINITE[v]
    return None


def read_stats(logdir: str) -> list[dict[str, Any]] | None:
    """The records of ``logdir/stats.json`` with every scalar as a float (non-finite values
    given as strings or bare tokens included), or None without the file. Raises
    :class:`ShowError` when it is not JSON or not a list of records."""
    fname = os.path.join(logdir, STATS_FILE)
    if not os.path.isfile(fname):
        return None
    try:
        with open(fname, encoding="utf-8") as f:
            # bare NaN/Infinity (non-strict JSON of older writers) are accepted as floats
            raw = json.load(f, parse_constant=lambda tok: _NONFINITE[tok])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ShowError(f"{fname} cannot be read: {e}; it is not a stats.json written by JSONWriter") from None
    if not isinstance(raw, list):
        raise ShowError(f"{fname} holds a {type(raw).__name__}, not the list of records JSONWriter writes")
    out: list[dict[str, Any]] = []
    for rec in raw:
        if not isinstance(rec, dict):
            continue
        clean: dict[str, Any] = {}
        for k in _RESERVED:
            v = rec.get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                clean[k] = int(v)
        for k, v in rec.items():
            if k in _RESERVED:
                continue
            x = _number(v)
            if x is not None:
                clean[k] = x
        out.append(clean)
    return out


def per_epoch(records: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per epoch (in order; the last value of each scalar in that epoch, the last
    global step) and the scalar names in order of first appearance."""
    rows: dict[int, dict[str, Any]] = {}
    names: dict[str, None] = {}
    for rec in records:
        epoch = rec.get("epoch_num")
        if epoch is None:
            continue
        row = rows.setdefault(epoch, {"epoch_num": epoch})
        for k, v in rec.items():
            if k == "epoch_num":
                continue
            row[k] = v
            if k != "global_step":
                names.setdefault(k, None)
    return [rows[e] for e in sorted(rows)], list(names)


def best_values(epochs: Sequence[dict[str, Any]], scalars: Sequence[str],
                directions: dict[str, str] | None = None) -> list[Best]:
    """The best value of each scalar over the per-epoch rows: in its direction when
    ``directions`` names one ("min"/"max"), else both the minimum and the maximum. NaN values
    are never best; the first epoch reaching the best value is the one reported."""
    directions = directions or {}
    out: list[Best] = []
    for name in scalars:
        modes = [directions[name]] if name in directions else ["min", "max"]
        for mode in modes:
            best: Best | None = None
            for rec in epochs:
                v = rec.get(name)
                if not isinstance(v, float) or math.isnan(v):
                    continue
                if best is None or (v < best.value if mode == "min" else v > best.value):
                    best = Best(name, mode, v, rec.get("epoch_num"), rec.get("global_step"))
            if best is not None:
                out.append(best)
    return out


def _check_checkpoint(prefix: str) -> tuple[int, str | None]:
    """(total size, None when readable else what is wrong) of the checkpoint ``prefix``."""
    index = prefix + ".index"
    try:
        size = os.path.getsize(index)
        with open(index, "rb") as f:
            if size < 8:
                return size, f"{os.path.basename(index)} is truncated ({size} bytes)"
            f.seek(size - 8)
            if f.read(8) != _TABLE_MAGIC:
                return size, f"{os.path.basename(index)} is damaged (no table footer)"
    except OSError as e:
        return 0, f"{os.path.basename(index)} cannot be read: {e.strerror or e}"
    shards = [p for p in glob.glob(glob.escape(prefix) + ".data-*") if _SHARD.search(p)]
    if not shards:
        return size, "no .data-* file beside its index"
    want = int(_SHARD.search(shards[0]).group(2))
    have = {int(_SHARD.search(p).group(1)) for p in shards}
    missing = [i for i in range(want) if i not in have]
    if missing:
        return size, f"data shard(s) {', '.join(str(i) for i in missing)} of {want} missing"
    for p in shards:
        try:
            size += os.path.getsize(p)
        except OSError as e:
            return size, f"{os.path.basename(p)} cannot be read: {e.strerror or e}"
    return size, None


def _step_key(prefix: str) -> tuple[int, int, str]:
    from trainbus.checkpoint import step_of

    step = step_of(prefix)
    return (0, step, prefix) if step is not None else (1, 0, prefix)


def find_checkpoints(logdir: str) -> list[Checkpoint]:
    """Every checkpoint in ``logdir`` (not below it): ``model-<step>`` by step, then the others
    (``min-*.tfmodel``, ``max-*.tfmodel``) by name; each checked from its files."""
    prefixes = {p[:-len(".index")] for p in glob.glob(os.path.join(glob.escape(logdir), "*.index"))}
    prefixes |= {p[:p.rindex(".data-")] for p in glob.glob(os.path.join(glob.escape(logdir), "*.data-*"))
                 if _SHARD.search(p) and not p.endswith(".tmp")}
    out = []
    for prefix in sorted(prefixes, key=_step_key):
        size, problem = _check_checkpoint(prefix)
        out.append(Checkpoint(prefix, size, problem))
    return out


def _directions_from(checkpoints: Iterable[Checkpoint]) -> dict[str, str]:
    """``min-<stat>.tfmodel`` (MinSaver) says the stat is best when smallest, ``max-...`` largest."""
    out: dict[str, str] = {}
    for c in checkpoints:
        m = re.match(r"^(min|max)-(.+)\.tfmodel$", c.name)
        if m:
            out.setdefault(m.group(2), m.group(1))
    return out


def load_run(logdir: str) -> RunView:
    """Read one log directory. Raises :class:`ShowError` when it does not exist, is not a
    directory, or holds neither a ``stats.json`` nor a checkpoint."""
    if not os.path.exists(logdir):
        raise ShowError(f"{logdir} does not exist; give the log directory of a training (its logdir)")
    if not os.path.isdir(logdir):
        raise ShowError(f"{logdir} is not a directory; give the log directory of a training (its logdir)")
    records = read_stats(logdir)
    checkpoints = find_checkpoints(logdir)
    if records is None and not checkpoints:
        raise ShowError(f"{logdir} has no stats.json and no checkpoint: it is empty or not the log directory of a "
                        "training (JSONWriter writes stats.json there, ModelSaver the checkpoints)")
    epochs, scalars = per_epoch(records or [])
    note = None
    if records is None:
        note = "no stats.json (the run had no JSONWriter monitor)"
    elif not epochs:
        note = "stats.json holds no epoch yet"
    return RunView(logdir, epochs, scalars, checkpoints, _directions_from(checkpoints), note)


# ----------------------------------------------------------------------------- text
def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
            return f"{v:.4g}"
        return f"{v:.4f}".rstrip("0").rstrip(".")
    return str(v)


def _table(header: list[str], rows: list[list[str]], indent: str = "  ") -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    lines = [indent + "  ".join(h.rjust(w) if i < 2 else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths)))]
    for r in rows:
        lines.append(indent + "  ".join(c.rjust(w) if i < 2 else c.ljust(w)
                                        for i, (c, w) in enumerate(zip(r, widths))).rstrip())
    return [ln.rstrip() for ln in lines]


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def format_best(best: Iterable[Best]) -> list[str]:
    """One line per best value: ``val-error  min 0.0133 at epoch 17 (step 935)``."""
    best = list(best)
    if not best:
        return []
    w = max(len(b.name) for b in best)
    return [f"{b.name:<{w}}  {b.mode} {_fmt(b.value)} at epoch {b.epoch} (step {b.step})" for b in best]


def format_checkpoints(checkpoints: Iterable[Checkpoint]) -> list[str]:
    return [f"{c.name}  {_size(c.size)}  " + ("readable" if c.readable else f"NOT READABLE: {c.problem}")
            for c in checkpoints]


def format_run(run: RunView, tail: int | None = None) -> str:
    """The text of one run: per-epoch table, best values, checkpoints."""
    last = run.epochs[-1] if run.epochs else {}
    head = f"run {run.logdir}"
    if run.epochs:
        head += f": {len(run.epochs)} epoch(s), last epoch {last['epoch_num']}, global step {last.get('global_step', '?')}"
    lines = [head]
    if run.note:
        lines.append(f"  {run.note}")
    if run.epochs:
        rows_src = run.epochs if not tail else run.epochs[-tail:]
        if tail and len(run.epochs) > tail:
            lines.append(f"  (the last {tail} of {len(run.epochs)} epochs)")
        rows = [[str(r["epoch_num"]), str(r.get("global_step", "-")), *(_fmt(r.get(s)) for s in run.scalars)]
                for r in rows_src]
        lines += _table(["epoch", "step", *run.scalars], rows)
        lines.append("  best:")
        lines += ["    " + ln for ln in format_best(run.best())]
    if run.checkpoints:
        lines.append("  checkpoints:")
        lines += ["    " + ln for ln in format_checkpoints(run.checkpoints)]
    else:
        lines.append("  checkpoints: none")
    return "\n".join(lines)


def _labels(runs: Sequence[RunView]) -> list[str]:
    labels = [r.label for r in runs]
    if len(set(labels)) < len(labels):
        labels = [os.path.normpath(r.logdir) for r in runs]
    return labels


def format_side_by_side(runs: Sequence[RunView]) -> str:
    """The runs' scalars next to each other: per scalar, each run's last value and best."""
    labels = _labels(runs)
    names: dict[str, None] = {}
    for r in runs:
        for s in r.scalars:
            names.setdefault(s, None)
    header = ["scalar", "", *labels]
    rows: list[list[str]] = []
    for s in names:
        last_row = ["", "last"]
        for r in runs:
            xs, ys = r.series(s)
            last_row.append(f"{_fmt(ys[-1])} (epoch {xs[-1]})" if ys else "-")
        rows.append([s, *last_row[1:]])
        modes = sorted({b.mode for r in runs for b in r.best() if b.name == s})
        for mode in modes:
            row = ["", mode]
            for r in runs:
                b = [x for x in r.best() if x.name == s and x.mode == mode]
                row.append(f"{_fmt(b[0].value)} (epoch {b[0].epoch})" if b else "-")
            rows.append(row)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    out = ["side by side:"]
    out.append("  " + "  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    out += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return "\n".join(out)


def format_runs(runs: Sequence[RunView], tail: int | None = None) -> str:
    """What ``trainbus show`` prints for these runs."""
    parts = [format_run(r, tail) for r in runs]
    if len(runs) > 1:
        parts.append(format_side_by_side(runs))
    return "\n\n".join(parts)


# ----------------------------------------------------------------------------- plot
def plot_runs(runs: Sequence[RunView], path: str, width: float = 11.0, dpi: int = 100) -> str:
    """Draw every scalar's curve (one panel per scalar, x: epoch; the runs overlaid, one colour
    each, in matplotlib's default colour cycle) into the PNG ``path``; returns the path.
    Raises ``ModuleNotFoundError`` naming the extra to install when matplotlib is missing."""
    try:
        import matplotlib
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(f"--plot needs matplotlib, which is not installed: {PLOT_INSTALL_HINT}",
                                  name=e.name) from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    labels = _labels(runs)
    names: dict[str, None] = {}
    for r in runs:
        for s in r.scalars:
            names.setdefault(s, None)
    if not names:
        raise ShowError("nothing to plot: no run has a scalar in stats.json")
    n = len(names)
    cols = 1 if n == 1 else 2 if n <= 4 else 3
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(width, max(3.0, 2.8 * nrows)), squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    try:
        for ax, name in zip(axes.flat, names):
            for i, (run, label) in enumerate(zip(runs, labels)):
                xs, ys = run.series(name)
                if not xs:
                    continue
                ys = [y if math.isfinite(y) else math.nan for y in ys]  # gaps where a value was not finite
                ax.plot(xs, ys, color=colours[i % len(colours)], label=label, linewidth=1.8,
                        marker="o" if len(xs) <= 30 else None, markersize=3)
            ax.set_title(name, fontsize=10)
            ax.set_xlabel("epoch")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # epochs are whole numbers
            ax.grid(True, alpha=0.3)
            if len(runs) > 1:
                ax.legend(fontsize=8)
        for ax in list(axes.flat)[n:]:
            ax.set_visible(False)
        fig.tight_layout()
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        fig.savefig(path, dpi=dpi, format="png")
    finally:
        plt.close(fig)
    return path
