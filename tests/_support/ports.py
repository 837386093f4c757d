"""Free TCP ports for test clusters, chosen OUTSIDE the kernel's ephemeral range.

Binding to port 0 returns an ephemeral port; once released, the kernel may hand that same port
to an outgoing connection of another process (a gRPC channel of the cluster that is starting)
before the intended server binds it, and that server then never receives connections. Ports
below the ephemeral range are never used as source ports, so they stay free until bound.
"""

from __future__ import annotations

import random
import socket


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports on 127.0.0.1 that nothing listens on, below the ephemeral range."""
    hi = min(_ephemeral_low(), 65536) - 1
    lo = max(1024, hi - 12000)
    rng = random.SystemRandom()
    ports: list[int] = []
    for _ in range(1000):
        p = rng.randint(lo, hi)
        if p in ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                continue
        ports.append(p)
        if len(ports) == n:
            return ports
    raise RuntimeError(f"could not find {n} free ports in {lo}-{hi}")
