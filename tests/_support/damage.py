"""Ways the tests damage a file the way a crash or a bad disk would."""

from __future__ import annotations

import os


def truncate(path, keep=0.5):
    """Cut ``path`` to ``keep`` of its size (a write that stopped part way)."""
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(int(size * keep))


def flip_byte(path):
    """Invert the byte in the middle of ``path`` (a bit rot a checksum should catch)."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    data[len(data) // 2] ^= 0xFF
    with open(path, "wb") as f:
        f.write(bytes(data))
