"""The message for an optional package of this distribution (an extra: OpenCV, scipy) that the
call needs and ``import`` did not give."""

from __future__ import annotations

__all__ = ["missing_extra"]


def missing_extra(need: str, package: str, module: str, error: ImportError, install: str) -> str:
    """``"<need>; <package> is not installed in this environment. Install it with: <install>"``,
    or, when ``module`` itself was found but did not import (a library it links against is
    missing, a broken install), ``"<package> is installed but does not import: <error>"`` in
    place of the middle part."""
    if getattr(error, "name", None) == module:
        reason = f"{package} is not installed in this environment"
    else:
        reason = f"{package} is installed but does not import: {type(error).__name__}: {error}"
    return f"{need}; {reason}. Install it with: {install}"
