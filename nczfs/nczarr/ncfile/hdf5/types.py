"""HDF5 datatype and dataspace messages (File Format Specification, sections IV.A.2.b, IV.A.2.d).

A :class:`Datatype` is the encoded message body and the size of one element; the constructors
make the kinds a netCDF-4 file needs: integers, IEEE floats, fixed and variable-length strings,
object references, variable-length sequences and compounds.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

#: the undefined address (all bits set)
UNDEF = 0xFFFFFFFFFFFFFFFF
#: a dataspace axis that may grow without bound
UNLIMITED = 0xFFFFFFFFFFFFFFFF
#: the size of a variable-length element in the file (length, heap collection address, index)
VLEN_SIZE = 16


def pad8(n: int) -> int:
    """``n`` rounded up to a multiple of eight."""
    return (n + 7) & ~7


def padded(data: bytes) -> bytes:
    return data + bytes(pad8(len(data)) - len(data))


@dataclass(frozen=True)
class Datatype:
    #: the datatype message body
    message: bytes
    #: bytes of one element
    size: int


def _head(cls: int, bits: int, size: int, version: int = 1) -> bytes:
    return struct.pack("<B3sI", (version << 4) | cls, bits.to_bytes(3, "little"), size)


def integer(size: int, signed: bool, big_endian: bool = False) -> Datatype:
    """A fixed-point type of ``size`` bytes."""
    bits = (1 if big_endian else 0) | (8 if signed else 0)
    return Datatype(_head(0, bits, size) + struct.pack("<HH", 0, 8 * size), size)


_FLOATS = {4: (31, 23, 8, 0, 23, 127), 8: (63, 52, 11, 0, 52, 1023)}


def floating(size: int, big_endian: bool = False) -> Datatype:
    """An IEEE 754 float of 4 or 8 bytes."""
    sign, eloc, esize, mloc, msize, bias = _FLOATS[size]
    bits = (1 if big_endian else 0) | (2 << 4) | (sign << 8)
    props = struct.pack("<HHBBBBI", 0, 8 * size, eloc, esize, mloc, msize, bias)
    return Datatype(_head(1, bits, size) + props, size)


def fixed_string(size: int, utf8: bool = False, nullterm: bool = True) -> Datatype:
    """A string of ``size`` bytes, null-terminated (or null-padded), ASCII or UTF-8."""
    bits = (0 if nullterm else 1) | ((1 if utf8 else 0) << 4)
    return Datatype(_head(3, bits, size), size)


def reference() -> Datatype:
    """An object reference (the address of an object header)."""
    return Datatype(_head(7, 0, 8), 8)


def vlen_string(utf8: bool = True) -> Datatype:
    """A variable-length string, null-terminated, its bytes in the global heap."""
    bits = 1 | (0 << 4) | ((1 if utf8 else 0) << 8)
    return Datatype(_head(9, bits, VLEN_SIZE) + integer(1, False).message, VLEN_SIZE)


def vlen_sequence(base: Datatype) -> Datatype:
    """A variable-length sequence of ``base`` elements, in the global heap."""
    return Datatype(_head(9, 0, VLEN_SIZE) + base.message, VLEN_SIZE)


def compound(members: list[tuple[str, int, Datatype]], size: int) -> Datatype:
    """A compound of (name, byte offset, type) members, ``size`` bytes (version 1 encoding)."""
    body = b""
    for name, offset, mtype in members:
        body += padded(name.encode() + b"\0") + struct.pack("<IB3xI4x16x", offset, 0, 0) + mtype.message
    return Datatype(_head(6, len(members), size) + body, size)


def dataspace(shape: tuple[int, ...] | None, maxshape: tuple[int, ...] | None = None) -> bytes:
    """A dataspace message: ``shape`` None is a null dataspace (no element), ``()`` a scalar;
    ``maxshape`` (its axes ``UNLIMITED`` or a size) is given where it differs from ``shape``."""
    if shape is None:
        return struct.pack("<BBBB", 2, 0, 0, 2)
    flags = 1 if maxshape is not None else 0
    body = struct.pack("<BBBB4x", 1, len(shape), flags, 0)
    body += struct.pack(f"<{len(shape)}Q", *shape)
    if maxshape is not None:
        body += struct.pack(f"<{len(maxshape)}Q", *maxshape)
    return body
