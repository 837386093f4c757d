"""What ``trainbus port`` did, as data (:class:`PortReport`) and as the text of
``PORT_REPORT.md``."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Change:
    """One changed line of one file: where, what it was, what it became, and why."""

    path: str
    line: int
    before: str
    after: str
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class Problem:
    """A construct the port could not convert: it needs the user."""

    path: str
    line: int
    construct: str
    reason: str
    suggestion: str


@dataclass(frozen=True)
class FileRoute:
    """How one Python file's TensorFlow code was brought to TensorFlow 2.21, and why.

    ``route`` is one of ``"none"`` (no TensorFlow import), ``"v1"`` (already uses
    ``tf.compat.v1``), ``"keep"`` (its names all exist in TF 2), ``"compat"`` (switched to
    ``import tensorflow.compat.v1 as tf`` + ``tf.disable_v2_behavior()``), ``"upgrade"``
    (converted by TensorFlow's ``tf_upgrade_v2`` rules) or ``"unparsed"``."""

    path: str
    route: str
    why: str
    changed: bool


@dataclass
class PortReport:
    """The result of :func:`trainbus.port.port_tree`."""

    src: str
    dst: str | None
    mode: str  # "copy", "in-place" or "diff"
    files: list[FileRoute] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: pip requirement -> why it is needed
    packages: dict[str, str] = field(default_factory=dict)
    #: run-time settings the port wrote into the scripts (or the user must make), one line each
    runtime: list[str] = field(default_factory=list)
    copied: list[str] = field(default_factory=list)
    backup: str | None = None
    diff: str = ""

    @property
    def exit_code(self) -> int:
        """0 when the tree was ported, 1 when something needs the user."""
        return 1 if self.problems else 0

    @property
    def changed_files(self) -> list[str]:
        return [f.path for f in self.files if f.changed]

    def to_markdown(self) -> str:
        out = ["# trainbus port report", ""]
        where = {"copy": f"into `{self.dst}`", "in-place": "in place", "diff": "as a diff (nothing written)"}[self.mode]
        out.append(f"Ported `{self.src}` {where}: {len(self.files)} Python file(s), "
                   f"{len(self.changed_files)} changed, {len(self.changes)} line(s) changed, "
                   f"{len(self.copied)} other file(s) copied unchanged.")
        if self.backup:
            out.append(f"The original tree is kept in `{self.backup}`.")
        status = ("exit status 1: some constructs need you (see *Needs your attention*)" if self.problems
                  else "exit status 0: the tree is ported")
        out += ["", f"Result: {status}.", ""]
        out += ["## Packages to install", ""]
        if self.packages:
            reqs = " ".join(f"'{p}'" if "[" in p else p for p in sorted(self.packages))  # quoted for the shell
            out.append(f"    pip install {reqs}")
            out.append("")
            out += [f"- `{p}`: {why}" for p, why in sorted(self.packages.items())]
        else:
            out.append("None beyond trainbus and TensorFlow.")
        out += ["", "## Run-time settings", ""]
        out += [f"- {r}" for r in self.runtime] if self.runtime else ["None."]
        out += ["", "## Route per file", "", "| file | route | why |", "| --- | --- | --- |"]
        for f in self.files:
            out.append(f"| `{f.path}` | {f.route} | {f.why} |")
        out += ["", "## Needs your attention", ""]
        if self.problems:
            for p in self.problems:
                out.append(f"- `{p.path}:{p.line}`: `{p.construct}`: {p.reason}. Suggestion: {p.suggestion}")
        else:
            out.append("Nothing.")
        out += ["", "## Changes", ""]
        if self.changes:
            for c in self.changes:
                out.append(f"- `{c.path}:{c.line}`: {'; '.join(c.reasons)}")
                out.append(f"  - before: `{c.before.strip()}`")
                out.append(f"  - after: `{c.after.strip()}`" if c.after.strip() else "  - after: (line removed)")
        else:
            out.append("None: the tree already runs on trainbus and TensorFlow 2.21 as it is.")
        return "\n".join(out) + "\n"
