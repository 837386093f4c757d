"""send_dataflow_zmq / RemoteDataZMQ: datapoints cross a real process boundary over ZMQ."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

SENDER = textwrap.dedent("""
    import sys
    import numpy as np
    from trainbus.dataflow import DataFromList, send_dataflow_zmq
    addr, base, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    df = DataFromList([[np.full((2, 3), base + i, dtype='float32'), base + i] for i in range(4)], shuffle=False)
    send_dataflow_zmq(df, addr, max_datapoints=count)
""")


def _sender(addr, base, count):
    return subprocess.Popen([sys.executable, "-c", SENDER, addr, str(base), str(count)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_one_sender_loops_over_its_dataflow_in_order(tmp_path):
    from trainbus.dataflow import RemoteDataZMQ

    addr = f"ipc://{tmp_path}/pipe"
    df = RemoteDataZMQ(addr)
    df.reset_state()
    it = iter(df)  # binds on the first next()
    proc = _sender(addr, 10, 6)
    try:
        got = [next(it) for _ in range(6)]
    finally:
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert [dp[1] for dp in got] == [10, 11, 12, 13, 10, 11]  # looped over the 4 datapoints
    np.testing.assert_array_equal(got[2][0], np.full((2, 3), 12, dtype="float32"))
    assert got[2][0].dtype == np.float32 and df.cnt1 == 6 and df.cnt2 == 0
    with pytest.raises(NotImplementedError, match="RemoteDataZMQ has no length"):
        len(df)


def test_two_endpoints_are_both_read_and_counted(tmp_path):
    from trainbus.dataflow import RemoteDataZMQ

    a1, a2 = f"ipc://{tmp_path}/one", f"ipc://{tmp_path}/two"
    df = RemoteDataZMQ(a1, a2)
    df.reset_state()
    it = iter(df)
    procs = [_sender(a1, 0, 5), _sender(a2, 100, 5)]
    try:
        got = [next(it) for _ in range(10)]
    finally:
        for p in procs:
            p.communicate(timeout=120)
    labels = sorted(dp[1] for dp in got)
    assert labels == [0, 0, 1, 2, 3, 100, 100, 101, 102, 103]
    assert (df.cnt1, df.cnt2) == (5, 5)


def test_bad_endpoint_and_format_say_what_to_use():
    from trainbus.dataflow import DataFromList, RemoteDataZMQ, send_dataflow_zmq

    with pytest.raises(OSError, match=r"RemoteDataZMQ: cannot bind to 'nonsense'.*tcp://127.0.0.1:5555"):
        next(iter(RemoteDataZMQ("nonsense")))
    with pytest.raises(ValueError, match="format='zmq_ops' is not supported"):
        send_dataflow_zmq(DataFromList([[1]]), "ipc:///tmp/unused", format="zmq_ops")
    with pytest.raises(ValueError, match="addr1 must be a ZMQ endpoint"):
        RemoteDataZMQ("")
