"""OpenCV (``cv2``) for the image dataflows, augmentors and dataset readers, imported the first
time one of its functions is used.

OpenCV is an extra of this distribution (``pip install 'trainbus-dataflow[image]'``), not a
requirement: Keras imports ``cv2`` during every ``import tensorflow`` whenever it is importable,
about 0.12 s per process, whether or not the program touches an image. So ``from trainbus import
*``, ``import trainbus.dataflow.imgaug`` and building augmentors work without it, and the first
call that needs OpenCV raises :class:`OpenCVMissingError` saying what to install.

The flags augmentors take as default arguments (``interp=INTER_LINEAR``,
``border=BORDER_REPLICATE``) are OpenCV's own values, kept here so that defining those classes
needs no OpenCV; a test checks them against ``cv2``.
"""

from __future__ import annotations

from typing import Any

from ._extras import missing_extra

__all__ = ["cv2", "OpenCVMissingError", "INTER_NEAREST", "INTER_LINEAR", "INTER_CUBIC", "INTER_AREA",
           "INTER_LANCZOS4", "BORDER_CONSTANT", "BORDER_REPLICATE", "BORDER_REFLECT", "BORDER_WRAP",
           "BORDER_REFLECT_101"]

# OpenCV's interpolation flags (cv::InterpolationFlags) and border modes (cv::BorderTypes)
INTER_NEAREST = 0
INTER_LINEAR = 1
INTER_CUBIC = 2
INTER_AREA = 3
INTER_LANCZOS4 = 4
BORDER_CONSTANT = 0
BORDER_REPLICATE = 1
BORDER_REFLECT = 2
BORDER_WRAP = 3
BORDER_REFLECT_101 = 4

#: what installs OpenCV for this distribution
INSTALL = "pip install 'trainbus-dataflow[image]' (or: pip install opencv-python-headless)"


class OpenCVMissingError(ImportError):
    """OpenCV is needed for what was asked, and ``import cv2`` fails here."""


class _LazyOpenCV:
    """Stands for the ``cv2`` module: every attribute is the module's own, imported on first use."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy/pickle/inspect probing the stand-in: not OpenCV's business
            raise AttributeError(name)
        module = load()
        value = getattr(module, name)
        self.__dict__[name] = value  # found by plain attribute lookup from now on (per-image paths)
        return value

    def __repr__(self) -> str:
        return "<cv2, imported on first use>"


def load() -> Any:
    """The ``cv2`` module; :class:`OpenCVMissingError` saying what needs it and how to install
    it, when it cannot be imported."""
    try:
        import cv2 as module
    except ImportError as e:
        raise OpenCVMissingError(missing_extra(
            "trainbus.dataflow's image support (imgaug, ImageFromFile, the image datasets) needs OpenCV",
            "OpenCV (the cv2 module)", "cv2", e, INSTALL)) from e
    return module


cv2: Any = _LazyOpenCV()
