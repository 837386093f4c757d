"""Debugging aid: print every Python function call."""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

__all__: list[str] = []


def enable_call_trace() -> None:
    """From now on, print ``Call to `f` on line file:line from caller_file:line`` for every Python function call
    of this thread (calls named ``write`` and ``print`` are skipped). ``sys.settrace(None)`` stops it."""
    def tracer(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return None
        code = frame.f_code
        if code.co_name in ("write", "print"):
            return None
        caller = frame.f_back
        if caller is not None:
            print(f"Call to `{code.co_name}` on line {code.co_filename}:{frame.f_lineno} from "
                  f"{caller.f_code.co_filename}:{caller.f_lineno}")
        return None

    sys.settrace(tracer)
