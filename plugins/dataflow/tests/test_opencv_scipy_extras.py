"""OpenCV and scipy are trainbus-dataflow's extras ``[image]`` and ``[mat]``: without them every
name imports and TensorFlow starts without them; what needs one says which extra to install,
in the process that asked or through a dataflow worker; with them the augmentors use OpenCV's own
flag values.

The environment the README sets up has neither in site-packages (``tools/bootstrap.sh`` keeps
them under ``<venv>/opt``), so a fresh interpreter here is an environment without them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

OPENCV_MISSING = ("trainbus.dataflow's image support (imgaug, ImageFromFile, the image datasets) needs OpenCV; "
                  "OpenCV (the cv2 module) is not installed in this environment. Install it with: "
                  "pip install 'trainbus-dataflow[image]' (or: pip install opencv-python-headless)")


def _fresh(code: str, pythonpath: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    """``code`` in a new interpreter of this environment, with nothing on PYTHONPATH (no
    ``<venv>/opt`` folder) unless ``pythonpath`` is given."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _last_json(r: subprocess.CompletedProcess):
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_tensorflow_and_every_name_start_without_opencv_and_scipy():
    r = _fresh("""
        import importlib.util, json, sys
        import tensorflow
        heavy = ("cv2", "scipy", "sklearn", "matplotlib")
        out = {"findable": [m for m in heavy if importlib.util.find_spec(m) is not None],
               "after_tf": [m for m in heavy if m in sys.modules]}
        ns = {}
        exec("from trainbus import *", ns)
        import trainbus.dataflow.imgaug, trainbus.dataflow.image, trainbus.dataflow.dataset
        out["names"] = [n for n in ("imgaug", "dataset", "AugmentImageComponent", "ImageFromFile") if n in ns]
        out["after_all"] = [m for m in heavy if m in sys.modules]
        print(json.dumps(out))
    """)
    out = _last_json(r)
    assert out == {"findable": [], "after_tf": [], "after_all": [],
                   "names": ["imgaug", "dataset", "AugmentImageComponent", "ImageFromFile"]}, (
        "the development environment must keep these packages out of site-packages (tools/bootstrap.sh): "
        "Keras imports each of them during every `import tensorflow` when it is importable")


def test_what_needs_opencv_or_scipy_says_which_extra_to_install(tmp_path):
    (tmp_path / "train_32x32.mat").write_bytes(b"MATLAB 5.0 MAT-file")  # found; scipy would read it
    r = _fresh(f"""
        import json
        import numpy as np
        from trainbus.dataflow import imgaug, ImageFromFile
        from trainbus.dataflow.dataset import SVHNDigit
        from trainbus_dataflow._opencv import OpenCVMissingError
        out = {{}}
        img = np.zeros((8, 8, 3), "uint8")
        calls = {{
            "resize": lambda: imgaug.Resize((4, 6)).augment(img),
            "rotation": lambda: imgaug.Rotation(10).augment(img),
            "grayscale": lambda: imgaug.Grayscale().augment(img),
            "image_from_file": lambda: ImageFromFile(["a.png"]),
            "svhn": lambda: SVHNDigit("train", data_dir={str(tmp_path)!r}),
        }}
        for key, call in calls.items():
            try:
                call()
                out[key] = "no error"
            except ImportError as e:
                out[key] = [type(e).__name__, isinstance(e, OpenCVMissingError), str(e)]
        # what needs neither still works (the list docs/imgaug.md gives)
        numpy_only = [imgaug.RandomCrop(4), imgaug.CenterCrop(4), imgaug.CenterPaste((10, 10)),
                      imgaug.RandomPaste((10, 10)), imgaug.GaussianNoise(), imgaug.SaltPepperNoise(),
                      imgaug.MapImage(lambda im: im[:5])]
        out["numpy_only"] = [list(a.augment(img).shape) for a in numpy_only]
        print(json.dumps(out))
    """)
    out = _last_json(r)
    for key in ("resize", "rotation", "grayscale", "image_from_file"):
        assert out[key] == ["OpenCVMissingError", True, OPENCV_MISSING], key
    assert out["svhn"][:2] == ["ImportError", False]
    assert out["svhn"][2] == ("SVHN reads MATLAB .mat files with scipy; scipy is not installed in this environment. "
                              "Install it with: pip install 'trainbus-dataflow[mat]' (or: pip install scipy)")
    assert out["numpy_only"] == [[4, 4, 3], [4, 4, 3], [10, 10, 3], [10, 10, 3], [8, 8, 3], [8, 8, 3], [5, 8, 3]]


def test_a_dataflow_worker_without_opencv_fails_the_loop_with_that_message():
    """The augmentation runs in a worker process: its error reaches the parent, which stops with
    it (no hang, no silent end of data)."""
    r = _fresh("""
        import numpy as np
        from trainbus.dataflow import AugmentImageComponent, DataFromList, MultiProcessRunnerZMQ, imgaug
        df = DataFromList([[np.zeros((8, 8, 3), "uint8"), 0]] * 4, shuffle=False)
        df = MultiProcessRunnerZMQ(AugmentImageComponent(df, [imgaug.Resize((4, 4))]), num_proc=1)
        df.reset_state()
        for dp in df:
            print("GOT A DATAPOINT")
    """, timeout=120)
    assert r.returncode != 0
    assert "GOT A DATAPOINT" not in r.stdout
    assert "pip install 'trainbus-dataflow[image]'" in r.stderr, r.stderr[-3000:]


def test_an_opencv_that_does_not_import_is_named_as_such(tmp_path):
    """Installed but broken (a shared library missing, as on a machine without libGL for the
    non-headless wheel): the message says so and keeps the reason."""
    (tmp_path / "cv2").mkdir()
    (tmp_path / "cv2" / "__init__.py").write_text(
        'raise ImportError("libGL.so.1: cannot open shared object file: No such file or directory")\n')
    r = _fresh("""
        import numpy as np
        from trainbus.dataflow import imgaug
        try:
            imgaug.Flip(horiz=True, prob=1.0).augment(np.zeros((4, 4, 3), "uint8"))
        except ImportError as e:
            print(type(e).__name__, "|", e, "|", repr(e.__cause__))
    """, pythonpath=str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    name, message, cause = r.stdout.strip().splitlines()[-1].split(" | ")
    assert name == "OpenCVMissingError"
    assert message == ("trainbus.dataflow's image support (imgaug, ImageFromFile, the image datasets) needs OpenCV; "
                       "OpenCV (the cv2 module) is installed but does not import: ImportError: libGL.so.1: cannot open "
                       "shared object file: No such file or directory. Install it with: "
                       "pip install 'trainbus-dataflow[image]' (or: pip install opencv-python-headless)")
    assert cause.startswith("ImportError('libGL.so.1")


def test_default_flags_are_opencvs_own_values(opencv_importable):
    import cv2

    from trainbus.dataflow import imgaug
    from trainbus_dataflow import _opencv

    for name in ("INTER_NEAREST", "INTER_LINEAR", "INTER_CUBIC", "INTER_AREA", "INTER_LANCZOS4", "BORDER_CONSTANT",
                 "BORDER_REPLICATE", "BORDER_REFLECT", "BORDER_WRAP", "BORDER_REFLECT_101"):
        assert getattr(_opencv, name) == getattr(cv2, name), name
    rot = imgaug.Rotation(10)
    assert (rot.interp, rot.border) == (cv2.INTER_LINEAR, cv2.BORDER_REPLICATE)
    # with OpenCV present the stand-in answers with OpenCV's own functions
    assert _opencv.cv2.resize is cv2.resize
    img = np.arange(64, dtype="uint8").reshape(8, 8)
    assert np.array_equal(imgaug.Resize((4, 4)).augment(img), cv2.resize(img, (4, 4), interpolation=cv2.INTER_LINEAR))
