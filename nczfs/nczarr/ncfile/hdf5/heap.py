"""A global heap collection (File Format Specification, III.E): the elements of variable-length
data (strings, the sequences of object references of ``DIMENSION_LIST``).

Objects are added in the order the file's metadata is encoded; a collection holds them all (at
least 4096 bytes, as the library reads no less, the rest a free-space object).
"""

from __future__ import annotations

import struct

from nczfs.nczarr.ncfile.hdf5.types import pad8

MIN_SIZE = 4096
_HEAD = 16


class GlobalHeap:
    def __init__(self, address: int = 0):
        #: where the collection lies (0 while its size is not yet known)
        self.address = address
        self.objects: list[bytes] = []

    def add(self, data: bytes, count: int) -> bytes:
        """Store ``data`` (``count`` elements) as an object; the 16-byte vlen element naming it."""
        self.objects.append(data)
        return struct.pack("<IQI", count, self.address, len(self.objects))

    @property
    def size(self) -> int:
        """Bytes of the collection (0 if it holds nothing)."""
        if not self.objects:
            return 0
        used = _HEAD + sum(_HEAD + pad8(len(o)) for o in self.objects)
        return max(MIN_SIZE, pad8(used + _HEAD))

    def encode(self) -> bytes:
        size = self.size
        if not size:
            return b""
        out = b"GCOL" + struct.pack("<B3xQ", 1, size)
        for i, obj in enumerate(self.objects, 1):
            out += struct.pack("<HH4xQ", i, 1, len(obj)) + obj + bytes(pad8(len(obj)) - len(obj))
        free = size - len(out)
        out += struct.pack("<HH4xQ", 0, 0, free)
        return out + bytes(size - len(out))
