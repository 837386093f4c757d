"""Finding, downloading and validating the files of the dataset readers.

Every reader looks for its files under ``get_dataset_path(<dataset dir>)`` unless given a directory,
downloads a missing file when the network is reachable, and otherwise raises
:class:`DatasetFileNotFoundError` saying which URL to fetch and where to put it. A file that is
present but cannot be read completely raises :class:`DatasetFileCorruptError` naming the file and
how to get a good copy.
"""

from __future__ import annotations

import os
import tarfile
from typing import Any, Iterable, Sequence

import numpy as np

from trainbus.utils import logger
from trainbus.utils.fs import DATASET_ENV_VARS, DownloadError, download

__all__ = ["DatasetFileNotFoundError", "DatasetFileCorruptError", "fetch_file", "corrupt_file_error",
           "extract_tarball", "check_listed_images", "pass_order"]


class DatasetFileNotFoundError(FileNotFoundError):
    """A dataset file is missing and could not be downloaded."""


class DatasetFileCorruptError(ValueError):
    """A dataset file is present but truncated or not in the expected format."""


def _where_hint(path: str) -> str:
    envs = " or ".join("$" + v for v in DATASET_ENV_VARS)
    return (f"Datasets are looked for under {envs} (default ~/tensorpack_data), or in the directory passed to "
            f"the reader; {path} is where this one must be.")


def fetch_file(dataset: str, path: str, urls: str | Sequence[str], expect_size: int | None = None) -> str:
    """Return ``path`` when it is a file; otherwise download it from the first of ``urls`` that works.

    Raises:
        DatasetFileNotFoundError: when no URL could be downloaded. The message names the file, the
            URLs tried with their errors, and where to put the file by hand.
    """
    if os.path.isfile(path):
        return path
    if isinstance(urls, str):
        urls = [urls]
    dirname, filename = os.path.split(path)
    errors = []
    for url in urls:
        logger.info(f"{dataset}: {path} not found; downloading {url} ...")
        try:
            return download(url, dirname, filename=filename, expect_size=expect_size)
        except DownloadError as e:
            reason = str(e).split(": ", 1)[-1].split(". Download it by hand")[0]
            errors.append(f"{url}: {reason}")
    tried = "; ".join(errors)
    raise DatasetFileNotFoundError(
        f"{dataset}: the file {path} is missing and could not be downloaded ({tried}). Download "
        f"{urls[0]} by hand and put it at {path}. {_where_hint(path)}")


def corrupt_file_error(dataset: str, path: str, what: str, url: str | None = None) -> DatasetFileCorruptError:
    """The error for a present but unreadable file (truncated download, wrong file)."""
    how = (f"Delete it and run again to download it anew from {url}, or download {url} by hand and put it at "
           f"{path}." if url else f"Replace it with a complete copy at {path}.")
    return DatasetFileCorruptError(f"{dataset}: the file {path} is truncated or corrupt ({what}). {how}")


def extract_tarball(dataset: str, tarball: str, dest: str, url: str | None = None) -> None:
    """Extract the ``.tar.gz`` ``tarball`` into ``dest`` (regular files and directories only)."""
    try:
        with tarfile.open(tarball, "r:*") as tf:
            try:
                tf.extractall(dest, filter="data")
            except TypeError:  # Python < 3.10.12 has no extraction filters
                tf.extractall(dest)
    except (tarfile.TarError, EOFError, OSError) as e:
        raise corrupt_file_error(dataset, tarball, f"cannot extract it: {e}", url) from e


def check_listed_images(dataset: str, paths: Iterable[str], listed_in: str, advice: str, first: int = 10) -> None:
    """Raise :class:`DatasetFileNotFoundError` for the first missing file among the ``first`` of
    ``paths``, saying it was listed in ``listed_in`` and ending with ``advice``: a cheap check that an
    image directory matches its list before a long pass starts."""
    for k, path in enumerate(paths):
        if k >= first:
            return
        if not os.path.isfile(path):
            raise DatasetFileNotFoundError(f"{dataset}: the image {path}, listed in {listed_in}, is missing. {advice}")


def pass_order(flow: Any) -> np.ndarray:
    """The indices ``0 .. len(flow) - 1`` in the order one pass of a reader visits them: shuffled
    with ``flow.rng`` when ``flow.shuffle`` is set, in file order otherwise."""
    idxs = np.arange(len(flow))
    if flow.shuffle:
        flow.rng.shuffle(idxs)
    return idxs
