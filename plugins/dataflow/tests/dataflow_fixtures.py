"""Helpers shared by the DataFlow plugin's tests for writing test data in real file formats."""

from __future__ import annotations


def encode_varint(n: int) -> bytes:
    """``n`` (>= 0) as a protocol-buffer base-128 varint, for encoding Caffe messages by hand."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)
