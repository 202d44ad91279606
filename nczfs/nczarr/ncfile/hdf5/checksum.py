"""Bob Jenkins' lookup3 hash (``hashlittle``, public domain), as HDF5 uses it: the checksum of
version-2 object headers, fractal heaps and version-2 B-trees, and the hash of an attribute's
name in a dense attribute index (File Format Specification, I.C)."""

from __future__ import annotations

import struct

_M = 0xFFFFFFFF


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & _M


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    for s1, s2 in ((4, 6), (8, 16), (19, 4)):
        a = ((a - c) & _M) ^ _rot(c, s1)
        c = (c + b) & _M
        b = ((b - a) & _M) ^ _rot(a, s2)
        a = (a + c) & _M
        c, a, b = b, c, a  # the next pair of steps works on (c, a, b) as these did on (a, b, c)
    return a, b, c


def _final(a: int, b: int, c: int) -> int:
    c = ((c ^ b) - _rot(b, 14)) & _M
    a = ((a ^ c) - _rot(c, 11)) & _M
    b = ((b ^ a) - _rot(a, 25)) & _M
    c = ((c ^ b) - _rot(b, 16)) & _M
    a = ((a ^ c) - _rot(c, 4)) & _M
    b = ((b ^ a) - _rot(a, 14)) & _M
    return ((c ^ b) - _rot(b, 24)) & _M


def lookup3(data: bytes, initval: int = 0) -> int:
    """The 32-bit lookup3 hash of ``data`` (its bytes taken little-endian, as HDF5 does)."""
    n = len(data)
    a = b = c = (0xDEADBEEF + n + initval) & _M
    full = (n - 1) // 12 * 12 if n else 0  # the last 1..12 bytes are the tail
    for x, y, z in struct.iter_unpack("<III", data[:full]):
        a, b, c = _mix((a + x) & _M, (b + y) & _M, (c + z) & _M)
    if n == 0:
        return c
    x, y, z = struct.unpack("<III", data[full:] + bytes(12 - (n - full)))
    return _final((a + x) & _M, (b + y) & _M, (c + z) & _M)
