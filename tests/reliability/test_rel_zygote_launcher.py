"""The test zygote (tests/_support/zygote.py) and its launcher (tests/_support/zygote_launcher.py).

The launcher, which ``horovodrun`` starts for each rank: a stop signal that reaches it after its
child ended, before the child's status did (``horovodrun`` terminating the other ranks once one
exited), is no error: it ends as the child ended, without a traceback. A child takes its
temporary folder from its own environment, as a new interpreter does."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
import zygote  # noqa: E402 - tests/_support
from subprocs import default_signal_dispositions, pid_alive, wait_for  # noqa: E402 - tests/_support


def test_signal_after_the_child_ended_ends_as_the_child_did(tmp_path):
    pidfile, go = tmp_path / "child.pid", tmp_path / "go"
    script = tmp_path / "child.py"
    script.write_text("import os, sys, time\n"
                      f"open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
                      f"while not os.path.exists({str(go)!r}):\n"
                      "    time.sleep(0.02)\n"
                      "sys.exit(3)\n")
    launcher = subprocess.Popen([*zygote.zygote().launcher(), str(script)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True,
                                preexec_fn=default_signal_dispositions)
    try:
        child = int(wait_for(lambda: pidfile.exists() and pidfile.read_text(), 60, "the child's pid file",
                             launcher))
        # stopped, the launcher reads no status: the child ends (and is reaped) meanwhile
        os.kill(launcher.pid, signal.SIGSTOP)
        go.touch()
        wait_for(lambda: not pid_alive(child), 60, "the child to end")
        os.kill(launcher.pid, signal.SIGTERM)  # handled once resumed: the child is gone by then
        os.kill(launcher.pid, signal.SIGCONT)
        out, err = launcher.communicate(timeout=60)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
    assert "Traceback" not in err, err
    assert launcher.returncode == 3, (launcher.returncode, err)


def test_a_child_takes_its_temporary_folder_from_its_own_tmpdir(tmp_path):
    """Not the folder the zygote found when it started: a test that gives its child
    ``TMPDIR=<its tmp_path>`` gets the child's temporary files removed with ``tmp_path``."""
    script = tmp_path / "where.py"
    script.write_text("import tempfile\nprint(tempfile.gettempdir())\nprint(tempfile.mkdtemp())\n")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        r = zygote.run([sys.executable, str(script)], cwd=tmp_path, env=dict(os.environ, TMPDIR=str(tmp_path / name)),
                       timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        folder, made = r.stdout.split()
        assert folder == str(tmp_path / name) and Path(made).parent == tmp_path / name, r.stdout
