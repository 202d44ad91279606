"""Dense attribute storage (File Format Specification, IV.A.2.v, III.G, III.A.2): an object's
attribute messages in a fractal heap, indexed by two version-2 B-trees, one by the hash of each
name (type 8) and one by creation order (type 9), as netCDF-C's files index them. An Attribute Info
message in the object's (version-2) header names the three.

The heap here is its root direct block alone (its size the heap's starting block size, a power of
two of at least 512 bytes; without a checksum), every attribute a managed object in it, so it holds
at most :data:`MAX_BLOCK` bytes of attribute messages; each B-tree is one leaf (depth 0), the node
as large as its records need. The storage is one run of bytes: the heap's header, the two B-trees'
headers, their leaves, then the direct block. Pure computation.
"""

from __future__ import annotations

import struct

from nczfs.nczarr.ncfile.hdf5.checksum import lookup3
from nczfs.nczarr.ncfile.hdf5.types import UNDEF

ATTRIBUTE_INFO = 0x15
#: the largest direct block (so a heap ID's offset and length fit its 8 bytes)
MAX_BLOCK = 1 << 24
#: the heap's address space, in bits (its IDs' offsets take 4 bytes)
_HEAP_BITS = 32
_ID_LEN = 8
_HEAP_HEADER = 146
_BTREE_HEADER = 38
_BLOCK_HEAD = 4 + 1 + 8 + _HEAP_BITS // 8
_LEAF_HEAD = 6
_NAME_RECORD, _ORDER_RECORD = 17, 13
#: attributes an object's creation order index holds (16 bits)
MAX_ATTRIBUTES = 0xFFFF


def _checked(data: bytes) -> bytes:
    return data + struct.pack("<I", lookup3(data))


def block_size(bodies: list[bytes]) -> int:
    """Bytes of the direct block holding the attribute messages ``bodies``."""
    need = _BLOCK_HEAD + sum(len(b) for b in bodies)
    size = 512
    while size < need:
        size *= 2
    return size


def fits(count: int, total: int) -> bool:
    """Whether dense storage here holds ``count`` attribute messages of ``total`` bytes."""
    return count <= MAX_ATTRIBUTES and _BLOCK_HEAD + total <= MAX_BLOCK


def _node_size(n: int, record: int) -> int:
    return max(512, _LEAF_HEAD + 4 + n * record)


def storage_size(bodies: list[bytes]) -> int:
    """Bytes of the dense storage of the attribute messages ``bodies``."""
    n = len(bodies)
    return _HEAP_HEADER + 2 * _BTREE_HEADER + _node_size(n, _NAME_RECORD) + _node_size(n, _ORDER_RECORD) + \
        block_size(bodies)


def _len_size(block: int) -> int:
    """Bytes of a heap ID's length (the smaller of what the block's offsets and the largest
    managed object need)."""
    most = block - _BLOCK_HEAD
    return min((block.bit_length() - 1 + 7) // 8, (most.bit_length() - 1) // 8 + 1)


def heap_header(root: int, block: int, bodies: list[bytes]) -> bytes:
    """A fractal heap's header (version 0) whose root direct block at ``root`` holds ``bodies``."""
    used = _BLOCK_HEAD + sum(len(b) for b in bodies)
    head = b"FRHP" + struct.pack("<BHHBI", 0, _ID_LEN, 0, 0, block - _BLOCK_HEAD)
    head += struct.pack("<12Q", 0, UNDEF, block - used, UNDEF, block, block, 0, len(bodies), 0, 0, 0, 0)
    head += struct.pack("<HQQHHQH", 4, block, block, _HEAP_BITS, 1, root, 0)
    return _checked(head)


def direct_block(heap: int, block: int, bodies: list[bytes]) -> tuple[bytes, list[bytes]]:
    """The root direct block (of the heap whose header is at ``heap``) holding ``bodies``, and
    each one's heap ID."""
    head = b"FHDB" + struct.pack("<BQI", 0, heap, 0)
    ids, at, len_size = [], len(head), _len_size(block)
    for body in bodies:
        hid = b"\0" + struct.pack("<I", at) + len(body).to_bytes(len_size, "little")
        ids.append(hid + bytes(_ID_LEN - len(hid)))
        at += len(body)
    return b"".join([head, *bodies, bytes(block - at)]), ids


def btree(ntype: int, leaf: int, records: list[bytes], record: int) -> tuple[bytes, bytes]:
    """A version-2 B-tree (version 0) of type ``ntype`` of one leaf at ``leaf``: its header and
    the leaf, holding ``records`` (in the index's order, ``record`` bytes each)."""
    size = _node_size(len(records), record)
    head = b"BTHD" + struct.pack("<BBIHHBBQHQ", 0, ntype, size, record, 0, 100, 40, leaf, len(records),
                                 len(records))
    node = _checked(b"BTLF" + struct.pack("<BB", 0, ntype) + b"".join(records))
    return _checked(head), node + bytes(size - len(node))


def dense_storage(base: int, attrs: list[tuple[str, bytes]]) -> tuple[bytes, tuple[int, bytes]]:
    """The dense storage at ``base`` of the attribute messages ``attrs`` ((name, message body), in
    creation order), and the Attribute Info message (version 0, creation order tracked and indexed)
    naming it."""
    bodies = [b for _, b in attrs]
    n, block = len(bodies), block_size(bodies)
    name_bt = base + _HEAP_HEADER
    order_bt = name_bt + _BTREE_HEADER
    name_leaf = order_bt + _BTREE_HEADER
    order_leaf = name_leaf + _node_size(n, _NAME_RECORD)
    root = order_leaf + _node_size(n, _ORDER_RECORD)
    data, ids = direct_block(base, block, bodies)
    hashes = [lookup3(name.encode()) for name, _ in attrs]
    by_name = sorted(range(n), key=lambda i: (hashes[i], attrs[i][0].encode()))
    names = [ids[i] + struct.pack("<BII", 0, i, hashes[i]) for i in by_name]
    orders = [ids[i] + struct.pack("<BI", 0, i) for i in range(n)]
    name_head, name_node = btree(8, name_leaf, names, _NAME_RECORD)
    order_head, order_node = btree(9, order_leaf, orders, _ORDER_RECORD)
    out = heap_header(root, block, bodies) + name_head + order_head + name_node + order_node + data
    info = struct.pack("<BBHQQQ", 0, 3, n, base, name_bt, order_bt)
    return out, (ATTRIBUTE_INFO, info)
