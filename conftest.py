"""Fixtures shared by the whole suite (tests/ and plugins/*/tests/)."""

from __future__ import annotations

import atexit
import fcntl
import os
import shutil
import sys
import tempfile

import pytest

# test support modules (fake distributions, ...) import as top-level modules
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests", "_support"))
from optdeps import opt_packages  # noqa: E402

# The suite starts hundreds of Python processes: each would compile every trainbus module it
# imports again where the environment forbids bytecode caches (PYTHONDONTWRITEBYTECODE, ~0.4 s a
# process). The caches go to __pycache__ as usual (ignored by git).
if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
    sys.dont_write_bytecode = False

# The entry-point listing kept between processes (trainbus.bus.listcache) goes to a folder of this
# run, inherited by the xdist workers and the processes tests start, not to the user's ~/.cache:
# every run starts without one and writes and reads it as a user's processes do.
if "TRAINBUS_CACHE_DIR" not in os.environ:
    os.environ["TRAINBUS_CACHE_DIR"] = tempfile.mkdtemp(prefix="trainbus-test-cache-")
    atexit.register(shutil.rmtree, os.environ["TRAINBUS_CACHE_DIR"], True)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# TensorFlow turns its oneDNN kernels on by itself only on CPUs with AVX-512 features; the NCHW
# layer tests (conv, pooling, batch norm in NCHW on the CPU) need them on every x86 machine. Set
# before TensorFlow is imported, and inherited by the processes the tests start.
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):
        # xdist would order the files by their number of tests; ours go heaviest first (below)
        config.option.loadscopereorder = False
    config.addinivalue_line("markers", "cluster: starts several processes talking over local ports "
                                       "(TF servers, horovodrun); such tests run one at a time across xdist workers")


@pytest.fixture
def matplotlib_importable(monkeypatch):
    """matplotlib on ``sys.path`` (and on ``PYTHONPATH`` for the processes the test starts), for
    the tests of ``trainbus show --plot`` and ``utils.viz.intensity_to_rgb``. Returns the folder."""
    where = _opt_on_path(monkeypatch, "plot")[0]
    import matplotlib  # noqa: F401 - fails here, naming the folder, if the install is broken

    return where


def _opt_on_path(monkeypatch, *names: str) -> list[str]:
    """Put the folders of ``<venv>/opt/<name>`` on ``sys.path`` and on ``PYTHONPATH`` (for the
    processes the test starts). They are outside site-packages because Keras imports what they
    hold during every ``import tensorflow`` when it is importable."""
    folders = [opt_packages(name) for name in names]
    for where in reversed(folders):
        monkeypatch.syspath_prepend(where)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([*folders, *filter(None, [os.environ.get("PYTHONPATH")])]))
    return folders


@pytest.fixture
def opencv_importable(monkeypatch):
    """OpenCV (trainbus-dataflow's extra ``[image]``) for a test of imgaug, the image dataflows or
    the image datasets. Returns its folder."""
    where = _opt_on_path(monkeypatch, "image")[0]
    import cv2  # noqa: F401 - fails here, naming the folder, if the install is broken

    return where


@pytest.fixture
def scipy_importable(monkeypatch):
    """scipy (trainbus-dataflow's extra ``[mat]``) for a test of the .mat readers. Returns its folder."""
    where = _opt_on_path(monkeypatch, "mat")[0]
    import scipy.io  # noqa: F401

    return where


@pytest.fixture()
def logdir(tmp_path):
    """A fresh trainbus log directory (``logger.set_logger_dir``), reset after the test."""
    from trainbus.utils import logger

    d = tmp_path / "log"
    logger.set_logger_dir(str(d), action="k")
    logger.commit_logger_dir()  # created now: tests may put files there before training
    yield d
    logger._reset_for_tests()


@pytest.fixture()
def tb_log():
    """Records of the 'trainbus' logger (it does not propagate to the root logger)."""
    import logging

    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Collect(level=logging.DEBUG)
    lg = logging.getLogger("trainbus")
    lg.addHandler(handler)
    yield records
    lg.removeHandler(handler)


@pytest.fixture(autouse=True)
def _reset_logger_dir():
    yield
    from trainbus.utils import logger

    logger._reset_for_tests()


@pytest.fixture(autouse=True)
def _process_stays_eager(request):
    """A test must leave TensorFlow as it found it: a test that switches the whole worker to graph
    mode (``disable_eager_execution``) or leaves a graph entered makes every later training in that
    worker share one graph. This names the test that did it instead of the hundreds that fail after."""
    tf = sys.modules.get("tensorflow")
    eager_before = tf.executing_eagerly() if tf is not None else True
    yield
    tf = sys.modules.get("tensorflow")
    if tf is not None and eager_before and not tf.executing_eagerly():
        pytest.fail(f"{request.node.nodeid} left TensorFlow in graph mode (disable_eager_execution or an entered "
                    "graph): run such code in a subprocess", pytrace=False)


@pytest.fixture(autouse=True)
def _one_cluster_at_a_time(request):
    """Tests marked ``cluster`` pick free ports by binding to port 0 and releasing them; two
    such clusters starting at once on one machine can take each other's ports, so they run
    one at a time (a lock file shared by the xdist workers)."""
    if request.node.get_closest_marker("cluster") is None:
        yield
        return
    path = os.path.join(tempfile.gettempdir(), f"trainbus-test-cluster-{os.getuid()}.lock")
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _suite_weights() -> dict:
    import json

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests", "suite_weights.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Heaviest test files first (seconds from tests/suite_weights.json, written by
    tools/suite_weights.py): with ``--dist loadfile`` the xdist workers take files in this order,
    so the long ones run while both workers are busy instead of last, alone."""
    weights = _suite_weights()
    if not weights:
        return
    files: dict[str, list] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)
    heavy_first = sorted(files, key=lambda f: -weights.get(f, 0.0))
    # Cluster tests wait for each other (the lock below): between two cluster files come other
    # files of about the first one's weight, so that the other worker has work meanwhile.
    is_cluster = {f: any(i.get_closest_marker("cluster") for i in files[f]) for f in heavy_first}
    clustered = [f for f in heavy_first if is_cluster[f]]
    others = [f for f in heavy_first if not is_cluster[f]]
    order: list[str] = []
    while clustered or others:
        budget = float("inf")
        if clustered:
            order.append(clustered.pop(0))
            budget = weights.get(order[-1], 0.0)
        while others and budget > 0:
            order.append(others.pop(0))
            budget -= weights.get(order[-1], 0.0) or 1.0
    items[:] = [i for f in order for i in files[f]]
