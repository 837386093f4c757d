"""trainbus.dataflow: the base classes, the composition dataflows and the raw sources — values,
order, dtypes, lengths and errors, all reached through ``trainbus.dataflow``."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest

import trainbus.dataflow as df
from trainbus.dataflow import (BatchData, BatchDataByShape, CacheData, ConcatData, DataFlow, DataFlowReentrantGuard,
                               DataFlowTerminated, DataFromDict, DataFromGenerator, DataFromIterable, DataFromList,
                               FakeData, FixedSizeData, JoinData, LocallyShuffleData, MapData, MapDataComponent,
                               PrintData, ProxyDataFlow, RandomChooseData, RandomMixData, RepeatedData,
                               RepeatedDataPoint, RNGDataFlow, SelectComponent, TestDataSpeed)


def seq(n, shuffle=False):
    return DataFromList([[i] for i in range(n)], shuffle=shuffle)


def flat(ds, k=0):
    return [dp[k] for dp in ds]


# -- base ----------------------------------------------------------------------------------------

def test_base_classes_are_the_core_objects_and_modules_resolve():
    import trainbus.dataflow.base as base_mod
    import trainbus.dataflow.common as common_mod
    import trainbus.dataflow.raw as raw_mod
    import trainbus_dataflow.base

    assert trainbus_dataflow.base.DataFlow is df.DataFlow is base_mod.DataFlow
    assert trainbus_dataflow.base.ProxyDataFlow is df.ProxyDataFlow
    assert common_mod.BatchData is df.BatchData and raw_mod.DataFromList is df.DataFromList
    assert isinstance(DataFromList([]), DataFlow) and isinstance(DataFromList([]), RNGDataFlow)
    assert isinstance(BatchData(seq(4), 2), ProxyDataFlow)
    assert issubclass(DataFlowTerminated, BaseException) and not issubclass(DataFlowTerminated, Exception)


def test_star_import_binds_plugin_names():
    ns: dict = {}
    exec("from trainbus.dataflow import *", ns)
    for name in ("DataFlow", "ProxyDataFlow", "BatchData", "DataFromDict", "MultiProcessRunnerZMQ",
                 "MultiThreadMapData", "PrefetchDataZMQ", "TestDataSpeed"):
        assert name in ns, name
    assert ns["BatchData"] is BatchData
    import trainbus

    # `from trainbus import *` binds what __all__ lists (importing every plugin would take seconds)
    assert {"MultiProcessRunnerZMQ", "DataFromList", "LocallyShuffleData"} <= set(trainbus.__all__)
    assert trainbus.MultiProcessRunnerZMQ is df.MultiProcessRunnerZMQ and trainbus.DataFromList is DataFromList


def test_dataflow_contract_old_names_and_len():
    class Old(DataFlow):
        def get_data(self):
            yield from ([1], [2])

        def size(self):
            return 2

    o = Old()
    assert list(o) == [[1], [2]] and len(o) == 2 and list(o.get_data()) == [[1], [2]] and o.size() == 2

    class NoLen(DataFlow):
        def __iter__(self):
            yield [0]

    with pytest.raises(NotImplementedError):
        len(NoLen())
    with pytest.raises(TypeError):
        DataFlow()  # abstract: no __iter__


def test_proxy_and_reentrant_guard():
    p = ProxyDataFlow(seq(3))
    p.reset_state()
    assert len(p) == 3 and flat(p) == [0, 1, 2]
    g = DataFlowReentrantGuard()
    with g:
        with pytest.raises(threading.ThreadError, match="not reentrant"):
            with g:
                pass
    with g:  # released again
        pass


def test_rng_dataflow_reseeds_per_reset():
    a = DataFromList(list(range(50)), shuffle=True)
    a.reset_state()
    first = list(a)
    a.reset_state()
    second = list(a)
    assert sorted(first) == sorted(second) == list(range(50))
    assert first != list(range(50)) and first != second


# -- raw ---------------------------------------------------------------------------------------

def test_data_from_list_dict_generator_iterable():
    d = DataFromList([[1, "a"], [2, "b"]], shuffle=False)
    assert list(d) == [[1, "a"], [2, "b"]] and len(d) == 2
    dd = DataFromDict({"x": [1, 2, 3], "y": ["a", "b", "c"]}, shuffle=False)
    assert list(dd) == [{"x": 1, "y": "a"}, {"x": 2, "y": "b"}, {"x": 3, "y": "c"}] and len(dd) == 3
    dd2 = DataFromDict({"x": list(range(30)), "y": [str(i) for i in range(30)]})
    dd2.reset_state()
    rows = list(dd2)
    assert all(r["y"] == str(r["x"]) for r in rows) and sorted(r["x"] for r in rows) == list(range(30))
    with pytest.raises(ValueError, match="same length"):
        DataFromDict({"x": [1, 2], "y": [1]})
    g = DataFromGenerator(lambda: ([i] for i in range(3)))
    assert list(g) == [[0], [1], [2]] and list(g) == [[0], [1], [2]]  # called anew each pass
    with pytest.raises(TypeError, match="no length"):
        len(g)
    assert len(DataFromGenerator([[1], [2]])) == 2
    it = DataFromIterable(iter([[5], [6]]))
    with pytest.raises(NotImplementedError):
        len(it)
    assert [dp for dp in it] == [[5], [6]]  # list() would call len()
    assert len(DataFromIterable([[1]])) == 1


def test_fake_data_shapes_dtypes_domains():
    f = FakeData([[2, 3], [4]], size=6, dtype=["float32", "int32"], domain=[(0, 1), (10, 12)])
    f.reset_state()
    dps = list(f)
    assert len(dps) == 6 == len(f)
    assert dps[0][0].shape == (2, 3) and dps[0][0].dtype == np.float32 and dps[0][1].dtype == np.int32
    assert all(0 <= dp[0].min() and dp[0].max() < 1 and 10 <= dp[1].min() and dp[1].max() <= 12 for dp in dps)
    assert not np.array_equal(dps[0][0], dps[1][0])
    fixed = FakeData([[3]], size=4, random=False)
    fixed.reset_state()
    vals = list(fixed)
    assert all(np.array_equal(v[0], vals[0][0]) for v in vals)
    with pytest.raises(ValueError, match="dtypes"):
        FakeData([[1], [2]], dtype=["float32"])
    scalar = FakeData([[], [2]], size=3, dtype=["uint8", "float32"], domain=[(0, 10), (0, 1)])  # shape () too
    scalar.reset_state()
    s0 = list(scalar)[0][0]
    assert isinstance(s0, np.ndarray) and s0.shape == () and s0.dtype == np.uint8 and 0 <= s0 < 10


# -- BatchData ---------------------------------------------------------------------------------

def test_batch_dtypes_like_tensorpack():
    rows = [[i, float(i) / 2, True, "s%d" % i, np.full((2,), i, "uint8"), np.float64(i)] for i in range(6)]
    b = BatchData(DataFromList(rows, shuffle=False), 3)
    out = list(b)
    assert len(out) == 2 == len(b)
    ints, floats, bools, strs, arrs, f64 = out[1]
    assert ints.dtype == np.int32 and ints.tolist() == [3, 4, 5]
    assert floats.dtype == np.float32 and floats.tolist() == [1.5, 2.0, 2.5]
    assert bools.dtype == np.int32 and bools.tolist() == [1, 1, 1]  # bool is an int: int32, as tensorpack
    assert strs.dtype.kind == "U" and strs.tolist() == ["s3", "s4", "s5"]
    assert arrs.dtype == np.uint8 and arrs.shape == (3, 2) and arrs[:, 0].tolist() == [3, 4, 5]
    assert f64.dtype == np.float64


def test_batch_remainder_len_and_use_list():
    ds = seq(10)
    assert [b[0].tolist() for b in BatchData(ds, 4)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(BatchData(ds, 4)) == 2 and len(BatchData(ds, 5)) == 2
    br = BatchData(ds, 4, remainder=True)
    assert len(br) == 3 and [b[0].tolist() for b in br] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert len(BatchData(ds, 5, remainder=True)) == 2
    bl = BatchData(DataFromList([[[1, 2], "x"], [[3], "y"]], shuffle=False), 2, use_list=True)
    assert list(bl) == [[[[1, 2], [3]], ["x", "y"]]]
    with pytest.raises(ValueError, match="larger than the dataflow"):
        BatchData(seq(3), 4)
    assert [b[0].tolist() for b in BatchData(seq(3), 4, remainder=True)] == [[0, 1, 2]]
    with pytest.raises(ValueError, match="positive integer"):
        BatchData(ds, 0)
    with pytest.raises(NotImplementedError):
        len(BatchData(RepeatedData(seq(3), -1), 2))


def test_batch_dict_datapoints():
    d = DataFromDict({"img": [np.ones((2, 2), "float32") * i for i in range(4)], "label": [0, 1, 2, 3]},
                     shuffle=False)
    out = list(BatchData(d, 2))
    assert set(out[0]) == {"img", "label"}
    assert out[0]["img"].shape == (2, 2, 2) and out[0]["img"].dtype == np.float32
    assert out[1]["label"].dtype == np.int32 and out[1]["label"].tolist() == [2, 3]
    assert list(BatchData(d, 4, use_list=True))[0]["label"] == [0, 1, 2, 3]


def test_batch_wrong_structure_errors_name_dataflow_component_and_expectation():
    bad_len = DataFromList([[1, 2], [3]], shuffle=False)
    with pytest.raises(ValueError, match=r"datapoint 1 of a batch from DataFromList is a list of 1 components.*"
                                         r"2 components"):
        list(BatchData(bad_len, 2))
    bad_shape = DataFromList([[np.zeros(2)], [np.zeros(3)]], shuffle=False)
    with pytest.raises(ValueError, match=r"component 0 from DataFromList.*\(2,\), \(3,\)"):
        list(BatchData(bad_shape, 2))
    with pytest.raises(ValueError, match="must be a list, tuple or dict"):
        list(BatchData(DataFromList([5, 6], shuffle=False), 2))
    with pytest.raises(TypeError, match="cannot batch component 0 .*use_list=True"):
        list(BatchData(DataFromList([[object()], [object()]], shuffle=False), 2))
    keys = DataFromList([{"a": 1}, {"b": 2}], shuffle=False)
    with pytest.raises(ValueError, match=r"keys \['b'\].*keys \['a'\]"):
        list(BatchData(keys, 2))


def test_batch_by_shape_groups():
    rows = [[np.zeros((k % 2 + 1,)), i] for i, k in enumerate(range(8))]
    b = BatchDataByShape(DataFromList(rows, shuffle=False), 2, 0)
    b.reset_state()
    out = list(b)
    assert [o[0].shape for o in out] == [(2, 1), (2, 2), (2, 1), (2, 2)]
    assert [o[1].tolist() for o in out] == [[0, 2], [1, 3], [4, 6], [5, 7]]


# -- composition -------------------------------------------------------------------------------

def test_fixed_size_data_keep_state():
    keep = FixedSizeData(DataFromList([[i] for i in range(1, 6)], shuffle=False), 3, keep_state=True)
    keep.reset_state()
    assert [flat(keep) for _ in range(3)] == [[1, 2, 3], [4, 5, 1], [2, 3, 4]] and len(keep) == 3
    fresh = FixedSizeData(DataFromList([[i] for i in range(1, 6)], shuffle=False), 3, keep_state=False)
    fresh.reset_state()
    assert [flat(fresh) for _ in range(2)] == [[1, 2, 3], [1, 2, 3]]
    six = FixedSizeData(DataFromList([[i] for i in range(1, 6)], shuffle=False), 6, keep_state=False)
    six.reset_state()
    assert flat(six) == [1, 2, 3, 4, 5, 1]
    it = iter(keep)
    next(it)
    with pytest.raises(threading.ThreadError):
        next(iter(keep))


def test_map_data_and_component():
    src_rows = [[i, i * 10] for i in range(5)]
    src = DataFromList(src_rows, shuffle=False)

    def mutate(dp):
        dp[0] = dp[0] + 100  # modifies the (shallow) copy only
        return None if dp[1] == 20 else dp

    assert list(MapData(src, mutate)) == [[100, 0], [101, 10], [103, 30], [104, 40]]
    assert src_rows[0] == [0, 0]
    mc = MapDataComponent(src, lambda v: None if v == 30 else v * 2, index=1)
    assert list(mc) == [[0, 0], [1, 20], [2, 40], [4, 80]] and len(mc) == 5
    tup = MapDataComponent(DataFromList([(1, 2)], shuffle=False), lambda v: v + 1, 0)
    assert list(tup) == [[2, 2]]
    dict_src = DataFromList([{"a": 1, "b": 2}], shuffle=False)
    assert list(MapDataComponent(dict_src, lambda v: -v, "b")) == [{"a": 1, "b": -2}]
    assert list(dict_src) == [{"a": 1, "b": 2}]
    with pytest.raises(ValueError, match="no component 'c'"):
        list(MapDataComponent(dict_src, lambda v: v, "c"))
    with pytest.raises(TypeError, match="callable"):
        MapData(src, 3)


def test_repeated_data_and_datapoint():
    r = RepeatedData(seq(3), 2)
    assert flat(r) == [0, 1, 2, 0, 1, 2] and len(r) == 6
    inf = RepeatedData(seq(2), -1)
    assert [dp[0] for dp in itertools.islice(inf, 7)] == [0, 1, 0, 1, 0, 1, 0]
    with pytest.raises(NotImplementedError, match="infinite"):
        len(inf)
    rp = RepeatedDataPoint(seq(3), 2)
    assert flat(rp) == [0, 0, 1, 1, 2, 2] and len(rp) == 6
    with pytest.raises(ValueError):
        RepeatedDataPoint(seq(3), 0)


def test_concat_join_select():
    c = ConcatData([seq(2), DataFromList([[7], [8]], shuffle=False)])
    c.reset_state()
    assert flat(c) == [0, 1, 7, 8] and len(c) == 4
    j = JoinData([DataFromList([[1, 2], [3, 4]], shuffle=False), DataFromList([["a"], ["b"], ["c"]], shuffle=False)])
    j.reset_state()
    assert list(j) == [[1, 2, "a"], [3, 4, "b"]] and len(j) == 2
    jd = JoinData([DataFromList([{"a": 1}], shuffle=False), DataFromList([{"b": 2}], shuffle=False)])
    assert list(jd) == [{"a": 1, "b": 2}]
    mixed = JoinData([DataFromList([[1]], shuffle=False), DataFromList([{"b": 2}], shuffle=False)])
    with pytest.raises(ValueError, match="dataflow 1 .*produced a dict"):
        list(mixed)
    s = SelectComponent(DataFromList([[1, 2, 3]], shuffle=False), [2, 0])
    assert list(s) == [[3, 1]]
    assert list(SelectComponent(DataFromList([{"x": 1, "y": 2}], shuffle=False), ["y"])) == [[2]]


def test_random_choose_and_mix():
    rc = RandomChooseData([(DataFromList([["a"]] * 1000, shuffle=False), 0.75),
                           (DataFromList([["b"]] * 1000, shuffle=False), 0.25)])
    rc.reset_state()
    picks = [dp[0] for dp in itertools.islice(rc, 800)]
    assert 0.65 < picks.count("a") / 800 < 0.85
    ended = RandomChooseData([seq(3), seq(3)])
    ended.reset_state()
    assert 3 <= len([dp for dp in ended]) <= 6  # stops when the chosen one is exhausted
    with pytest.raises(ValueError, match="sum to"):
        RandomChooseData([(seq(1), 0.5), (seq(1), 0.2)])
    rm = RandomMixData([DataFromList([["a", i] for i in range(5)], shuffle=False),
                        DataFromList([["b", i] for i in range(3)], shuffle=False)])
    rm.reset_state()
    out = list(rm)
    assert len(out) == 8 == len(rm)
    assert [dp[1] for dp in out if dp[0] == "a"] == list(range(5))  # each source keeps its order
    assert [dp[1] for dp in out if dp[0] == "b"] == list(range(3))


def test_locally_shuffle():
    no_shuffle = LocallyShuffleData(seq(10), buffer_size=4, shuffle_interval=10 ** 6)
    no_shuffle.reset_state()
    assert [dp[0] for dp in itertools.islice(no_shuffle, 15)] == list(range(10)) + list(range(5))
    assert len(no_shuffle) == 10
    sh = LocallyShuffleData(seq(100), buffer_size=30, num_reuse=2)
    sh.reset_state()
    got = [dp[0] for dp in itertools.islice(sh, 200)]
    assert got != sorted(got)
    assert all(got.count(v) <= 4 for v in range(100)) and set(got) <= set(range(100))
    assert len(sh) == 200
    fresh = LocallyShuffleData(seq(3), 2)
    with pytest.raises(RuntimeError, match="reset_state"):
        next(iter(fresh))


def test_cache_data():
    calls = []

    def gen():
        calls.append(1)
        yield from ([i] for i in range(5))

    c = CacheData(DataFromGenerator(gen))
    c.reset_state()
    assert flat(c) == list(range(5)) and flat(c) == list(range(5)) and len(calls) == 1
    cs = CacheData(seq(30), shuffle=True)
    cs.reset_state()
    first = flat(cs)
    second = flat(cs)
    assert first == list(range(30)) and sorted(second) == first and second != first


def test_print_data(capsys):
    p = PrintData(DataFromList([[np.arange(4, dtype="float32"), 3, [1, 2, 3, 4, 5]], [np.zeros(1), 1, []]],
                               shuffle=False), num=1, max_list=2)
    p.reset_state()
    assert len(list(p)) == 2
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "datapoint 0/1 with 3 components consists of",
        "  0: ndarray:float32 of shape (4,) in range [0.0, 3.0]",
        "  1: int with value 3",
        "  2: list of len 5",
        "    0: int with value 1",
        "    1: int with value 2",
        "    ...",
    ]
    pd = PrintData(DataFromList([{"k": np.int64(5)}], shuffle=False))
    pd.reset_state()
    list(pd)
    assert "  k: int64 with value 5" in capsys.readouterr().out


def test_test_data_speed():
    t = TestDataSpeed(seq(50), size=20, warmup=5)
    assert t.test_size == 20 and t.warmup == 5
    speed = t.start()
    assert speed > 0 and t.speed == speed
    t2 = TestDataSpeed(seq(7), size=5000)
    t2.reset_state()
    assert flat(t2) == list(range(7))  # runs the test (exhausting a pass early), then yields ds
