"""Common helpers re-exported by ``trainbus.utils``: environment changes, RNGs, progress bars, run-once checks."""

from __future__ import annotations

import inspect
import os
import re
import sys
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Iterator

import numpy as np

from trainbus.utils import logger

__all__ = ["change_env", "get_rng", "fix_rng_seed", "get_tqdm", "execute_only_once", "humanize_time_delta"]


def humanize_time_delta(sec: float) -> str:
    """A duration for humans: ``"1 second"``, ``"1 minute 27 seconds"``, ``"0.01 seconds"``, ``"1 day 1 second"``.

    Below a minute the seconds keep up to 3 significant digits; from a minute on, whole seconds are shown and
    zero units are left out. A negative duration is logged as a warning and printed as is.
    """
    if sec < 0:
        logger.warning("humanize_time_delta() got a negative number of seconds!")
        return f"{sec:.3g} seconds"
    if sec == 0:
        return "0 second"
    whole = int(sec)
    vals = [whole // 86400, whole // 3600 % 24, whole // 60 % 60, whole % 60]
    if sec < 60:
        vals[-1] = sec
    parts = [f"{v:.3g} {unit}{'s' if v > 1 else ''}" for v, unit in zip(vals, ["day", "hour", "minute", "second"])
             if v > 0]
    return " ".join(parts)


@contextmanager
def change_env(name: str, val: str | None) -> Iterator[None]:
    """Context: the environment variable ``name`` is ``val`` inside (unset if ``val`` is None) and gets its
    previous value (or unset state) back afterwards, also when the block raises."""
    old = os.environ.get(name)
    if val is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = str(val)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


_RNG_SEED: int | None = None


def fix_rng_seed(seed: int) -> None:
    """Make every later :func:`get_rng` return ``np.random.RandomState(seed)`` (for reproducible data pipelines).

    TensorFlow's own seed is separate: also call ``tf.compat.v1.set_random_seed(seed)`` for the graph.
    """
    global _RNG_SEED
    _RNG_SEED = int(seed)


def get_rng(obj: Any = None) -> np.random.RandomState:
    """A ``np.random.RandomState`` seeded from the time, the process id and ``id(obj)`` (or the seed given to
    :func:`fix_rng_seed`). Each DataFlow / worker process gets a different stream this way."""
    if _RNG_SEED is not None:
        return np.random.RandomState(_RNG_SEED)
    seed = (id(obj) + os.getpid() + int(datetime.now().strftime("%Y%m%d%H%M%S%f"))) % 4294967295
    return np.random.RandomState(seed)


_EXECUTE_HISTORY: set[tuple[str, int]] = set()


def execute_only_once() -> bool:
    """True the first time it is called from a given line of code, False every later time from that line.

    ``if execute_only_once(): logger.info("shown once")``
    """
    f = inspect.currentframe().f_back  # type: ignore[union-attr]
    ident = (f.f_code.co_filename, f.f_lineno)  # type: ignore[union-attr]
    if ident in _EXECUTE_HISTORY:
        return False
    _EXECUTE_HISTORY.add(ident)
    return True


def _pick_tqdm_interval(file: Any) -> float:
    """Seconds between progress-bar refreshes: often on a terminal, rarely in a log file or a batch job."""
    try:
        isatty = bool(file.isatty())
    except (AttributeError, ValueError):
        isatty = False
    if not isatty:
        try:
            from ipykernel import iostream  # a notebook is interactive although it is not a tty

            isatty = isinstance(file, iostream.OutStream)
        except ImportError:
            pass
    if isatty:
        return 0.5
    if "SLURM_JOB_ID" in os.environ:
        return 60 if int(os.environ.get("SLURM_JOB_NUM_NODES", 1)) > 1 else 15
    if "OMPI_COMM_WORLD_SIZE" in os.environ:
        return 60
    return 180


def get_tqdm_kwargs(**kwargs: Any) -> dict[str, Any]:
    """The keyword arguments trainbus passes to ``tqdm`` (ASCII bar, smoothing, refresh interval), updated by
    ``kwargs``. ``TRAINBUS_PROGRESS_REFRESH`` (or ``TENSORPACK_PROGRESS_REFRESH``) sets the refresh interval in
    seconds; otherwise it is 0.5 s on a terminal and up to 180 s when the output goes to a file."""
    default: dict[str, Any] = dict(
        smoothing=0.5,
        dynamic_ncols=True,
        ascii=True,
        bar_format="{l_bar}{bar}|{n_fmt}/{total_fmt}[{elapsed}<{remaining},{rate_noinv_fmt}]",
    )
    env = os.environ.get("TRAINBUS_PROGRESS_REFRESH", os.environ.get("TENSORPACK_PROGRESS_REFRESH"))
    if env is not None:
        try:
            interval = float(env)
        except ValueError:
            raise ValueError(f"TRAINBUS_PROGRESS_REFRESH={env!r} is not a number of seconds") from None
    else:
        interval = _pick_tqdm_interval(kwargs.get("file", sys.stderr))
    default["mininterval"] = interval
    default.update(kwargs)
    return default


def get_tqdm(*args: Any, **kwargs: Any) -> Any:
    """``tqdm.tqdm(*args, **kwargs)`` with trainbus' defaults (:func:`get_tqdm_kwargs`)."""
    from tqdm import tqdm

    return tqdm(*args, **get_tqdm_kwargs(**kwargs))


def find_library_full_path(name: str) -> str | None:
    """The full path of the shared library ``lib<name>`` (like ``ctypes.util.find_library``, which often
    returns only a file name). On Linux, a library already loaded in this process wins (from
    ``/proc/self/maps``), then ``ld``'s search (``LD_LIBRARY_PATH``), then ``ldconfig -p``."""
    from ctypes.util import find_library

    if sys.platform == "darwin":
        return find_library(name)
    if not sys.platform.startswith("linux"):
        return find_library(name)
    from trainbus.utils.concurrency import subproc_call

    def from_maps() -> str | None:
        try:
            with open(f"/proc/{os.getpid()}/maps") as f:
                for line in f:
                    path = line.strip().split(" ")[-1]
                    if f"lib{name}.so" in os.path.basename(path) and os.path.isfile(path):
                        return os.path.realpath(path)
        except OSError:
            pass
        return None

    def from_ld() -> str | None:
        cmd = f"ld -t -l{name} -o {os.devnull}"
        for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
            if d:
                cmd += f" -L {d}"
        out, _ = subproc_call(cmd + " 2>&1 || true")
        text = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
        m = re.search(r"[^\(\)\s]*lib%s\.[^\(\)\s]*" % re.escape(name), text)
        if m and os.path.isfile(m.group(0)):
            return os.path.realpath(m.group(0))
        return None

    def from_ldconfig() -> str | None:
        with change_env("LC_ALL", "C"), change_env("LANG", "C"):
            out, ret = subproc_call("ldconfig -p")
        if ret != 0:
            return None
        text = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
        m = re.search(r"\s+(lib%s\.[^\s]+)\s+\(.*=>\s+(.*)" % re.escape(name), text)
        return os.path.realpath(m.group(2)) if m else None

    return from_maps() or from_ld() or from_ldconfig() or find_library(name)
