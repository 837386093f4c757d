"""The everyday dataflows of trainbus-dataflow: ``DataFromList`` (ordered and shuffled, an
``RNGDataFlow``), ``BatchData`` (with and without the remainder), ``MapData`` dropping
datapoints, ``DataFromGenerator`` with and without a size, ``FakeData``'s shapes, types and
domains, and the errors of a bad batch size and of asking a size-less dataflow its length."""

from __future__ import annotations

import numpy as np
import pytest

from trainbus.dataflow import BatchData, DataFromGenerator, DataFromList, FakeData, MapData, RNGDataFlow


def test_dataflows():
    ds = DataFromList([[i, i * 2] for i in range(10)], shuffle=False)
    assert list(ds) == [[i, i * 2] for i in range(10)] and len(ds) == 10
    b = BatchData(ds, 4)
    assert len(b) == 2 and [x[0].tolist() for x in b] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    br = BatchData(ds, 4, remainder=True)
    assert len(br) == 3 and list(br)[-1][0].tolist() == [8, 9]
    m = MapData(ds, lambda dp: None if dp[0] % 2 else [dp[0] + 100])
    assert [x[0] for x in m] == [100, 102, 104, 106, 108]
    g = DataFromGenerator(lambda: iter([[1], [2]]), size=2)
    assert list(g) == [[1], [2]] and list(g) == [[1], [2]] and len(g) == 2
    f = FakeData([[2, 3], [1]], size=5, dtype=["float32", "int32"], domain=[(0, 1), (5, 6)])
    f.reset_state()
    dps = list(f)
    assert len(dps) == 5 and dps[0][0].shape == (2, 3) and dps[0][1].dtype == np.int32 and 5 <= dps[0][1][0] <= 6
    shuffled = DataFromList(list(range(20)), shuffle=True)
    shuffled.reset_state()
    assert sorted(shuffled) == list(range(20))
    assert isinstance(shuffled, RNGDataFlow)
    with pytest.raises(ValueError, match="batch_size"):
        BatchData(ds, 0)
    with pytest.raises(TypeError, match="no length"):
        len(DataFromGenerator(lambda: iter([])))
