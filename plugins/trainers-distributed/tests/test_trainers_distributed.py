"""Distributed trainers with REAL processes: one ps and two workers on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import zygote  # tests/_support

# these tests start real processes on local ports (see the root conftest.py)
pytestmark = pytest.mark.cluster

HERE = Path(__file__).resolve().parent
WORKER = HERE / "dist_worker.py"
LIMIT = 90.0


def free_ports(n: int) -> list[int]:
    # below the ephemeral range: a released ephemeral port can be taken by another process's
    # outgoing connection before the server meant to listen on it binds it
    from ports import free_ports as pick

    return pick(n)


def _copy_lines(stream, log, lock) -> None:
    for line in stream:
        with lock:
            log.write(line)
            log.flush()
    stream.close()


def run_cluster(out: Path, trainer: str, gpus: int = 1, **extra_env: str):
    """Start ps 0, worker 0, worker 1; wait for all; returns {name: (rc, log)}."""
    out.mkdir(parents=True, exist_ok=True)
    ports = [str(p) for p in free_ports(3)]
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1", **extra_env)
    procs = {}
    copiers = []
    for name, job, task in (("ps", "ps", 0), ("w0", "worker", 0), ("w1", "worker", 1)):
        log = open(out / f"{name}.log", "w")
        # forked from the worker's zygote (tests/_support/zygote.py), in a session of its own. A ps
        # child exits as soon as every worker reported done: the chief's Dump, reading the ps
        # variables in after_train, shows that no worker reports done before its callbacks end. Its
        # stdout and stderr lines are copied into one log file as they come (unbuffered output)
        p = zygote.zygote().popen([sys.executable, str(WORKER), str(out), trainer, job, str(task), *ports, str(gpus)],
                                  env=env)
        lock = threading.Lock()
        for stream in (p.stdout, p.stderr):
            copiers.append(threading.Thread(target=_copy_lines, args=(stream, log, lock), daemon=True))
            copiers[-1].start()
        procs[name] = (p, log)
    t0 = time.monotonic()
    result = {}
    try:
        for name, (p, log) in procs.items():
            left = max(1.0, LIMIT - (time.monotonic() - t0))
            try:
                p.wait(timeout=left)
            except subprocess.TimeoutExpired:
                pass
    finally:
        for name, (p, log) in procs.items():
            if p.poll() is None:
                # its Python stacks into its log first (dist_worker.py enables faulthandler)
                os.killpg(p.pid, signal.SIGABRT)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
                result[name] = (None, "")
        for t in copiers:
            t.join(30)
        for name, (p, log) in procs.items():
            log.close()
    for name, (p, _) in procs.items():
        text = (out / f"{name}.log").read_text(errors="replace")
        result[name] = (result.get(name, (p.returncode,))[0], text)
    return result, time.monotonic() - t0


def load(out: Path, name: str):
    with np.load(out / name) as f:
        return {k: f[k] for k in f.files}


def check_common(out: Path, result, took):
    failed = {name: (rc, log) for name, (rc, log) in result.items() if rc != 0}
    # every failed process's log (a hung one's ends with its stacks), not only the first's
    assert not failed, "\n".join(f"{name} exited with {rc} (None = stopped after {LIMIT} s):\n{log[-6000:]}"
                                  for name, (rc, log) in failed.items())
    assert took < LIMIT
    assert "Parameter server task 0: all 2 workers finished." in result["ps"][1]
    # the non-chief waited for the chief's initialization, not TF's 30 s retry
    assert "Waiting for the chief worker to initialize the variables" in result["w1"][1]
    info0, info1 = (json.loads((out / f"info_w{t}.json").read_text()) for t in (0, 1))
    assert info0["is_chief"] is True and info1["is_chief"] is False
    for n in ("W", "b", "global_step"):
        assert info1["devices"][n].startswith("/job:ps/task:0"), info1["devices"]
    s0, s1 = load(out, "start_w0.npz"), load(out, "start_w1.npz")
    # the chief restored b := 0.25 (session_init runs on the chief only); worker 1 started from it
    np.testing.assert_array_equal(s0["b"], np.full([3], 0.25, "float32"))
    np.testing.assert_array_equal(s1["b"], s0["b"])
    np.testing.assert_array_equal(s1["W"], s0["W"])
    e0, e1 = load(out, "end_w0.npz"), load(out, "end_w1.npz")
    assert np.abs(e0["W"] - s0["W"]).max() > 1e-3 and np.isfinite(e1["W"]).all()
    # one global_step on ps, advanced by both workers: 2 workers x 2 epochs x 5 steps
    assert max(int(e0["global_step"]), int(e1["global_step"])) == 20
    # chief-only callbacks and logs: the chief alone
    assert (out / "chief_w0.txt").read_text() == "epoch 2\n"
    assert not (out / "chief_w1.txt").exists()
    assert (out / "log" / "log.log").exists()
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["log"]
    if "ModelSaver" in info0["optional"]:
        assert (out / "log" / "checkpoint").exists()
    if "JSONWriter" in info0["optional"]:
        stats = json.loads((out / "log" / "stats.json").read_text())
        assert [r["epoch_marker"] for r in stats] == [1.0, 2.0]
    return info0, info1


@pytest.mark.slow
def test_replicated_cluster_trains_and_shuts_down(tmp_path):
    out = tmp_path / "rep"
    result, took = run_cluster(out, "replicated", gpus=2)
    info0, info1 = check_common(out, result, took)
    # two local towers per worker, local copies; the global copy keeps the plain names
    assert {"tower0/W", "tower1/W", "tower0/b", "tower1/b"} <= set(info1["local_vars"])
    assert {"W", "b"} <= set(info1["global_vars"]) and "tower0/W" not in info1["global_vars"]


@pytest.mark.slow
def test_parameter_server_cluster_trains_and_shuts_down(tmp_path):
    out = tmp_path / "ps"
    result, took = run_cluster(out, "ps", gpus=1)
    info0, info1 = check_common(out, result, took)
    assert info1["local_vars"] == []


@pytest.mark.slow
def test_a_signal_to_a_worker_names_the_chiefs_final_checkpoint(tmp_path):
    """SIGTERM to worker 1 after its third step: every process ends with status 128 + 15 and one
    line; the chief's names the final checkpoint it wrote at its last step (as a single-process
    run's does); worker 1, which runs no saver, does not claim that no checkpoint was written."""
    out = tmp_path / "signal"
    result, took = run_cluster(out, "ps", DIST_SIGNAL_TASK="1")
    assert took < LIMIT
    lines = {}
    for name, (rc, log) in result.items():
        assert rc == 128 + int(signal.SIGTERM), f"{name} exited with {rc}:\n{log[-3000:]}"
        found = [ln for ln in log.splitlines() if ln.startswith("trainbus: training interrupted")]
        assert len(found) == 1, (name, log[-3000:])
        lines[name] = found[0][len("trainbus: "):]
    info0 = json.loads((out / "info_w0.json").read_text())
    assert "ModelSaver" in info0["optional"], "the trainbus-saver plugin is needed for this test"
    m = re.match(r"training interrupted by SIGTERM received by worker 1 at epoch \d+, global step (\d+);",
                 lines["w0"])
    assert m, lines["w0"]
    step = int(m.group(1))
    assert lines["w0"].endswith(f"; final checkpoint {out / 'log' / f'model-{step}'}"), lines["w0"]
    assert (out / "log" / f"model-{step}.index").is_file()
    assert f'model_checkpoint_path: "model-{step}"' in (out / "log" / "checkpoint").read_text()
    assert re.fullmatch(r"training interrupted by SIGTERM at epoch \d+, global step \d+", lines["w1"]), lines["w1"]
    assert lines["ps"] == "training interrupted by SIGTERM received by worker 1", lines["ps"]


_SERVE_COUNTS = """
import sys, threading, time
import tensorflow as tf
from trainbus_trainers_distributed.trainers import _done_queue, serve_parameter_server

tf1 = tf.compat.v1
ps, w0, w1 = sys.argv[1:4]
cluster = tf1.train.ClusterSpec({"ps": [f"127.0.0.1:{ps}"], "worker": [f"127.0.0.1:{w0}", f"127.0.0.1:{w1}"]})
server = tf1.train.Server(cluster, job_name="ps", task_index=0)
g = tf.Graph()
with g.as_default():
    queue = _done_queue(0, 2)
    report = [queue.enqueue([tf.constant(i)]) for i in range(2)]  # what each worker runs at its end
    size = queue.size()
sess = tf1.Session(server.target, graph=g, config=tf1.ConfigProto(device_filters=["/job:ps/task:0"]))


def workers_finish():
    for op in report:
        time.sleep(0.7)  # the ps polls meanwhile
        sess.run(op)


threading.Thread(target=workers_finish, daemon=True).start()
t0 = time.monotonic()
serve_parameter_server(server, timeout=60)
print("SERVED", round(time.monotonic() - t0, 2), int(sess.run(size)))
"""


def test_parameter_server_counts_the_workers_done_without_taking_their_reports(tmp_path):
    """A real ps server in its own process; two "workers" report done 0.7 s apart. The ps returns
    once both have reported, well before its time limit, and both reports are still in the queue.
    It reads the queue's size rather than dequeuing with a time limit: such a dequeue can take a
    report in the instant its run gives up, losing it. A full-suite run under load once hung
    that way: both workers had reported, the ps waited until the test killed it."""
    proc = subprocess.run([sys.executable, "-c", _SERVE_COUNTS, *map(str, free_ports(3))], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("SERVED ")]
    assert line, (proc.stdout[-2000:], proc.stderr[-2000:])
    took, left = float(line[0].split()[1]), int(line[0].split()[2])
    assert 1.3 <= took < 30, took  # waited for the second report, and not until the time limit
    assert left == 2, left  # counted, not taken
    assert "all 2 workers finished" in proc.stderr + proc.stdout


# ---------------------------------------------------------------- in-process


def _server(job, task, ports=None):
    import tensorflow as tf

    ports = ports or free_ports(2)
    tf1 = tf.compat.v1
    cluster = tf1.train.ClusterSpec({"ps": [f"127.0.0.1:{ports[0]}"], "worker": [f"127.0.0.1:{ports[1]}"]})
    return tf1.train.Server(cluster, job_name=job, task_index=task, start=False)


def test_roles_and_bad_arguments():
    import trainbus.train

    w = trainbus.train.DistributedTrainerReplicated(1, _server("worker", 0))
    assert w.is_chief is True and w.job_name == "worker" and w.devices == [0]
    assert w.raw_devices == ["/job:worker/task:0/cpu:0"]
    p = trainbus.train.DistributedTrainerParameterServer([0], _server("ps", 0))
    assert p.is_chief is False and p.job_name == "ps"
    with pytest.raises(TypeError, match="server must be a tf.compat.v1.train.Server"):
        trainbus.train.DistributedTrainerReplicated(1, "localhost:2222")
    with pytest.raises(ValueError, match="caching_device must be 'cpu' or 'gpu'"):
        trainbus.train.DistributedTrainerParameterServer(1, _server("worker", 0), caching_device="tpu")
    with pytest.raises(ValueError, match="at least one device"):
        trainbus.train.DistributedTrainerReplicated(0, _server("worker", 0))
