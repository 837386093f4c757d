"""trainbus.utils: argtools, utils, gpu, nvml, stats, timer, palette, develop, viz, and the lazy package."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from trainbus.utils import argtools, develop, gpu, logger, palette, stats, timer, utils, viz
from trainbus.utils.argtools import (call_only_once, graph_memoized, log_once, map_arg, memoized,
                                     memoized_ignoreargs, memoized_method, shape2d, shape4d)


@pytest.fixture
def logged(monkeypatch):
    """Messages sent to logger.info / logger.warning, in order."""
    out: list[tuple[str, str]] = []
    monkeypatch.setattr(logger, "info", lambda m: out.append(("info", m)))
    monkeypatch.setattr(logger, "warning", lambda m: out.append(("warning", m)))
    monkeypatch.setattr(logger, "warn", lambda m: out.append(("warning", m)))
    return out


# ---- the package -----------------------------------------------------------------------------------------------

def test_package_is_lazy_and_exposes_utils_names():
    code = ("import sys, time\nt = time.perf_counter()\nimport trainbus.utils as u\n"
            "assert 'numpy' not in sys.modules and 'tensorflow' not in sys.modules, 'eager import'\n"
            "assert sorted(u.__all__) == sorted(['change_env', 'get_rng', 'fix_rng_seed', 'get_tqdm', "
            "'execute_only_once', 'humanize_time_delta', 'logger'])\n"
            "from trainbus.utils import get_rng, gpu\n"
            "import trainbus.utils.utils as uu\n"
            "assert get_rng is uu.get_rng and u.viz.stack_patches and gpu.get_num_gpu is u.gpu.get_num_gpu\n"
            "print('OK')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "OK", out.stderr
    import trainbus.utils as u

    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        u.nothing


# ---- argtools --------------------------------------------------------------------------------------------------

def test_memoized_counts_calls():
    calls = []

    @memoized
    def f(x, y=1):
        calls.append((x, y))
        return x + y

    assert [f(1), f(1), f(2), f(1, y=1), f(1, 1)] == [2, 2, 3, 2, 2]
    assert calls == [(1, 1), (2, 1), (1, 1), (1, 1)]  # lru_cache keys differ by how arguments are passed


def test_memoized_method_is_per_instance():
    calls = []

    class A:
        def __init__(self, k):
            self.k = k

        @memoized_method
        def f(self, x, scale=1):
            calls.append((self.k, x, scale))
            return None if x == 0 else self.k * x * scale

    a, b = A(2), A(3)
    assert [a.f(1), a.f(1), b.f(1), a.f(1, scale=2), a.f(1, scale=2), a.f(0), a.f(0)] == [2, 2, 3, 4, 4, None, None]
    assert calls == [(2, 1, 1), (3, 1, 1), (2, 1, 2), (2, 0, 1)]


def test_memoized_ignoreargs():
    calls = []

    @memoized_ignoreargs
    def f(x):
        calls.append(x)
        return x * 10

    assert f(1) == 10 and f(2) == 10 and calls == [1]


def test_graph_memoized_one_cache_per_graph():
    from trainbus.utils import lazytf as _tf

    tf1 = _tf.tf1()
    calls = []

    @graph_memoized
    def var(name):
        calls.append(name)
        return tf1.get_variable(name, shape=[], initializer=tf1.zeros_initializer())

    g1, g2 = tf1.Graph(), tf1.Graph()
    with g1.as_default():
        v1 = var("v")
        assert var("v") is v1
    with g2.as_default():
        v2 = var("v")
    assert v1.graph is g1 and v2.graph is g2 and calls == ["v", "v"]


def test_shape2d_shape4d():
    assert shape2d(3) == [3, 3] and shape2d((2, 5)) == [2, 5] and shape2d([4, 1]) == [4, 1]
    assert shape4d(3) == [1, 3, 3, 1] and shape4d((2, 5), "NCHW") == [1, 1, 2, 5]
    assert shape4d([2, 5], "channels_first") == [1, 1, 2, 5] and shape4d(2, "channels_last") == [1, 2, 2, 1]
    with pytest.raises(ValueError, match="length 3"):
        shape2d((1, 2, 3))
    with pytest.raises(TypeError, match="str"):
        shape2d("3")
    with pytest.raises(ValueError, match="unknown data_format 'NWHC'"):
        shape4d(3, "NWHC")


def test_map_arg():
    @map_arg(k=shape2d, s=int)
    def f(x, k, s=1):
        return x, k, s

    assert f(0, 3) == (0, [3, 3], 1)
    assert f(0, k=(1, 2), s="4") == (0, [1, 2], 4)
    with pytest.raises(TypeError, match="no argument named nope"):
        map_arg(nope=int)(f.__wrapped__)


def test_log_once(logged):
    log_once("first message xyz", "warn")
    log_once("first message xyz", "warn")
    log_once("another xyz")
    assert logged == [("warning", "first message xyz"), ("info", "another xyz")]


def test_call_only_once():
    class A:
        def __init__(self):
            self._p = 0

        @call_only_once
        def f(self, x):
            return x * 2

        @property
        def p(self):
            return self._p

        @p.setter
        @call_only_once
        def p(self, v):
            self._p = v

    a, b = A(), A()
    assert a.f(2) == 4 and b.f(3) == 6
    with pytest.raises(RuntimeError, match=r"Method A\.f can only be called once per object"):
        a.f(1)
    a.p = 5
    assert a.p == 5
    with pytest.raises(RuntimeError, match=r"Property A\.p can only be called once"):
        a.p = 6


# ---- utils.utils -----------------------------------------------------------------------------------------------

def test_change_env_sets_and_restores():
    os.environ.pop("TB_TEST_VAR", None)
    with utils.change_env("TB_TEST_VAR", "a"):
        assert os.environ["TB_TEST_VAR"] == "a"
        with utils.change_env("TB_TEST_VAR", None):
            assert "TB_TEST_VAR" not in os.environ
        assert os.environ["TB_TEST_VAR"] == "a"
    assert "TB_TEST_VAR" not in os.environ
    with pytest.raises(KeyError):
        with utils.change_env("TB_TEST_VAR", "b"):
            raise KeyError
    assert "TB_TEST_VAR" not in os.environ


def test_rng_seed(monkeypatch):
    monkeypatch.setattr(utils, "_RNG_SEED", None)
    a, b = utils.get_rng(object()), utils.get_rng(object())
    assert isinstance(a, np.random.RandomState)
    assert a.randint(1 << 30, size=4).tolist() != b.randint(1 << 30, size=4).tolist()
    utils.fix_rng_seed(42)
    assert utils.get_rng(1).rand(3).tolist() == np.random.RandomState(42).rand(3).tolist()


def test_execute_only_once():
    res = [utils.execute_only_once() for _ in range(3)]
    other = utils.execute_only_once()
    assert res == [True, False, False] and other is True


def test_humanize_time_delta():
    h = utils.humanize_time_delta
    assert h(0) == "0 second"
    assert h(1) == "1 second"
    assert h(0.01) == "0.01 second" and h(2.5) == "2.5 seconds"  # plural only above 1
    assert h(61) == "1 minute 1 second"
    assert h(87.6) == "1 minute 27 seconds"
    assert h(3601) == "1 hour 1 second"
    assert h(86401) == "1 day 1 second"
    assert h(86400 + 9 * 3600 + 120 + 3) == "1 day 9 hours 2 minutes 3 seconds"


def test_get_tqdm(monkeypatch, tmp_path):
    monkeypatch.delenv("TRAINBUS_PROGRESS_REFRESH", raising=False)
    monkeypatch.delenv("TENSORPACK_PROGRESS_REFRESH", raising=False)
    with open(tmp_path / "log", "w") as f:
        kw = utils.get_tqdm_kwargs(file=f, leave=False)
        assert kw["mininterval"] == 180 and kw["leave"] is False and kw["ascii"] is True
        with utils.get_tqdm(range(3), file=f, total=3) as bar:
            assert list(bar) == [0, 1, 2]
    assert "3/3" in (tmp_path / "log").read_text()
    monkeypatch.setenv("TENSORPACK_PROGRESS_REFRESH", "2.5")
    assert utils.get_tqdm_kwargs()["mininterval"] == 2.5
    monkeypatch.setenv("TRAINBUS_PROGRESS_REFRESH", "soon")
    with pytest.raises(ValueError, match="TRAINBUS_PROGRESS_REFRESH='soon'"):
        utils.get_tqdm_kwargs()


def test_find_library_full_path():
    p = utils.find_library_full_path("c")
    assert p and os.path.isabs(p) and os.path.isfile(p) and "libc" in os.path.basename(p)
    assert utils.find_library_full_path("surely_no_such_lib_xyz") is None


# ---- gpu / nvml ------------------------------------------------------------------------------------------------

def test_change_gpu_sets_and_restores(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    with gpu.change_gpu(1):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
        with gpu.change_gpu(-1):
            assert os.environ["CUDA_VISIBLE_DEVICES"] == ""
            assert gpu.get_num_gpu() == 0
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "7"
    assert gpu.get_nr_gpu is gpu.get_num_gpu


def test_get_num_gpu_is_zero_here(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpu.get_num_gpu() == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert gpu.get_num_gpu() == 2  # NVML cannot count here, so the listed devices are trusted


def test_nvml_without_gpu_raises_clearly():
    from trainbus.utils.nvml import NVMLContext, NvmlException

    with pytest.raises(NvmlException, match="NVML is not available on this machine"):
        with NVMLContext():
            pass


# ---- stats -----------------------------------------------------------------------------------------------------

def test_stat_counter_against_numpy():
    xs = np.random.RandomState(0).randn(50)
    c = stats.StatCounter()
    with pytest.raises(ValueError, match="no value was fed"):
        c.average
    for x in xs:
        c.feed(float(x))
    assert c.count == 50 and c.samples() == [float(x) for x in xs]
    assert np.isclose(c.average, xs.mean()) and np.isclose(c.sum, xs.sum())
    assert c.max == xs.max() and c.min == xs.min()
    arrs = np.random.RandomState(1).rand(5, 3)
    c.reset()
    for a in arrs:
        c.feed(a)
    assert np.isclose(c.average, arrs.mean()) and np.isclose(c.sum, arrs.sum())  # over every element
    assert c.max == arrs.max() and c.min == arrs.min()


def test_ratio_counter_and_accuracy():
    r = stats.RatioCounter()
    assert r.ratio == 0
    r.feed(3, 4)
    r.feed(1)
    assert (r.count, r.total, r.ratio) == (4, 5, 0.8)
    a = stats.Accuracy()
    a.feed(1, 2)
    assert a.accuracy == 0.5
    r.reset()
    assert (r.count, r.total) == (0, 0)


def test_binary_statistics_against_numpy():
    rng = np.random.RandomState(3)
    pred, label = rng.randint(2, size=200), rng.randint(2, size=200)
    s = stats.BinaryStatistics()
    s.feed(pred[:120], label[:120])
    s.feed(pred[120:], label[120:])
    tp = ((pred == 1) & (label == 1)).sum()
    assert np.isclose(s.precision, tp / (pred == 1).sum()) and np.isclose(s.recall, tp / (label == 1).sum())
    assert np.isclose(s.false_positive, 1 - s.precision) and np.isclose(s.false_negative, 1 - s.recall)
    with pytest.raises(ValueError, match=r"pred has shape \(2,\) but label has \(3,\)"):
        s.feed(np.zeros(2), np.zeros(3))
    empty = stats.BinaryStatistics()
    assert (empty.precision, empty.recall, empty.false_positive, empty.false_negative) == (0, 0, 0, 0)


def test_online_moments_against_numpy():
    xs = np.random.RandomState(4).randn(100, 3) * 5 + 2
    m = stats.OnlineMoments()
    m.feed(xs[0])
    with pytest.raises(ValueError, match="at least 2 values"):
        m.variance
    for x in xs[1:]:
        m.feed(x)
    np.testing.assert_allclose(m.mean, xs.mean(0))
    np.testing.assert_allclose(m.variance, xs.var(0, ddof=1))
    np.testing.assert_allclose(m.std, xs.std(0, ddof=1))


def test_stats_json_helpers_still_there(tmp_path):
    (tmp_path / "stats.json").write_text('[{"epoch_num": 3}]')
    assert stats.load_existing_epoch_number(str(tmp_path)) == 3


# ---- timer -----------------------------------------------------------------------------------------------------

def test_timed_operation_and_total_timer(logged, monkeypatch):
    clock = iter([10.0, 12.5, 20.0, 21.0, 30.0, 30.5])
    monkeypatch.setattr(timer, "timer", lambda: next(clock))
    with timer.timed_operation("loading data", log_start=True):
        pass
    assert logged == [("info", "Start loading data ..."), ("info", "Loading data finished, time:2.5000 sec.")]
    monkeypatch.setattr(timer, "_TOTAL_TIMER_DATA", type(timer._TOTAL_TIMER_DATA)(stats.StatCounter))
    for _ in range(2):
        with timer.total_timer("step"):
            pass
    timer.print_total_timer()
    assert logged[-1] == ("info", "Total Time: step -> 1.50 sec, 2 times, 0.75 sec/time")
    with pytest.raises(ValueError, match="non-empty"):
        with timer.timed_operation(""):
            pass


def test_iter_speed_counter(logged, monkeypatch):
    t = [0.0]
    monkeypatch.setattr(timer, "timer", lambda: t[0])
    c = timer.IterSpeedCounter(2, "it")
    for _ in range(5):
        c()
        t[0] += 1.0
    assert logged == [("info", "it: 1.00 sec, 2 times, 0.5 sec/time"), ("info", "it: 3.00 sec, 4 times, 0.75 sec/time")]


def test_timer_pause_resume(monkeypatch):
    t = [100.0]
    monkeypatch.setattr(timer, "timer", lambda: t[0])
    tm = timer.Timer()
    t[0] = 103.0
    tm.pause()
    assert tm.is_paused()
    t[0] = 110.0
    assert tm.seconds() == 3.0
    tm.resume()
    t[0] = 112.0
    assert tm.seconds() == 5.0
    with pytest.raises(RuntimeError, match="not paused"):
        tm.resume()
    tm.reset()
    assert tm.seconds() == 0.0


# ---- palette / develop -----------------------------------------------------------------------------------------

def test_palette():
    p = palette.PALETTE_RGB
    assert p.shape == (79, 3) and p.dtype == np.float32
    assert p.min() >= 0 and p.max() <= 255
    assert len({tuple(c) for c in p.tolist()}) == 79


def test_develop(logged):
    develop.log_deprecated("old_f", "Use new_f.", max_num_warnings=2)
    develop.log_deprecated("old_f", "Use new_f.", max_num_warnings=2)
    develop.log_deprecated("old_f", "Use new_f.", max_num_warnings=2)
    develop.log_deprecated("g", "Soon.", eos="2030-03-04")
    assert logged == [("warning", "[Deprecated] old_f was deprecated. Use new_f.")] * 2 + \
        [("warning", "[Deprecated] g will be deprecated after 04 Mar. Soon.")]

    @develop.deprecated("Use h2.")
    def h(x):
        return x + 1

    assert h(1) == 2 and "[Deprecated] h [" in logged[-1][1] and "test_utils_misc.py" in logged[-1][1]
    D = develop.create_dummy_class("Fancy", "fancylib")
    with pytest.raises(ImportError, match="Cannot import 'fancylib', therefore 'Fancy' is not available"):
        D()
    with pytest.raises(AttributeError, match="fancylib"):
        D.anything
    fn = develop.create_dummy_func("fancy_fn", ["a", "b"])
    with pytest.raises(ImportError, match="Cannot import 'a,b', therefore 'fancy_fn'"):
        fn()
    assert develop.HIDE_DOC(h).__HIDE_SPHINX_DOC__ is True


# ---- viz -------------------------------------------------------------------------------------------------------

def test_stack_patches_layout():
    patches = np.arange(3 * 2 * 2, dtype=np.uint8).reshape(3, 2, 2) * 10
    out = viz.stack_patches(patches, nr_row=2, nr_col=2, border=1, bgcolor=7)
    assert out.shape == (5, 5, 1) and out.dtype == np.uint8
    expect = np.array([[0, 10, 7, 40, 50],
                       [20, 30, 7, 60, 70],
                       [7, 7, 7, 7, 7],
                       [80, 90, 7, 7, 7],
                       [100, 110, 7, 7, 7]])
    np.testing.assert_array_equal(out[:, :, 0], expect)
    # colour background: 3 channels; gray patches repeated into them
    out3 = viz.stack_patches(patches, 1, 3, border=0, bgcolor=(1, 2, 3))
    assert out3.shape == (2, 6, 3) and (out3[0, 2] == [40, 40, 40]).all()
    # default border: 5% of the smaller side
    assert viz.stack_patches(np.zeros((4, 40, 20, 3)), 2, 2).shape == (2 * 41 - 1, 2 * 21 - 1, 3)
    with pytest.raises(ValueError, match="do not fit in 1 rows x 2 columns"):
        viz.stack_patches(patches, 1, 2)


def test_stack_patches_pad_different_sizes():
    a = np.full((2, 2), 50, np.uint8)
    b = np.full((4, 2, 3), 90, np.uint8)
    out = viz.stack_patches([a, b], 1, 2, border=0, pad=True, bgcolor=0)
    assert out.shape == (4, 4, 3)
    np.testing.assert_array_equal(out[:, :2, 0], [[0, 0], [50, 50], [50, 50], [0, 0]])
    assert (out[:, 2:] == 90).all()
    with pytest.raises(ValueError, match="pad=True"):
        viz.stack_patches([a, b], 1, 2)


def test_gen_stack_patches():
    patches = np.arange(5, dtype=np.uint8)[:, None, None, None] * np.ones((5, 2, 2, 1), np.uint8)
    grids = [g.copy() for g in viz.gen_stack_patches(patches, nr_row=1, nr_col=2, border=0, bgcolor=255)]
    assert len(grids) == 3 and all(g.shape == (2, 4, 1) for g in grids)
    assert grids[0][0, :, 0].tolist() == [0, 0, 1, 1] and grids[2][0, :, 0].tolist() == [4, 4, 255, 255]
    grids = list(viz.gen_stack_patches(np.zeros((10, 10, 10)), border=0, max_width=30, max_height=20))
    assert len(grids) == 2 and grids[0].shape == (20, 30, 1)  # 2 rows x 3 columns per grid


def test_draw_boxes_and_mask():
    im = np.zeros((30, 40), np.uint8)
    out = viz.draw_boxes(im, [[2, 3, 10, 8], [0, 0, 39, 29]], color=(200, 100, 50))
    assert out.shape == (30, 40, 3) and im.max() == 0  # input untouched
    assert out[3, 2].tolist() == [200, 100, 50] and out[8, 10].tolist() == [200, 100, 50]
    assert out[5, 5].tolist() == [0, 0, 0] and out[0, 0].tolist() == [200, 100, 50]
    labeled = viz.draw_boxes(np.zeros((60, 80, 3), np.uint8), [[10, 30, 50, 50]], ["dog"])
    assert (labeled[12:29, 10:40] != 0).any()  # the label box above the rectangle
    with pytest.raises(ValueError, match="outside the image"):
        viz.draw_boxes(im, [[0, 0, 50, 5]])
    with pytest.raises(ValueError, match="1 labels for 2 boxes"):
        viz.draw_boxes(im, [[0, 0, 5, 5], [1, 1, 2, 2]], ["a"])
    mask = np.zeros((30, 40))
    mask[:10] = 1
    base = np.full((30, 40, 3), 100, np.uint8)
    m = viz.draw_mask(base, mask, alpha=0.25, color=(200, 0, 100))
    assert m[0, 0].tolist() == [125, 75, 100] and m[20, 0].tolist() == [100, 100, 100]
    text = viz.draw_text(np.zeros((40, 100, 3), np.uint8), (5, 30), "hi", (0, 0, 255))
    assert (text[..., 2] == 255).any() and (text == 222).any()


def test_interactive_imshow_without_display_raises(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    with pytest.raises(RuntimeError, match="needs a display"):
        viz.interactive_imshow(np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(RuntimeError, match="needs a display"):
        viz.stack_patches(np.zeros((1, 2, 2)), 1, 1, viz=True)


def test_dump_dataflow_images(tmp_path):
    from PIL import Image

    class DF:
        def reset_state(self):
            self.resets = getattr(self, "resets", 0) + 1

        def __iter__(self):
            for i in range(2):
                yield [np.full((2, 8, 6, 3), 0.5 * i, np.float32), i]

    df = DF()
    viz.dump_dataflow_images(df, index=0, batched=True, number=5, output_dir=str(tmp_path / "imgs"), scale=255,
                             resize=(4, 3))
    files = sorted(os.listdir(tmp_path / "imgs"))
    assert files == ["001.jpg", "002.jpg", "003.jpg", "004.jpg", "005.jpg"] and df.resets == 1
    img = np.asarray(Image.open(tmp_path / "imgs" / "003.jpg"))
    assert img.shape == (4, 3, 3) and abs(int(img.mean()) - 127) <= 2


def test_intensity_to_rgb_without_matplotlib_says_what_to_install(monkeypatch):
    x = np.linspace(0, 2, 12).reshape(3, 4)
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    with pytest.raises(ImportError, match="pip install matplotlib"):
        viz.intensity_to_rgb(x, normalize=True)


def test_intensity_to_rgb_colours_with_a_matplotlib_colormap(matplotlib_importable):
    x = np.linspace(0, 2, 12).reshape(3, 4)
    out = viz.intensity_to_rgb(x, cmap="gray", normalize=True)
    assert out.shape == (3, 4, 3) and out.dtype == np.float32
    assert out[0, 0].tolist() == [0, 0, 0] and out[-1, -1].tolist() == [255, 255, 255]
    jet = viz.intensity_to_rgb(x, cmap="jet", normalize=True)
    assert jet[0, 0].tolist() != jet[-1, -1].tolist() and jet[0, 0, 2] > jet[0, 0, 0]  # jet starts blue
