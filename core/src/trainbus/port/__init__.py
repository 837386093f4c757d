"""``trainbus port``: bring a tensorpack project written for TensorFlow 1.x to trainbus on
TensorFlow 2.21 in one step.

:func:`port_tree` reads a file or a directory (every ``.py`` under it), rewrites the tensorpack
imports to trainbus, applies the edits TensorFlow 2.21 needs (per file: TensorFlow's own
``tf_upgrade_v2`` rules, or ``import tensorflow.compat.v1 as tf`` + ``tf.disable_v2_behavior()``
where that keeps the file closer to what it was), maps the ``tf.contrib`` pieces to their
maintained homes and turns on Keras 2 where ``tf.layers`` / ``tf.keras`` need it. Every edit
replaces only the characters that change, so comments and layout stay as they were. Porting a
ported tree changes nothing.

Importing this package imports no TensorFlow; porting a file that imports TensorFlow does (to
load TensorFlow's upgrader and to check which names exist in TensorFlow 2.21).
"""

from __future__ import annotations

import difflib
import os
import shutil
import tokenize
from pathlib import Path

from trainbus.port._report import Change, FileRoute, PortReport, Problem

__all__ = ["port_tree", "PortReport", "Change", "Problem", "FileRoute", "PortArgumentError", "REPORT_NAME"]

#: the report written next to the ported tree
REPORT_NAME = "PORT_REPORT.md"
_SKIP_DIRS = {"__pycache__", ".git", ".hg", ".svn"}


class PortArgumentError(ValueError):
    """What :func:`port_tree` was asked to do cannot be done (a missing source, a destination
    that is not empty, ...); the message says what and how to fix it."""


def _read(path: Path) -> tuple[str, str]:
    with open(path, "rb") as f:
        encoding, _ = tokenize.detect_encoding(f.readline)
    raw = path.read_bytes()
    return raw.decode(encoding), encoding


def _sources(src: Path) -> list[Path]:
    if src.is_file():
        return [src]
    out = []
    for root, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        out += [Path(root) / f for f in sorted(files)]
    return out


def _backup_path(src: Path) -> Path:
    base = src.with_name(src.name + ".port-backup")
    cand, n = base, 1
    while cand.exists() or cand.is_symlink():
        cand = base.with_name(f"{base.name}-{n}")
        n += 1
    return cand


def port_tree(src: str | os.PathLike[str], dst: str | os.PathLike[str] | None = None, *, in_place: bool = False,
              diff: bool = False, write_report: bool = True) -> PortReport:
    """Port ``src`` (a ``.py`` file or a directory) into ``dst``, or in place (``in_place``:
    the original is first copied to ``SRC.port-backup``), or only compute the unified diff
    (``diff``: nothing is written; the diff is in ``report.diff``).

    ``dst`` for a directory must not exist or be empty; for a file it is the new file's path
    (or an existing directory to write it into). Files that are not Python are copied
    unchanged. ``PORT_REPORT.md`` is written at the top of the result (unless
    ``write_report=False`` or ``diff``). Returns the report; ``report.exit_code`` is 0 when the
    tree was ported, 1 when some construct needs the user (``report.problems``).

    Raises :class:`PortArgumentError` for impossible requests."""
    from trainbus.port._file import port_source

    srcp = Path(src)
    if not srcp.exists():
        raise PortArgumentError(f"the source {src} does not exist")
    if not (srcp.is_file() or srcp.is_dir()):
        raise PortArgumentError(f"the source {src} is neither a file nor a directory")
    modes = [m for m, on in (("in-place", in_place), ("diff", diff), ("copy", dst is not None)) if on]
    if len(modes) != 1:
        raise PortArgumentError("give exactly one of DST, --in-place or --diff" if modes else
                                "give DST (where to write the ported tree), --in-place or --diff")
    mode = modes[0]
    single = srcp.is_file()
    if single and srcp.suffix != ".py":
        raise PortArgumentError(f"the source {src} is not a .py file; give a Python file or a directory")
    dstp: Path | None = None
    if mode == "copy":
        dstp = Path(dst)  # type: ignore[arg-type]
        if single and dstp.is_dir():
            dstp = dstp / srcp.name
        if single and dstp.exists() and dstp.resolve() == srcp.resolve():
            raise PortArgumentError(f"DST {dst} is the source file; use --in-place to port it where it is")
        if not single:
            if dstp.exists() and (not dstp.is_dir() or any(dstp.iterdir())):
                raise PortArgumentError(f"DST {dst} exists and is not an empty directory; choose a new directory "
                                        "or remove it")
            rs, rd = srcp.resolve(), dstp.resolve()
            if rd == rs or rs in rd.parents:
                raise PortArgumentError(f"DST {dst} is inside the source {src}; choose a directory outside it")
    root_src = srcp if not single else srcp.parent
    report = PortReport(src=str(srcp), dst=str(dstp) if dstp else (str(srcp) if mode == "in-place" else None),
                        mode=mode)
    results = []
    for path in _sources(srcp):
        rel = path.name if single else str(path.relative_to(srcp))
        if not single and rel == REPORT_NAME:
            continue  # a previous port's report: the new one replaces it
        if path.suffix == ".py" and path.is_file() and not path.is_symlink():
            try:
                text, encoding = _read(path)
            except (UnicodeDecodeError, SyntaxError, LookupError) as e:
                report.problems.append(Problem(rel, 1, "the whole file", f"cannot be decoded: {e}",
                                               "save it as UTF-8, then port again"))
                report.copied.append(rel)
                results.append((path, rel, None, None))
                continue
            results.append((path, rel, port_source(rel, text), encoding))
        else:
            report.copied.append(rel)
            results.append((path, rel, None, None))
    # Keras 2 must be chosen before TensorFlow is imported: set it in each file that needs it,
    # and in each script of the tree that imports TensorFlow / trainbus when any file needs it
    need_keras2 = [r for _, _, r, _ in results if r is not None and r.keras2]
    finals: dict[str, str] = {}
    env_files: list[str] = []
    keras2_modules = {(str(Path(r.rel).parent), Path(r.rel).stem) for r in need_keras2}
    for _, rel, res, _ in results:
        if res is None:
            continue
        # a script importing (from its directory) a module that needs Keras 2 chooses it first
        here = str(Path(rel).parent)
        env = bool(res.keras2) or (res.is_script and any((here, m) in keras2_modules for m in res.local_imports))
        if env and "TF_USE_LEGACY_KERAS" not in res.text:
            env_files.append(rel)
        finals[rel] = res.final_text(env)
        report.changes += res.changes(env)
        report.problems += res.problems
        for pkg, why in res.packages.items():
            report.packages.setdefault(pkg, why)
        report.files.append(FileRoute(rel, res.route, res.why, finals[rel] != res.original))
    if need_keras2:
        where = ", ".join(f"{r.rel}:{r.keras2[0][0]} ({r.keras2[0][1]})" for r in need_keras2[:5])
        set_in = (f"set at the top of {', '.join(env_files)}" if env_files else "already set in the scripts")
        report.runtime.append(f"TF_USE_LEGACY_KERAS=1 ({set_in}): Keras 2 for {where}; a program that imports "
                              "TensorFlow before these files must export TF_USE_LEGACY_KERAS=1 itself")
    if any(f.route == "compat" for f in report.files):
        report.runtime.append("tf.disable_v2_behavior() (written after the TensorFlow import of the compat-route "
                              "files): TF 1 behaviour for the whole process, as those files were written for")
    # the diff, then writing
    chunks = []
    for _, rel, res, _ in results:
        if res is not None and finals[rel] != res.original:
            a = res.original.splitlines(keepends=True)
            b = finals[rel].splitlines(keepends=True)
            chunks.append("".join(difflib.unified_diff(a, b, f"a/{rel}", f"b/{rel}")))
    report.diff = "".join(chunks)
    if mode == "diff":
        return report
    if mode == "in-place":
        if any(f.changed for f in report.files):
            backup = _backup_path(srcp)
            if single:
                shutil.copy2(srcp, backup)
            else:
                shutil.copytree(srcp, backup, symlinks=True)
            report.backup = str(backup)
        out_root = root_src
    else:
        assert dstp is not None
        out_root = dstp.parent if single else dstp
        out_root.mkdir(parents=True, exist_ok=True)
    for path, rel, res, encoding in results:
        target = dstp if (single and mode == "copy") else out_root / rel
        assert target is not None
        if res is None:
            if mode == "copy":
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target, follow_symlinks=False)
            continue
        if mode == "in-place" and finals[rel] == res.original:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(finals[rel].encode(encoding))
        if mode == "copy":
            shutil.copymode(path, target)
    if write_report:
        (out_root / REPORT_NAME).write_text(report.to_markdown(), encoding="utf-8")
    return report
