"""Reading the protocol-buffer wire format by hand, for the few Caffe messages the readers decode
(``BlobProto`` mean files, ``Datum`` LMDB records) without depending on protobuf or Caffe."""

from __future__ import annotations

from typing import Iterator

__all__ = ["read_varint", "iter_fields"]


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """The unsigned base-128 varint starting at ``buf[pos]`` and the position after it.

    Raises:
        ValueError: when ``buf`` ends inside the varint.
    """
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def iter_fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """The ``(field number, wire type, value)`` triples of one message, in the order they are stored.

    ``value`` is the unsigned integer of a varint (wire type 0), the 8 raw bytes of a 64-bit field
    (1), the payload of a length-delimited field (2) or the 4 raw bytes of a 32-bit field (5).

    Raises:
        ValueError: when the message ends inside a field or uses a wire type other than these four.
    """
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            val, pos = read_varint(buf, pos)
            yield field, wire, val
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            if pos + size > len(buf):
                raise ValueError(f"truncated {size * 8}-bit field")
            yield field, wire, buf[pos:pos + size]
            pos += size
        elif wire == 2:
            n, pos = read_varint(buf, pos)
            if pos + n > len(buf):
                raise ValueError(f"field {field} announces {n} bytes past the end")
            yield field, wire, buf[pos:pos + n]
            pos += n
        else:
            raise ValueError(f"unsupported wire type {wire}")
