"""Write the blobs in this folder: real output of pyarrow.serialize and of pickle under NumPy 1.x.

Not part of the test run. Run it in a separate environment that still has them, e.g.
``python -m venv /tmp/oldpa && /tmp/oldpa/bin/pip install "pyarrow==11.0.0" "numpy<2"`` then
``/tmp/oldpa/bin/python make_fixtures.py``. test_serialize_tensorpack_formats.py builds the same
objects (``fixture_objects`` there mirrors ``objects`` here) and compares what trainbus reads.
"""

import collections
import datetime
import os
import pickle
import warnings

import numpy as np
import pyarrow as pa

warnings.simplefilter("ignore", FutureWarning)  # pyarrow.serialize is deprecated since pyarrow 2
HERE = os.path.dirname(os.path.abspath(__file__))


def objects():
    rng = np.random.RandomState(0)
    image = rng.randint(0, 256, size=(4, 5, 3)).astype(np.uint8)
    return {
        "basic": [np.arange(6, dtype=np.float32).reshape(2, 3), 5, "hé", b"by",
                  {"a": 1.5, "b": [None, True], 3: (1, "x")}, (1, 2), np.float32(2.5), np.int8(3),
                  np.float16(1.5), {1, 2}, None, [], np.zeros((0, 3), np.uint8), np.arange(4)[::2],
                  np.array(["ab", "c"]), np.bool_(True)],
        "more": [image, np.uint64(7), datetime.datetime(2020, 1, 2, 3, 4, 5, 6),
                 pa.Tensor.from_numpy(np.arange(3)), pa.py_buffer(b"buf"), 2**70,
                 collections.OrderedDict(a=1), np.array([1 + 2j]), np.array([b"ab"]), np.array(["x"]),
                 np.bool_(False), np.zeros((2, 0)), np.arange(6).reshape(2, 3).T],
        "keys": [b"%08d" % i for i in range(3)],
        "scalar": 5,
        "array": np.arange(10, dtype=np.int16),
        "datapoint": [image, 7],
    }


def main():
    print("pyarrow", pa.__version__, "numpy", np.__version__)
    for name, obj in objects().items():
        with open(os.path.join(HERE, f"pyarrow11_{name}.bin"), "wb") as f:
            f.write(pa.serialize(obj).to_buffer().to_pybytes())
    dp = [objects()["datapoint"][0], np.int64(3), np.float32(0.5), {"k": np.arange(3.0)}, (1, "a"), b"raw"]
    for proto in (2, 5):
        with open(os.path.join(HERE, f"numpy1_pickle_p{proto}.bin"), "wb") as f:
            f.write(pickle.dumps(dp, protocol=proto))


if __name__ == "__main__":
    main()
