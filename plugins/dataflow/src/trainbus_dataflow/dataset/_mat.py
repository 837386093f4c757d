"""Reading MATLAB ``.mat`` files with a clear error for a missing or damaged file."""

from __future__ import annotations

from typing import Any

from trainbus_dataflow.dataset._files import corrupt_file_error

__all__ = ["load_mat"]


def load_mat(dataset: str, path: str, url: str | None = None, **kwargs: Any) -> dict:
    """``scipy.io.loadmat(path)``; a file scipy cannot read raises ``DatasetFileCorruptError``."""
    try:
        import scipy.io
    except ImportError as e:  # pragma: no cover - scipy is a dependency of trainbus-dataflow
        raise ImportError(f"{dataset} reads MATLAB .mat files with scipy: pip install scipy") from e
    try:
        return scipy.io.loadmat(path, **kwargs)
    except FileNotFoundError:
        raise
    except Exception as e:  # scipy raises ValueError, TypeError, OSError, zlib.error ... on damaged files
        raise corrupt_file_error(dataset, path, f"scipy.io.loadmat cannot read it: {type(e).__name__}: {e}",
                                 url) from e
