"""``tfutils.model_utils``, ``tfutils.symbolic_functions``, ``tfutils.collect_env``: values."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import tensorflow as tf
import zygote  # tests/_support

import trainbus
import trainbus.tfutils as tfutils

tf1 = tf.compat.v1


@pytest.fixture()
def graph():
    with tf.Graph().as_default() as g:
        yield g


# ------------------------------------------------------------------ model_utils
def test_describe_trainable_vars_table_and_totals(graph, tb_log):
    from trainbus.tfutils.model_utils import describe_trainable_vars

    tf1.get_variable("conv0/W", [3, 3, 1, 8])
    tf1.get_variable("conv0/b", [8])
    tf1.get_variable("fc/W", [100, 10])
    tf1.get_variable("tower1/fc/W", [100, 10])  # a data-parallel copy: skipped
    tf1.get_variable("not_trained", [1000], trainable=False)
    text = describe_trainable_vars()
    lines = text.splitlines()
    assert lines[0] == "List of Trainable Variables:"
    assert lines[1].split() == ["name", "shape", "#elements"]  # one device, all float32: no such columns
    assert [ln.split()[0] for ln in lines[3:6]] == ["conv0/W", "conv0/b", "fc/W"]
    assert lines[3].split()[-1] == "72" and lines[5].split()[-1] == "1000"
    assert "[3, 3, 1, 8]" in lines[3]
    assert lines[6:] == ["Number of trainable variables: 3",
                         "Number of parameters (elements): 1080",
                         f"Storage space needed for all trainable variables: {1080 * 4 / 1024 ** 2:.02f}MB"]
    assert text in [r.getMessage() for r in tb_log if r.levelname == "INFO"]


def test_describe_trainable_vars_shows_dtype_when_mixed(graph):
    from trainbus.tfutils.model_utils import describe_trainable_vars

    tf1.get_variable("a", [2, 2], dtype=tf.float64)
    tf1.get_variable("b", [3], dtype=tf.float32)
    lines = describe_trainable_vars().splitlines()
    assert lines[1].split() == ["name", "shape", "#elements", "dtype"]
    assert lines[3].split() == ["a", "[2,", "2]", "4", "float64"]
    assert lines[-1] == f"Storage space needed for all trainable variables: {(4 * 8 + 3 * 4) / 1024 ** 2:.02f}MB"


def test_describe_trainable_vars_without_variables_warns(graph, tb_log):
    from trainbus.tfutils.model_utils import describe_trainable_vars

    assert describe_trainable_vars() is None
    assert any("no trainable variables" in r.getMessage() for r in tb_log if r.levelname == "WARNING")


def test_get_shape_str(graph):
    from trainbus.tfutils.model_utils import get_shape_str

    x = tf1.placeholder(tf.float32, [None, 28, 28, 1])
    w = tf1.get_variable("W", [5, 3])
    assert get_shape_str(x) == "[?, 28, 28, 1]"
    assert get_shape_str([x, w]) == "[?, 28, 28, 1], [5, 3]"
    assert get_shape_str(tf1.placeholder(tf.float32)) == "<unknown>"
    with pytest.raises(TypeError, match="get_shape_str: expected a tf.Tensor.*got 3 of type int"):
        get_shape_str([x, 3])


def test_format_table_aligns_columns():
    from trainbus.tfutils.model_utils import format_table

    assert format_table([["a", 1], ["bbb", 100]], ["k", "n"]).splitlines() == ["k    n", "---  ---", "a      1",
                                                                               "bbb  100"]


# ------------------------------------------------------------------ symbolic_functions
def test_rms_and_psnr_values(graph):
    from trainbus.tfutils import symbolic_functions as symbf

    with tf1.name_scope("scope"):
        x = tf.constant([[3.0, 4.0], [0.0, 0.0]], name="x")
        r = symbf.rms(x)
    r2 = symbf.rms(x, name="my_rms")
    pred = tf.constant([0.0, 0.5, 1.0])
    gt = tf.constant([0.0, 0.0, 1.0])
    p = symbf.psnr(pred, gt, maxp=1.0)
    p_none = symbf.psnr(pred, gt, name="psnr_raw")
    with tf1.Session() as sess:
        rv, rv2, pv, pnone = sess.run([r, r2, p, p_none])
    assert r.op.name == "scope/x/rms" and r2.op.name == "my_rms"
    assert rv == pytest.approx(math.sqrt((9 + 16) / 4)) and rv2 == rv
    mse = 0.25 / 3
    assert pv == pytest.approx(-10 * math.log10(mse), rel=1e-5)
    assert pnone == pytest.approx(-10 * math.log10(mse), rel=1e-5)
    assert p.op.name == "psnr"


def test_psnr_with_peak_255(graph):
    from trainbus.tfutils.symbolic_functions import psnr

    a = tf.constant(np.full((2, 2), 10.0, dtype="float32"))
    b = tf.constant(np.full((2, 2), 12.0, dtype="float32"))
    with tf1.Session() as sess:
        v = sess.run(psnr(a, b, maxp=255))
    assert v == pytest.approx(20 * math.log10(255) - 10 * math.log10(4.0), rel=1e-5)


def test_print_stat_prints_shape_mean_rms_and_passes_the_value(graph, tmp_path):
    from trainbus.tfutils.symbolic_functions import print_stat

    out = tmp_path / "printed.txt"
    x = tf.constant([[1.0, 2.0], [3.0, 4.0]], name="x")
    y = print_stat(x, output_stream=f"file://{out}")
    z = print_stat(tf.constant([1, 2, 3], name="ints"), message="ints here", output_stream=f"file://{out}")
    with tf1.Session() as sess:
        yv = sess.run(y)
        sess.run(z)
    np.testing.assert_array_equal(yv, [[1, 2], [3, 4]])
    assert y.op.name == "print_x"
    rms = math.sqrt(30 / 4)
    lines = out.read_text().splitlines()
    head = lines[0].split()
    assert head[:4] == ["x", "[2", "2]", "2.5"] and float(head[4]) == pytest.approx(rms, rel=1e-6)
    assert lines[0].endswith(" [[1 2]")
    assert lines[1] == " [3 4]]"
    assert lines[2] == "ints here [3] 2 [1 2 3]"  # integers: no RMS


# ------------------------------------------------------------------ collect_env
def test_collect_env_info_rows():
    from trainbus.tfutils.collect_env import collect_env_rows

    rows = dict(collect_env_rows())
    assert rows["Python"].startswith(".".join(map(str, sys.version_info[:3])))
    assert rows["Numpy"] == np.__version__
    assert rows["TensorFlow"].startswith(tf.__version__ + "/")
    assert rows["trainbus"].startswith(trainbus.__version__ + " @")
    assert rows["TF CUDA support"] in ("True", "False")
    assert rows["CPU Count"] == str(__import__("os").cpu_count())
    assert rows["plugin trainbus-param"].startswith("0.") and "bundle standard" in rows["plugin trainbus-param"]
    assert rows["plugin trainbus-monitor-json"].split()[0] == __import__("importlib.metadata").metadata.version(
        "trainbus-monitor-json")
    # no GPU here: reported, not raised
    if not tf.config.list_physical_devices("GPU"):
        assert rows["TF visible GPUs"] == "0"


def test_collect_env_info_is_a_table_and_exported():
    from trainbus.tfutils.collect_env import collect_env_info, collect_env_rows

    assert tfutils.collect_env_info is collect_env_info
    assert tfutils.model_utils.describe_trainable_vars.__module__ == "trainbus.tfutils.model_utils"
    assert tfutils.symbolic_functions.rms.__module__ == "trainbus.tfutils.symbolic_functions"
    text = collect_env_info()
    lines = text.splitlines()
    assert len(lines) == len(collect_env_rows())
    width = lines[0].index("linux") if "linux" in lines[0] else None
    assert lines[0].startswith("sys.platform")
    if width is not None:  # the values start in one column
        assert all(len(ln) > width and ln[width - 2:width] == "  " for ln in lines)


def test_collect_env_runs_as_a_module():
    # forked from the worker's zygote (tests/_support/zygote.py): a process of its own, TensorFlow imported
    out = zygote.run([sys.executable, "-m", "trainbus.tfutils.collect_env"], timeout=120)
    assert out.returncode == 0, out.stderr
    assert "TensorFlow" in out.stdout and "plugin trainbus-param" in out.stdout
