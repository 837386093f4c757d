"""``trainbus train RUN.toml`` interrupted while the run file is still being checked (a module
the file names is being imported): one line on stderr, status 128+signal, no traceback, and the
log directory of an earlier run - its checkpoint included - left exactly as it was, although the
file says to delete it (``logdir_action = "d"`` is carried out only when training starts).

The module the run file names writes a file when its import starts, then waits; the test waits
for that file (generous deadline), then sends the signal.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from subprocs import trainbus_train, wait_for  # tests/_support

pytestmark = pytest.mark.timeout(400)

ROOT = Path(__file__).resolve().parents[2]
START_LIMIT = 240
STOP_LIMIT = 120

_BLOCKING_MODULE = '''
"""Stands for a slow import of the user's code (e.g. a module that loads a data index)."""
import pathlib
import time

pathlib.Path({marker!r}).write_text("importing\\n")
while True:  # until the test signals the process
    time.sleep(0.05)
'''

_RUN_FILE = """
[model]
class = "{model}"

[data]
function = "tinyrun:make_data"
args = {{ n = 32, batch = 8 }}

[trainer]
name = "SimpleTrainer"

[[callbacks]]
name = "ModelSaver"

[train]
steps_per_epoch = 4
max_epoch = 1
logdir = "{logdir}"
logdir_action = "{action}"
"""


def _trainbus_train(cwd: Path, run_file: Path, fresh: bool) -> subprocess.Popen:
    """``python -m trainbus train RUN_FILE`` in a session of its own: in a new interpreter when
    ``fresh`` (as a user starts it: TensorFlow is not imported yet while the run file's modules
    are), else forked from the worker's zygote (tests/_support/zygote.py)."""
    return trainbus_train(run_file, cwd, env={"TRAINBUS_DEBUG": "0"}, fresh=fresh)


def _snapshot(d: Path) -> dict[str, tuple[int, bytes]]:
    return {str(p.relative_to(d)): (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(d.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["TERM", "INT"])
def test_signal_while_the_run_file_is_checked(tmp_path: Path, sig: signal.Signals) -> None:
    (tmp_path / "tinyrun.py").write_text((ROOT / "tests" / "ecosystem" / "runfiles" / "tinyrun.py").read_text())
    logdir = tmp_path / "log"
    # an earlier run leaves a checkpoint in the log directory
    first = tmp_path / "first.toml"
    first.write_text(_RUN_FILE.format(model="tinyrun:LinearNet", logdir=logdir, action="k"))
    done = _trainbus_train(tmp_path, first, fresh=False)  # the earlier run: a zygote's child will do
    out, err = done.communicate(timeout=START_LIMIT)
    assert done.returncode == 0, err[-3000:]
    assert 'model_checkpoint_path: "model-4"' in (logdir / "checkpoint").read_text()
    before = _snapshot(logdir)
    assert "model-4.index" in before

    marker = tmp_path / "importing"
    (tmp_path / "slow_user_module.py").write_text(_BLOCKING_MODULE.format(marker=str(marker)))
    second = tmp_path / "second.toml"
    second.write_text(_RUN_FILE.format(model="slow_user_module:Net", logdir=logdir, action="d"))
    proc = _trainbus_train(tmp_path, second, fresh=True)  # interrupted before it imports TensorFlow
    try:
        wait_for(marker.exists, START_LIMIT, "the run file's module to start importing", proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=STOP_LIMIT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 128 + int(sig), (proc.returncode, err[-3000:])
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines == [f"trainbus: interrupted by {signal.Signals(sig).name} before training started (while checking "
                     f"the run file {second}); nothing was trained, no checkpoint was written"], err[-3000:]
    assert _snapshot(logdir) == before
