"""MkDocs hook (mkdocs.yml ``hooks:``): complete the nav from the pages that exist.

* an entry naming a page that does not exist is dropped (pages are written in parallel);
* an entry with ``*`` is replaced by the matching pages, sorted;
* every page not listed anywhere goes under "More".
"""

from __future__ import annotations

import fnmatch
import pathlib
from typing import Any


def _pages(docs: pathlib.Path) -> list[str]:
    return sorted(p.relative_to(docs).as_posix() for p in docs.rglob("*.md"))


def _expand(items: list[Any], pages: list[str], used: set[str]) -> list[Any]:
    out: list[Any] = []
    for item in items:
        if isinstance(item, dict):
            (title, value), = item.items()
            if isinstance(value, list):
                sub = _expand(value, pages, used)
                if sub:
                    out.append({title: sub})
            elif value in pages or "://" in str(value):
                used.add(value)
                out.append(item)
        elif isinstance(item, str):
            matches = [p for p in pages if fnmatch.fnmatch(p, item)] if "*" in item else [item] * (item in pages)
            for m in matches:
                if m not in used:
                    used.add(m)
                    out.append(m)
    return out


def on_config(config: Any, **kwargs: Any) -> Any:
    docs = pathlib.Path(config["docs_dir"])
    pages = _pages(docs)
    used: set[str] = set()
    nav = _expand(list(config["nav"] or []), pages, used)
    rest = [p for p in pages if p not in used]
    if rest:
        nav.append({"More": rest})
    config["nav"] = nav
    return config
