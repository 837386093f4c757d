"""Make fake installed distributions (dist-info + module) in a directory for registry tests."""

from __future__ import annotations

import pathlib
import sys
import textwrap


def make_dist(root: pathlib.Path, name: str, version: str, entry_points: dict[str, dict[str, str]],
              modules: dict[str, str], keywords: str = "") -> pathlib.Path:
    root.mkdir(parents=True, exist_ok=True)
    info = root / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    if keywords:
        meta += f"Keywords: {keywords}\n"
    (info / "METADATA").write_text(meta)
    lines = []
    for group, eps in entry_points.items():
        lines.append(f"[{group}]")
        lines += [f"{k} = {v}" for k, v in eps.items()]
        lines.append("")
    (info / "entry_points.txt").write_text("\n".join(lines))
    for mod, src in modules.items():
        (root / f"{mod}.py").write_text(textwrap.dedent(src))
    return root


class on_path:
    """Context: put ``root`` on sys.path and reset trainbus's entry-point cache around it."""

    def __init__(self, root: pathlib.Path) -> None:
        self.root = str(root)

    def __enter__(self) -> None:
        from trainbus.bus import registry as _registry

        sys.path.insert(0, self.root)
        _registry.clear_cache()


    def __exit__(self, *exc: object) -> None:
        from trainbus.bus import registry as _registry

        sys.path.remove(self.root)
        _registry.clear_cache()
        for mod in [m for m, v in sys.modules.items() if getattr(v, "__file__", None) and str(v.__file__).startswith(self.root)]:
            del sys.modules[mod]
