"""Every hook of the bus is documented in docs/hooks.md with its exact signature."""

import inspect
import pathlib

from trainbus.bus import hookspecs

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "hooks.md"


def all_hooks():
    for spec in hookspecs.ALL_SPECS:
        for name, fn in vars(spec).items():
            if callable(fn) and not name.startswith("_"):
                yield name, fn


def test_every_hook_is_documented_with_its_signature():
    text = DOC.read_text()
    missing = []
    for name, fn in all_hooks():
        args = [p for p in inspect.signature(fn).parameters if p != "self"]
        sig = f"{name}({', '.join(args)})"
        if sig not in text:
            missing.append(sig)
    assert not missing, f"docs/hooks.md lacks: {missing}"


def test_hook_lists_match_specs():
    names = {n for n, _ in all_hooks()}
    assert names == set(hookspecs.LOOP_HOOKS) | set(hookspecs.MONITOR_HOOKS) | set(hookspecs.CONTRIBUTION_HOOKS)
