"""``save_checkpoint_vars`` / ``load_checkpoint_vars`` round trips: ``.npz`` parameter files and
TF checkpoints, several dtypes and shapes."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from trainbus.tfutils import varmanip
from trainbus.tfutils.varmanip import load_checkpoint_vars, load_chkpt_vars, save_checkpoint_vars, save_chkpt_vars


def _values():
    rng = np.random.RandomState(3)
    return {
        "conv0/W:0": rng.randn(3, 3, 2, 4).astype("float32"),
        "conv0/b": np.arange(4, dtype="float64") / 3,
        "bn/mean/EMA": np.float32(1.5),  # a scalar
        "global_step": np.int64(1234),
        "emb/ids": rng.randint(-5, 5, size=(2, 3)).astype("int32"),
        "img": np.arange(12, dtype="uint8").reshape(3, 4),
        "mask": np.array([True, False, True]),
        "half": np.array([0.5, -2.0], dtype="float16"),
        "empty": np.zeros((0, 3), dtype="float32"),
        "file": np.ones(2, dtype="float32"),  # also a parameter name of numpy.savez_compressed
    }


def _check_same(loaded, original):
    assert sorted(loaded) == sorted(k.split(":")[0] for k in original)
    for k, v in original.items():
        got = loaded[k.split(":")[0]]
        v = np.asarray(v)
        assert got.dtype == v.dtype, k
        assert got.shape == v.shape, k
        np.testing.assert_array_equal(got, v, err_msg=k)


def test_npz_round_trip(tmp_path):
    path = tmp_path / "sub" / "params.npz"
    save_checkpoint_vars(_values(), str(path))
    # a real npz: numpy reads it as it is
    with np.load(path) as z:
        assert sorted(z.files) == sorted(k.split(":")[0] for k in _values())
    assert zipfile.ZipFile(path).getinfo("conv0/W.npy").compress_type == zipfile.ZIP_DEFLATED
    _check_same(load_checkpoint_vars(str(path)), _values())
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_npz_written_by_numpy_loads_and_names_lose_the_tensor_suffix(tmp_path):
    path = tmp_path / "np.npz"
    np.savez(path, **{"a/W:0": np.eye(2, dtype="float32"), "b": np.int16(7)})
    loaded = load_chkpt_vars(str(path))
    assert sorted(loaded) == ["a/W", "b"]
    np.testing.assert_array_equal(loaded["a/W"], np.eye(2))
    assert loaded["b"].dtype == np.int16 and loaded["b"] == 7


def test_checkpoint_round_trip(tmp_path):
    values = {k: v for k, v in _values().items() if k != "empty"}
    prefix = tmp_path / "ckpt" / "model-7"
    save_chkpt_vars(values, str(prefix))
    assert (tmp_path / "ckpt" / "model-7.index").exists()
    _check_same(load_checkpoint_vars(str(prefix)), values)
    # the npz and the checkpoint hold the same
    save_checkpoint_vars(values, str(tmp_path / "same.npz"))
    a, b = load_checkpoint_vars(str(prefix)), load_checkpoint_vars(str(tmp_path / "same.npz"))
    assert sorted(a) == sorted(b)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_npz_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.npz"):
        load_checkpoint_vars(str(tmp_path / "missing.npz"))
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(ValueError, match=r"bad\.npz.*not a readable \.npz parameter file"):
        load_checkpoint_vars(str(bad))
    with pytest.raises(ValueError, match=r"\.npy.*name the file \*\.npz"):
        save_checkpoint_vars({"a": np.zeros(2)}, str(tmp_path / "x.npy"))
    with pytest.raises(TypeError, match="'obj' has dtype object"):
        save_checkpoint_vars({"obj": np.array([{"a": 1}], dtype=object)}, str(tmp_path / "o.npz"))
    assert not (tmp_path / "o.npz").exists()
    assert varmanip.load_chkpt_vars is load_checkpoint_vars
