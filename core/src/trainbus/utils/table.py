"""Plain-text tables for logs and reports."""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["format_table"]


def format_table(rows: Sequence[Sequence[Any]], headers: Sequence[str] | None = None) -> str:
    """Rows as a plain-text table: columns padded to their widest cell, numbers right-aligned,
    a dashed rule under the headers (if given)."""
    cells = [[str(c) for c in r] for r in rows]
    ncol = max([len(r) for r in cells] + [len(headers or ())])
    head = [str(h) for h in headers] if headers else None
    widths = [0] * ncol
    for r in cells + ([head] if head else []):
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))
    numeric = [all(_is_number(r[i]) for r in rows if i < len(r)) and any(i < len(r) for r in rows)
               for i in range(ncol)]

    def line(r: Sequence[str], align_numbers: bool) -> str:
        out = []
        for i in range(ncol):
            c = r[i] if i < len(r) else ""
            out.append(c.rjust(widths[i]) if align_numbers and numeric[i] else c.ljust(widths[i]))
        return "  ".join(out).rstrip()

    lines = []
    if head:
        lines.append(line(head, False))
        lines.append("  ".join("-" * w for w in widths))
    lines.extend(line(r, True) for r in cells)
    return "\n".join(lines)


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)
