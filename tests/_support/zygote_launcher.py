"""``python -S zygote_launcher.py SOCKET SCRIPT ARGS...``: run ``python SCRIPT ARGS...`` in a child
of the test zygote listening on ``SOCKET`` (see ``zygote.Zygote.launcher``), for a command that a
program other than the test starts (``horovodrun``'s ranks). Imports nothing but the standard
library's socket layer: it starts in milliseconds.

The child gets this process's environment, working directory and stdin/stdout/stderr, in a
session of its own. SIGINT, SIGTERM and SIGHUP sent to this process are passed on to the child
(one that arrives after the child ended, before its status did, is dropped); this process ends as
the child ended (its exit status, or death by the same signal). If this process is killed, the
zygote kills the child.
"""

import json
import os
import signal
import socket
import sys


def main() -> None:
    path, argv = sys.argv[1], sys.argv[2:]
    if not argv or argv[0].startswith("-"):
        sys.stderr.write(f"zygote_launcher: expected SCRIPT ARGS..., got {argv!r}\n")
        os._exit(2)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.connect(path)
    child = []
    pending = []

    def pass_on(sig):
        try:
            os.kill(child[0], sig)
        except ProcessLookupError:
            pass  # the child already ended: its status, on its way from the zygote, decides ours

    def forward(sig, _frame):
        if child:
            pass_on(sig)
        else:
            pending.append(sig)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    req = {"argv": argv, "module": None, "code": None, "cwd": os.getcwd(), "env": dict(os.environ),
           "new_session": True}
    fds = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            fds.append(fd)
        except OSError:  # closed: the child gets /dev/null there
            fds.append(os.open(os.devnull, os.O_RDWR))
    socket.send_fds(sock, [json.dumps(req).encode()], fds)
    while True:
        try:
            msg = sock.recv(1 << 16)
        except InterruptedError:
            continue
        if not msg:
            sys.stderr.write("zygote_launcher: the test zygote ended before the command did\n")
            os._exit(70)
        m = json.loads(msg)
        if "started" in m:
            child.append(m["started"])
            for sig in pending:
                pass_on(sig)
            continue
        code = m["status"]
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(code & 0xFF)


main()
