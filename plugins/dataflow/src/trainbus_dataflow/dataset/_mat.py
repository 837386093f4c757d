"""Reading MATLAB ``.mat`` files with a clear error for a missing or damaged file."""

from __future__ import annotations

from typing import Any

from trainbus_dataflow._extras import missing_extra
from trainbus_dataflow.dataset._files import corrupt_file_error

__all__ = ["load_mat"]

#: what installs scipy for this distribution
MAT_INSTALL = "pip install 'trainbus-dataflow[mat]' (or: pip install scipy)"


def load_mat(dataset: str, path: str, url: str | None = None, **kwargs: Any) -> dict:
    """``scipy.io.loadmat(path)``; a file scipy cannot read raises ``DatasetFileCorruptError``."""
    try:
        import scipy.io
    except ImportError as e:
        # scipy is an extra of trainbus-dataflow: Keras imports it during every `import tensorflow`
        # when it is importable (about 0.25 s per process), so only the .mat readers ask for it
        raise ImportError(missing_extra(f"{dataset} reads MATLAB .mat files with scipy", "scipy", "scipy", e,
                                        MAT_INSTALL)) from e
    try:
        return scipy.io.loadmat(path, **kwargs)
    except FileNotFoundError:
        raise
    except Exception as e:  # scipy raises ValueError, TypeError, OSError, zlib.error ... on damaged files
        raise corrupt_file_error(dataset, path, f"scipy.io.loadmat cannot read it: {type(e).__name__}: {e}",
                                 url) from e
