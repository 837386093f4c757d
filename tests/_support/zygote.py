"""Python processes for the tests without paying TensorFlow's import in each one.

Importing TensorFlow costs each Python process about 5 s of CPU; the suite starts a few hundred
processes that run a script or ``python -m trainbus`` and import it. A *zygote* is one process
per pytest worker that imported TensorFlow (nothing else of ours) and then forks a child for
every command it is asked to run. The child is a real process: its own pid, its own session
(``killpg`` works), the default dispositions of SIGINT/SIGTERM/SIGHUP, the command's
environment, working directory, ``sys.argv`` and ``sys.path``, and its stdin/stdout/stderr are
the pipes of the :class:`ZygoteProcess` the test holds (passed over a Unix socket). It runs the
script as ``__main__`` and ends the way that script's own interpreter would (exit status,
uncaught exception, death by a signal), atexit handlers included.

What a child cannot differ in from its zygote is what TensorFlow read when it was imported
(``TF_CPP_MIN_LOG_LEVEL``, ``TF_ENABLE_ONEDNN_OPTS``, ...): a test about import-time behaviour
(TensorFlow's C++ log lines on stderr, a signal during ``import tensorflow``, the process's
command line, the hash seed of ``str``) starts a new interpreter instead
(``subprocs.start_in_session(..., fresh=True)`` or ``subprocess``).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import Any

# The zygote's program. It speaks SOCK_SEQPACKET messages on the socket whose fd is argv[1]:
#   <- {"argv": [...], "cwd": ..., "env": {...}, "new_session": bool, "module": str|None,
#       "code": str|None} + the child's stdin, stdout and stderr
#   -> {"started": pid}            once forked
#   -> {"exit": pid, "status": n}  when that child ended (n as subprocess's returncode)
_SERVER = r'''
import json, os, select, signal, socket, sys
sock = socket.socket(fileno=int(sys.argv[1]))
listener = None
if len(sys.argv) > 3 and sys.argv[3]:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(sys.argv[3])
    listener.listen(64)
for name in sys.argv[2].split(","):
    if name:
        __import__(name)
import tensorflow as _tf
_tf.compat.v1.train.Saver, _tf.compat.v1.layers  # load the lazily imported v1 API once
base_path = [p for p in sys.path[1:]]
import gc
gc.freeze()  # the children's collections leave the zygote's objects (and their pages) alone
sock.send(b'{"ready": true}')
children = {}  # pid -> the socket its exit status goes to
launchers = {}  # a launcher's connection -> the pid it started (None before)

def reap():
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        to = children.pop(pid)
        code = os.waitstatus_to_exitcode(status)
        try:
            to.send(json.dumps({"exit": pid, "status": code}).encode())
        except OSError:  # a launcher that is gone
            pass

def set_cmdline(argv):
    # what ps and /proc/<pid>/cmdline show: the command, written over this process's own
    # argument area (the zygote's, long enough: it holds this program), the rest zeroed
    import ctypes
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[45]), int(fields[46])
        data = "\0".join([sys.executable, *argv]).encode()[:end - start - 1]
        ctypes.memmove(start, data + b"\0" * (end - start - len(data)), end - start)
    except (OSError, ValueError, IndexError):
        pass

def child(req, fds):
    sock.close()
    if listener is not None:
        listener.close()
    for conn in launchers:
        conn.close()
    if req["new_session"]:
        os.setsid()
    for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(s, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # what a new interpreter installs
    for i, fd in enumerate(fds):
        os.dup2(fd, i)
        os.close(fd)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    if "tempfile" in sys.modules:  # the temporary folder a new interpreter finds from its TMPDIR
        sys.modules["tempfile"].tempdir = None
    import io, random, runpy
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    def stream(fd, mode):
        raw = io.FileIO(fd, mode, closefd=False)
        if mode == "r":
            return io.TextIOWrapper(io.BufferedReader(raw), encoding="utf-8")
        buf = raw if unbuffered else io.BufferedWriter(raw)
        return io.TextIOWrapper(buf, encoding="utf-8", errors="backslashreplace" if fd == 2 else "strict",
                                line_buffering=fd == 2 or raw.isatty(), write_through=unbuffered)
    sys.stdin, sys.stdout, sys.stderr = stream(0, "r"), stream(1, "w"), stream(2, "w")
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = sys.stdin, sys.stdout, sys.stderr
    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    argv = req["argv"]
    set_cmdline((["-m", req["module"]] if req["module"] else ["-c", "..."] if req["code"] is not None else []) + list(argv))
    random.seed()
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()
    code = 0
    try:
        if req["code"] is not None:
            import types
            sys.argv = ["-c", *argv]
            sys.path[:] = ["", *extra, *base_path]
            main = types.ModuleType("__main__")
            sys.modules["__main__"] = main
            exec(compile(req["code"], "<string>", "exec"), main.__dict__)
        elif req["module"]:
            sys.argv = [req["module"], *argv]
            sys.path[:] = [os.getcwd(), *extra, *base_path]
            runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            sys.path[:] = [os.path.dirname(os.path.realpath(argv[0])), *extra, *base_path]
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as e:  # as the interpreter treats an uncaught SystemExit
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException as e:  # noqa: BLE001 - the script's uncaught exception
        sys.excepthook(type(e), e, e.__traceback__)
        code = -signal.SIGINT if isinstance(e, KeyboardInterrupt) else 1
    # the interpreter's own shutdown, less the teardown of every module object: in a forked
    # child that would write to (and so copy) every page the zygote's TensorFlow import filled
    import atexit, threading
    threading._shutdown()
    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)

def start(req, fds, to):
    pid = os.fork()
    if pid == 0:
        child(req, fds)  # never returns: os._exit or death by the signal the script died of
    for fd in fds:
        os.close(fd)
    children[pid] = to
    to.send(json.dumps({"started": pid}).encode())
    return pid

while True:
    ready, _, _ = select.select([sock, *([listener] if listener else []), *launchers], [], [], 0.05)
    reap()
    for r in ready:
        if r is listener:
            conn, _ = listener.accept()
            launchers[conn] = None
            continue
        msg, fds, _flags, _addr = socket.recv_fds(r, 1 << 20, 3)
        if r is sock:
            if not msg:
                raise SystemExit(0)
            start(json.loads(msg), fds, sock)
        elif msg and launchers[r] is None:
            launchers[r] = start(json.loads(msg), fds, r)
        else:
            # a launcher that ended before its child did (killed): its child goes with it, as a
            # child goes with the process tree it belongs to
            pid = launchers.pop(r)
            if pid is not None and pid in children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            r.close()
'''


class ZygoteProcess:
    """The part of ``subprocess.Popen``'s interface the tests use, for a zygote's child:
    ``pid``, ``args``, ``stdout``/``stderr`` (text pipes), ``poll``, ``wait``, ``communicate``,
    ``send_signal``, ``terminate``, ``kill`` and ``returncode``."""

    def __init__(self, args: list[str], pid: int, stdout: Any, stderr: Any, stdin: Any, ended: threading.Event) -> None:
        self.args = args
        self.pid = pid
        self.stdout, self.stderr, self.stdin = stdout, stderr, stdin
        self.returncode: int | None = None
        self._ended = ended

    def _set_status(self, status: int) -> None:
        self.returncode = status
        self._ended.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode  # type: ignore[return-value]

    def communicate(self, input: str | None = None, timeout: float | None = None) -> tuple[str, str]:
        if self.stdin is not None:
            if input:
                self.stdin.write(input)
            self.stdin.close()
            self.stdin = None
        out: dict[str, str] = {}

        def drain(name: str, f: Any) -> None:
            out[name] = f.read() if f is not None else None

        readers = [threading.Thread(target=drain, args=(n, f), daemon=True)
                   for n, f in (("out", self.stdout), ("err", self.stderr))]
        for t in readers:
            t.start()
        for t in readers:
            t.join(timeout)
            if t.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout)
        self.wait(timeout)
        for f in (self.stdout, self.stderr):
            if f is not None:
                f.close()
        return out.get("out"), out.get("err")  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """One zygote process (see the module's docstring); :meth:`popen` runs a command in a child."""

    def __init__(self, preload: tuple[str, ...] = ("numpy",), python: str = sys.executable,
                 env: dict | None = None) -> None:
        """``python``: the interpreter of the zygote and so of its children (another virtual
        environment's); ``env``: the zygote's environment (default: this process's)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = dict(os.environ if env is None else env)
        env["TF_CPP_MIN_LOG_LEVEL"] = env.get("TF_CPP_MIN_LOG_LEVEL", "3")
        self.python = python
        self._dir = tempfile.mkdtemp(prefix="trainbus-zygote-")  # 0700: only this user reaches the socket
        self.socket_path = os.path.join(self._dir, "launch")
        self._proc = subprocess.Popen([python, "-c", _SERVER, str(theirs.fileno()), ",".join(preload),
                                       self.socket_path],
                                      pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True)
        theirs.close()
        self._sock = ours
        first = self._sock.recv(1 << 16)
        if json.loads(first or b"{}").get("ready") is not True:
            raise RuntimeError("the test zygote did not start (it imports tensorflow)")
        self._lock = threading.Lock()
        self._started: list[int] = []
        self._started_cv = threading.Condition()
        self._procs: dict[int, ZygoteProcess] = {}
        self._early: dict[int, int] = {}
        threading.Thread(target=self._listen, daemon=True, name="zygote-listener").start()

    def _listen(self) -> None:
        while True:
            try:
                msg = self._sock.recv(1 << 16)
            except OSError:
                msg = b""
            if not msg:
                return
            m = json.loads(msg)
            with self._started_cv:
                if "started" in m:
                    self._started.append(m["started"])
                    self._started_cv.notify_all()
                else:
                    p = self._procs.pop(m["exit"], None)
                    if p is None:
                        self._early[m["exit"]] = m["status"]
                    else:
                        p._set_status(m["status"])

    def alive(self) -> bool:
        return self._proc.poll() is None

    def popen(self, cmd: list[str], cwd: Any = None, env: dict | None = None, new_session: bool = True,
              stdin: Any = subprocess.DEVNULL, stdout: Any = subprocess.PIPE,
              stderr: Any = subprocess.PIPE) -> ZygoteProcess:
        """Start ``cmd`` (``[sys.executable, SCRIPT, ...]``, ``[sys.executable, "-m", MODULE, ...]`` or
        ``[sys.executable, "-c", CODE, ...]``, optionally with ``-u`` first) in a child. ``env`` is the child's whole environment (default:
        this process's). ``stdout``/``stderr``: a pipe (``subprocess.PIPE``, the default) or an
        open file; ``stderr=subprocess.STDOUT`` too. ``ValueError`` for any other command (start
        it with ``subprocess``)."""
        if not cmd or cmd[0] != self.python:
            raise ValueError(f"a zygote runs Python commands of its interpreter ({self.python}) only, not {cmd!r}")
        module = None
        rest = list(cmd[1:])
        env = dict(os.environ if env is None else env)
        if rest[:1] == ["-u"]:
            env["PYTHONUNBUFFERED"] = "1"
            rest = rest[1:]
        code = None
        if rest[:1] == ["-m"]:
            module, rest = rest[1], rest[2:]
        elif rest[:1] == ["-c"]:
            code, rest = rest[1], rest[2:]
        elif not rest or rest[0].startswith("-"):
            raise ValueError(f"a zygote runs a script or -m MODULE, not {cmd!r}")
        out_r = err_r = None
        if stdout == subprocess.PIPE:
            out_r, out_w = os.pipe()
        else:
            out_w = os.dup(stdout.fileno())
        if stderr == subprocess.STDOUT:
            err_w = os.dup(out_w)
        elif stderr == subprocess.PIPE:
            err_r, err_w = os.pipe()
        else:
            err_w = os.dup(stderr.fileno())
        in_pipe = None
        if stdin == subprocess.PIPE:
            in_r, in_w = os.pipe()
            in_pipe = open(in_w, "w")
        else:
            in_r = os.open(os.devnull, os.O_RDONLY)
        req = {"argv": rest, "module": module, "code": code, "cwd": os.fspath(cwd or os.getcwd()),
               "env": env, "new_session": new_session}
        with self._lock:
            with self._started_cv:
                n = len(self._started)
            socket.send_fds(self._sock, [json.dumps(req).encode()], [in_r, out_w, err_w])
            for fd in (in_r, out_w, err_w):
                os.close(fd)
            with self._started_cv:
                if not self._started_cv.wait_for(lambda: len(self._started) > n, timeout=60):
                    raise RuntimeError("the test zygote did not fork within 60 s")
                pid = self._started[n]
                proc = ZygoteProcess(cmd, pid, None if out_r is None else open(out_r, encoding="utf-8", errors="replace"),
                                     None if err_r is None else open(err_r, encoding="utf-8", errors="replace"),
                                     in_pipe, threading.Event())
                if pid in self._early:
                    proc._set_status(self._early.pop(pid))
                else:
                    self._procs[pid] = proc
        return proc

    def run(self, cmd: list[str], cwd: Any = None, env: dict | None = None, timeout: float | None = None,
            input: str | None = None) -> subprocess.CompletedProcess:
        """``subprocess.run(cmd, capture_output=True, text=True, ...)`` in a child; on a timeout
        the child's session is killed and ``TimeoutExpired`` raised."""
        proc = self.popen(cmd, cwd=cwd, env=env, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL)
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            raise
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)

    def launcher(self) -> list[str]:
        """The command prefix that runs a Python command in a child of this zygote when another
        program starts it: ``[*zygote().launcher(), SCRIPT, ARGS...]`` (e.g. the ranks
        ``horovodrun`` starts). It runs ``tests/_support/zygote_launcher.py``: a small process
        (no site, no TensorFlow) that hands its environment, working directory and
        stdin/stdout/stderr to the zygote, passes SIGINT, SIGTERM and SIGHUP on to the child and
        ends as the child ended. When the launcher is killed, the zygote kills the child."""
        return [self.python, "-S", os.path.join(os.path.dirname(os.path.abspath(__file__)), "zygote_launcher.py"),
                self.socket_path]

    def close(self) -> None:
        try:
            self._sock.close()
        finally:
            if self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait()
            shutil.rmtree(self._dir, ignore_errors=True)


_ZYGOTE: Zygote | None = None


def zygote_pid() -> int | None:
    """The pid of this process's zygote, if one runs (not a process a test left behind)."""
    return _ZYGOTE._proc.pid if _ZYGOTE is not None and _ZYGOTE.alive() else None


def zygote() -> Zygote:
    """This process's zygote, started on first use and ended with the process."""
    global _ZYGOTE
    if _ZYGOTE is None or not _ZYGOTE.alive():
        _ZYGOTE = Zygote()
        atexit.register(_ZYGOTE.close)
    return _ZYGOTE


def run(cmd: list[str], cwd: Any = None, env: dict | None = None, timeout: float | None = None,
        input: str | None = None) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, ...)`` through this process's zygote."""
    return zygote().run(cmd, cwd=cwd, env=env, timeout=timeout, input=input)
