"""Version-1 B-trees, symbol table nodes and local heaps (File Format Specification, III.A.1,
III.B, III.D).

A chunked dataset's chunks are indexed by a B-tree of type 1 (:func:`chunk_btree`): nodes of at
most :data:`CHUNK_K` * 2 children (superblock version 0 fixes K at 32), leaves pointing at the
chunks, one level above another as many as needed, the root first. A group is a symbol table
(:func:`group_parts`): a local heap of its members' names, one symbol table node holding every
member (sorted by name; the superblock's group leaf node K is made large enough for the largest
group) and a B-tree of type 0 with that one node.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from nczfs.nczarr.ncfile.hdf5.types import UNDEF, pad8

#: children of a chunk B-tree node: at most 2 * CHUNK_K (superblock version 0: 32)
CHUNK_K = 32
#: children of a group B-tree node: at most 2 * GROUP_K
GROUP_K = 16
#: a symbol table entry's bytes
ENTRY_SIZE = 40
_NODE_HEAD = 24


@dataclass(frozen=True)
class ChunkEntry:
    #: the chunk's first element along each axis
    offset: tuple[int, ...]
    #: its stored (filtered) bytes
    size: int
    #: the filters skipped (bit i: the i-th filter), 0 for none
    mask: int
    address: int


def chunk_node_size(rank: int) -> int:
    """Bytes of one chunk B-tree node of a dataset of ``rank`` axes."""
    key = 8 + 8 * (rank + 1)
    return _NODE_HEAD + 2 * CHUNK_K * 8 + (2 * CHUNK_K + 1) * key


def _levels(n: int) -> list[int]:
    """Nodes at each level, leaves first."""
    out = [math.ceil(n / (2 * CHUNK_K))]
    while out[-1] > 1:
        out.append(math.ceil(out[-1] / (2 * CHUNK_K)))
    return out


def chunk_btree_size(n: int, rank: int) -> int:
    """Bytes of the B-tree indexing ``n`` chunks (0 for none)."""
    return sum(_levels(n)) * chunk_node_size(rank) if n else 0


def _key(size: int, mask: int, offset: tuple[int, ...]) -> bytes:
    return struct.pack(f"<II{len(offset) + 1}Q", size, mask, *offset, 0)


def _node(ntype: int, level: int, siblings: tuple[int, int], keys: list[bytes], children: list[int], size: int) -> bytes:
    out = b"TREE" + struct.pack("<BBHQQ", ntype, level, len(children), *siblings)
    for key, child in zip(keys, children):
        out += key + struct.pack("<Q", child)
    out += keys[len(children)]
    return out + bytes(size - len(out))


def chunk_btree(base: int, entries: list[ChunkEntry], chunks: tuple[int, ...]) -> bytes:
    """The B-tree at ``base`` indexing ``entries`` (any order) of chunks shaped ``chunks``."""
    if not entries:
        return b""
    rank = len(chunks)
    node_size = chunk_node_size(rank)
    levels = _levels(len(entries))
    firsts = [sum(levels[i + 1:]) for i in range(len(levels))]  # node index where each level begins
    items = sorted(entries, key=lambda e: e.offset)
    # (left key, child address) at the leaves, and the right key of the last
    keys = [_key(e.size, e.mask, e.offset) for e in items]
    last = items[-1]
    right = _key(0, 0, tuple(o + c for o, c in zip(last.offset, chunks)))
    children = [e.address for e in items]
    nodes: dict[int, bytes] = {}
    for level, count in enumerate(levels):
        at = [base + node_size * (firsts[level] + j) for j in range(count)]
        up_keys, per = [], 2 * CHUNK_K
        for j in range(count):
            ks, cs = keys[j * per:(j + 1) * per], children[j * per:(j + 1) * per]
            rk = keys[(j + 1) * per] if (j + 1) * per < len(keys) else right
            sib = (at[j - 1] if j else UNDEF, at[j + 1] if j + 1 < count else UNDEF)
            nodes[firsts[level] + j] = _node(1, level, sib, [*ks, rk], cs, node_size)
            up_keys.append(ks[0])
        keys, children = up_keys, at
    return b"".join(nodes[i] for i in range(len(nodes)))


@dataclass(frozen=True)
class Member:
    """A member of a group: a dataset, or a group with its symbol table's B-tree and heap."""

    name: str
    header: int
    btree: int = UNDEF
    heap: int = UNDEF
    is_group: bool = False


def heap_data(names: list[str]) -> tuple[bytes, dict[str, int]]:
    """A local heap's data segment holding ``names`` (the empty name first) and each one's offset."""
    data, offsets = bytes(8), {}
    for name in names:
        offsets[name] = len(data)
        raw = name.encode("utf-8") + b"\0"
        data += raw + bytes(pad8(len(raw)) - len(raw))
    return data, offsets


def group_sizes(names: list[str], leaf_k: int) -> tuple[int, int, int]:
    """Bytes of a group's local heap (header and data), B-tree node and symbol table node."""
    data, _ = heap_data(names)
    snod = 8 + 2 * leaf_k * ENTRY_SIZE if names else 0
    return 32 + len(data), _NODE_HEAD + 2 * GROUP_K * 8 + (2 * GROUP_K + 1) * 8, snod


def _entry(name_offset: int, m: Member) -> bytes:
    if m.is_group:
        return struct.pack("<QQI4xQQ", name_offset, m.header, 1, m.btree, m.heap)
    return struct.pack("<QQI4x16x", name_offset, m.header, 0)


def group_parts(heap_at: int, btree_at: int, snod_at: int, members: list[Member], leaf_k: int) -> tuple[bytes, bytes, bytes]:
    """A group's local heap (at ``heap_at``), B-tree node and symbol table node (empty if the
    group has no member)."""
    members = sorted(members, key=lambda m: m.name.encode("utf-8"))
    if len(members) > 2 * leaf_k:
        raise ValueError(f"{len(members)} members: more than a symbol table node of K={leaf_k} holds")
    data, offsets = heap_data([m.name for m in members])
    heap = b"HEAP" + struct.pack("<B3xQQQ", 0, len(data), 1, heap_at + 32) + data
    _, node_size, snod_size = group_sizes([m.name for m in members], leaf_k)
    if not members:
        return heap, _node(0, 0, (UNDEF, UNDEF), [bytes(8)], [], node_size), b""
    keys = [struct.pack("<Q", 0), struct.pack("<Q", offsets[members[-1].name])]
    tree = _node(0, 0, (UNDEF, UNDEF), keys, [snod_at], node_size)
    snod = b"SNOD" + struct.pack("<BBH", 1, 0, len(members))
    snod += b"".join(_entry(offsets[m.name], m) for m in members)
    return heap, tree, snod + bytes(snod_size - len(snod))
