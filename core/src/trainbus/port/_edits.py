"""Span edits on source text: every rewrite of ``trainbus port`` is a list of (start, end,
replacement) character spans of the text it read, so everything outside those spans stays
byte-identical. Also turns the output of a whole-file rewriter (TensorFlow's upgrader, which
prints the tree back through ``pasta``) into such spans by comparing the two token streams."""

from __future__ import annotations

import difflib
import io
import tokenize
from dataclasses import dataclass

#: tokens that carry no code: their text is kept from the original around every edit
_LAYOUT = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


@dataclass(frozen=True)
class Edit:
    """Replace ``text[start:end]`` by ``new``; ``line`` is the 1-based line of ``start``."""

    start: int
    end: int
    new: str
    line: int
    reason: str


class Lines:
    """(line, column) <-> offset for one text; columns are characters, or UTF-8 bytes as
    ``ast`` gives them (:meth:`byte_offset`)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self.starts.append(i + 1)

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def byte_offset(self, line: int, col_bytes: int) -> int:
        start = self.starts[line - 1]
        end = self.starts[line] if line < len(self.starts) else len(self.text)
        prefix = self.text[start:end].encode("utf-8")[:col_bytes]
        return start + len(prefix.decode("utf-8", errors="ignore"))

    def line_of(self, offset: int) -> int:
        lo, hi = 0, len(self.starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1

    def line_text(self, line: int) -> str:
        start = self.starts[line - 1]
        end = self.starts[line] if line < len(self.starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")


def apply(text: str, edits: list[Edit]) -> tuple[str, list[Edit]]:
    """The text with the edits applied, and the edits that were applied (an edit overlapping
    an earlier one, by start, is dropped)."""
    done: list[Edit] = []
    out: list[str] = []
    pos = 0
    for e in sorted(edits, key=lambda e: (e.start, e.end)):
        if e.start < pos or (done and e.start == done[-1].start and e.start == e.end == done[-1].end):
            continue
        if text[e.start:e.end] == e.new:
            continue
        out.append(text[pos:e.start])
        out.append(e.new)
        pos = e.end
        done.append(e)
    out.append(text[pos:])
    return "".join(out), done


def code_tokens(text: str) -> list[tokenize.TokenInfo]:
    """The tokens of ``text`` that carry code (no comments, newlines or indentation)."""
    return [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type not in _LAYOUT]


def token_edits(old: str, new: str, reason_at: dict[int, str], default_reason: str) -> list[Edit]:
    """Span edits of ``old`` that give ``new``'s code tokens while keeping ``old``'s layout
    (spacing, comments, line breaks) wherever the tokens agree. ``reason_at`` maps a line of
    ``old`` to the message explaining its change."""
    a, b = code_tokens(old), code_tokens(new)
    la, lb = Lines(old), Lines(new)

    def start(lines: Lines, t: tokenize.TokenInfo) -> int:
        return lines.offset(*t.start)

    def end(lines: Lines, t: tokenize.TokenInfo) -> int:
        return lines.offset(*t.end)

    sm = difflib.SequenceMatcher(None, [t.string for t in a], [t.string for t in b], autojunk=False)
    edits: list[Edit] = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            continue
        if i1 < i2:
            s, e = start(la, a[i1]), end(la, a[i2 - 1])
            repl = new[start(lb, b[j1]):end(lb, b[j2 - 1])] if j1 < j2 else ""
        else:
            s = e = end(la, a[i1 - 1]) if i1 > 0 else 0
            repl = new[(end(lb, b[j1 - 1]) if j1 > 0 else 0):end(lb, b[j2 - 1])]
        if j1 < j2 and i2 < len(a) and j2 < len(b):
            gap, ngap = old[e:start(la, a[i2])], new[end(lb, b[j2 - 1]):start(lb, b[j2])]
            if gap != ngap and not gap.strip() and "\n" not in gap and not ngap.strip() and "\n" not in ngap:
                # the spacing up to the next token is the new text's (an inserted `x * (` keeps its space)
                e = start(la, a[i2])
                repl += ngap
        line = la.line_of(s)
        edits.append(Edit(s, e, repl, line, reason_at.get(line, default_reason)))
    return edits
