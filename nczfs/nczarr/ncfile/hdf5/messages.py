"""Object header messages and object headers (File Format Specification, IV.A).

Each function returns a (message type, body) pair; :func:`object_header` lays them out in one
version-1 header (every message's body padded to eight bytes, no continuation),
:func:`object_header_v2` in a version-2 one (``OHDR``: HDF5 reads an Attribute Info message, and
so dense attribute storage, only from these).
"""

from __future__ import annotations

import struct

from nczfs.nczarr.ncfile.hdf5.checksum import lookup3
from nczfs.nczarr.ncfile.hdf5.types import Datatype, padded

DATASPACE, DATATYPE, FILL_VALUE, LAYOUT, FILTERS, ATTRIBUTE, SYMBOL_TABLE = 0x1, 0x3, 0x5, 0x8, 0xB, 0xC, 0x11

#: HDF5 filter identifiers
DEFLATE, SHUFFLE = 1, 2
_FILTER_NAMES = {DEFLATE: "deflate", SHUFFLE: "shuffle", 32001: "blosc", 32015: "Zstandard"}

Message = tuple[int, bytes]


class TooLarge(ValueError):
    """A message too large for an object header (64 KiB)."""


def fill_value(value: bytes | None) -> Message:
    """A fill value message (version 3): chunks allocated incrementally, fill written if set,
    ``value`` (None: the library's default, zeros)."""
    flags = 3 | (2 << 2)
    if value is None:
        return FILL_VALUE, struct.pack("<BB", 3, flags)
    return FILL_VALUE, struct.pack("<BBI", 3, flags | 0x20, len(value)) + value


def filters(pipeline: list[tuple[int, list[int]]]) -> Message:
    """A filter pipeline message (version 1): (filter id, client data) in the order applied on
    writing."""
    body = struct.pack("<BB6x", 1, len(pipeline))
    for fid, cd in pipeline:
        name = _FILTER_NAMES.get(fid, "")
        raw = padded(name.encode() + b"\0") if name else b""
        body += struct.pack("<HHHH", fid, len(raw), 0, len(cd)) + raw
        body += struct.pack(f"<{len(cd)}I", *cd) + (b"\0" * 4 if len(cd) % 2 else b"")
    return FILTERS, body


def chunked_layout(btree: int, chunks: tuple[int, ...], itemsize: int) -> Message:
    """A chunked layout message (version 3) indexed by the version-1 B-tree at ``btree``."""
    dims = (*chunks, itemsize)
    return LAYOUT, struct.pack(f"<BBBQ{len(dims)}I", 3, 2, len(dims), btree, *dims)


def contiguous_layout(address: int, size: int) -> Message:
    """A contiguous layout message (version 3): ``size`` bytes at ``address``."""
    return LAYOUT, struct.pack("<BBQQ", 3, 1, address, size)


def symbol_table(btree: int, heap: int) -> Message:
    return SYMBOL_TABLE, struct.pack("<QQ", btree, heap)


def attribute(name: str, dtype: Datatype, space: bytes, data: bytes) -> Message:
    """An attribute message (version 1): ``data`` holds its elements as stored."""
    raw = name.encode("utf-8") + b"\0"
    head = struct.pack("<BBHHH", 1, 0, len(raw), len(dtype.message), len(space))
    return ATTRIBUTE, head + padded(raw) + padded(dtype.message) + padded(space) + data


def datatype(dtype: Datatype) -> Message:
    return DATATYPE, dtype.message


def dataspace(space: bytes) -> Message:
    return DATASPACE, space


def header_size(messages: list[Message]) -> int:
    """Bytes of the object header :func:`object_header` makes of ``messages``."""
    return 16 + sum(8 + len(padded(body)) for _, body in messages)


def object_header(messages: list[Message]) -> bytes:
    """A version-1 object header holding ``messages`` in one chunk."""
    out = b""
    for mtype, body in messages:
        body = padded(body)
        if len(body) > 0xFFFF:
            raise TooLarge(f"a message of {len(body)} bytes (type {mtype:#x}): more than an object header holds")
        flags = 1 if mtype == DATATYPE else 0
        out += struct.pack("<HHB3x", mtype, len(body), flags) + body
    return struct.pack("<BBHII4x", 1, 0, len(messages), 1, len(out)) + out


#: a version-2 header's flags: attribute creation order tracked and indexed
_ORDER_FLAGS = 0x04 | 0x08
#: a message's flags: constant (datatype), not to be shared (attribute info)
_MESSAGE_FLAGS = {DATATYPE: 1, 0x15: 4}


def _v2_body(messages: list[Message]) -> bytes:
    out = b""
    for mtype, body in messages:
        if len(body) > 0xFFFF:
            raise TooLarge(f"a message of {len(body)} bytes (type {mtype:#x}): more than an object header holds")
        out += struct.pack("<BHBH", mtype, len(body), _MESSAGE_FLAGS.get(mtype, 0), 0) + body
    return out


def _size_bytes(n: int) -> int:
    return 1 if n < 0x100 else 2 if n < 0x10000 else 4


def object_header_v2(messages: list[Message]) -> bytes:
    """A version-2 object header holding ``messages`` in one chunk, attribute creation order
    tracked and indexed (its messages' creation order fields 0: they are no attributes)."""
    body = _v2_body(messages)
    width = _size_bytes(len(body))
    flags = _ORDER_FLAGS | {1: 0, 2: 1, 4: 2}[width]
    head = b"OHDR" + struct.pack("<BB", 2, flags) + len(body).to_bytes(width, "little")
    out = head + body
    return out + struct.pack("<I", lookup3(out))
