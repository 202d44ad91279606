"""The layout of an HDF5 file made from a description (:class:`Group`, :class:`Dataset`): its
metadata bytes and where each chunk lies.

The file is a version-0 superblock (read by HDF5 1.8 and later), then for each group (depth
first) its version-1 object header and symbol table (local heap, B-tree, symbol table node),
each of its datasets' object header and chunk B-tree, the global heap, and then the chunks, each
dataset's in the order of their indexes, as their bytes are given (the caller's filtered bytes:
the file never changes them). The metadata is encoded twice: once to learn each structure's
size, then with every address known. Pure computation.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any, Callable

from nczfs.nczarr.ncfile.hdf5 import btrees, dense, messages as m
from nczfs.nczarr.ncfile.hdf5.heap import GlobalHeap
from nczfs.nczarr.ncfile.hdf5.types import UNDEF, Datatype, dataspace, padded

SIGNATURE = b"\x89HDF\r\n\x1a\n"
SUPERBLOCK_SIZE = 96


class Context:
    """What an attribute's value may need while it is encoded: the addresses of objects (by path,
    ``/g/v``) and the global heap."""

    def __init__(self, headers: dict[str, int], heap: GlobalHeap):
        self.headers, self.heap = headers, heap

    def ref(self, path: str) -> int:
        return self.headers.get(path, 0)


@dataclass
class Attr:
    name: str
    dtype: Datatype
    #: None: a null dataspace (no value); ``()``: a scalar
    shape: tuple[int, ...] | None
    #: the elements as stored, or how to make them from a :class:`Context`
    data: bytes | Callable[[Context], bytes]


@dataclass
class Chunk:
    #: the chunk's index in the grid of chunks (``()`` for a contiguous dataset)
    index: tuple[int, ...]
    #: its stored bytes
    size: int
    #: the caller's name for the bytes (returned with the chunk's place in the file)
    source: Any
    #: filters skipped for this chunk (bit i: the pipeline's i-th)
    mask: int = 0
    #: bytes following the chunk in the file that belong with it (the global heap collections
    #: of its variable-length elements)
    extra: int = 0


@dataclass
class Dataset:
    name: str
    dtype: Datatype
    shape: tuple[int, ...]
    #: ``shape`` with UNLIMITED (or larger) axes, or None: the same as ``shape``
    maxshape: tuple[int, ...] | None = None
    #: None: contiguous, its only chunk (index ``()``) holding every element, unfiltered
    chunks: tuple[int, ...] | None = None
    #: (filter id, client data) in the order applied on writing
    filters: list[tuple[int, list[int]]] = field(default_factory=list)
    #: one element: what a missing chunk reads as (None: zeros), or how to make it from a
    #: :class:`Context` (a variable-length one: in the global heap)
    fill: bytes | Callable[[Context], bytes] | None = None
    attrs: list[Attr] = field(default_factory=list)
    stored: list[Chunk] = field(default_factory=list)


@dataclass
class Group:
    name: str
    attrs: list[Attr] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    datasets: list[Dataset] = field(default_factory=list)


@dataclass(frozen=True)
class Piece:
    """A chunk's bytes at ``offset`` in the file."""

    offset: int
    size: int
    source: Any


@dataclass
class Layout:
    size: int
    #: bytes 0 .. len(meta) of the file
    meta: bytes
    #: the chunks, by offset, after the metadata
    pieces: list[Piece]
    #: object header address of each group and dataset, by path (``/``, ``/g/v``)
    headers: dict[str, int]
    #: attributes left out, too large for the file: ``/g/v:name: reason``
    dropped: list[str] = field(default_factory=list)


def _path(parent: str, name: str) -> str:
    return f"{parent.rstrip('/')}/{name}"


def _leaf_k(root: Group) -> int:
    def most(g: Group) -> int:
        return max([len(g.groups) + len(g.datasets), *(most(c) for c in g.groups)])
    return max(4, math.ceil(most(root) / 2))


class _Pass:
    """One encoding of the metadata, with the addresses a previous one found (or zeros)."""

    def __init__(self, root: Group, addr: dict[str, int], leaf_k: int):
        self.root, self.addr, self.leaf_k = root, addr, leaf_k
        self.blocks: list[tuple[str, bytes]] = []
        self.heap = GlobalHeap(addr.get("gheap", 0))
        headers = {k[4:]: v for k, v in addr.items() if k.startswith("hdr:")}
        self.ctx = Context(headers, self.heap)
        self.pieces: list[tuple[str, Chunk]] = []
        #: attributes left out: ``/g/v:name: reason``
        self.dropped: list[str] = []

    def a(self, key: str) -> int:
        return self.addr.get(key, 0)

    def run(self) -> None:
        self.blocks.append(("super", b""))  # encoded last, once the size is known
        self.group(self.root, "/")
        self.blocks.append(("gheap", self.heap.encode()))

    def header(self, path: str, msgs: list[m.Message], attrs: list[Attr]) -> None:
        """The object header of ``path`` holding ``msgs`` and its attributes: a version-1 header,
        or, if an attribute's message is too large for one, a version-2 header naming the
        attributes' dense storage, which follows it."""
        named = []
        for at in attrs:
            data = at.data(self.ctx) if callable(at.data) else at.data
            named.append((at.name, m.attribute(at.name, at.dtype, dataspace(at.shape), data)[1]))
        if any(len(padded(body)) > 0xFFFF for _, body in named):
            named = self.fitting(path, named)
        if all(len(padded(body)) <= 0xFFFF for _, body in named):
            self.blocks.append((f"hdr:{path}", m.object_header([*msgs, *((m.ATTRIBUTE, b) for _, b in named)])))
            return
        storage, info = dense.dense_storage(self.a(f"dense:{path}"), named)
        self.blocks += [(f"hdr:{path}", m.object_header_v2([*msgs, info])), (f"dense:{path}", storage)]

    def fitting(self, path: str, named: list[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
        """The attributes (name, message) dense storage holds, in order; the others noted in
        ``dropped``."""
        kept: list[tuple[str, bytes]] = []
        total = 0
        for name, body in named:
            if dense.fits(len(kept) + 1, total + len(body)):
                kept.append((name, body))
                total += len(body)
            else:
                self.dropped.append(f"{path}:{name}: {len(body)} bytes: more than an object's dense attribute "
                                    f"storage holds here ({dense.MAX_BLOCK >> 20} MiB in all)")
        return kept

    def group(self, g: Group, path: str) -> None:
        self.header(path, [m.symbol_table(self.a(f"btree:{path}"), self.a(f"heap:{path}"))], g.attrs)
        members = [btrees.Member(c.name, self.a(f"hdr:{_path(path, c.name)}"), self.a(f"btree:{_path(path, c.name)}"),
                                 self.a(f"heap:{_path(path, c.name)}"), True) for c in g.groups]
        members += [btrees.Member(d.name, self.a(f"hdr:{_path(path, d.name)}")) for d in g.datasets]
        heap, tree, snod = btrees.group_parts(self.a(f"heap:{path}"), self.a(f"btree:{path}"),
                                              self.a(f"snod:{path}"), members, self.leaf_k)
        self.blocks += [(f"heap:{path}", heap), (f"btree:{path}", tree), (f"snod:{path}", snod)]
        for d in g.datasets:
            self.dataset(d, _path(path, d.name))
        for c in g.groups:
            self.group(c, _path(path, c.name))

    def dataset(self, d: Dataset, path: str) -> None:
        msgs = [m.dataspace(dataspace(d.shape, d.maxshape)), m.datatype(d.dtype),
                m.fill_value(d.fill(self.ctx) if callable(d.fill) else d.fill)]
        if d.filters:
            msgs.append(m.filters(d.filters))
        chunks = sorted(d.stored, key=lambda c: c.index)
        for c in chunks:
            self.pieces.append((f"chunk:{path}:{c.index}", c))
        if d.chunks is None:
            first = chunks[0] if chunks else None
            addr = self.a(f"chunk:{path}:()") if first else UNDEF
            msgs.append(m.contiguous_layout(addr, math.prod(d.shape) * d.dtype.size))
        else:
            root = self.a(f"cbt:{path}") if chunks else UNDEF
            msgs.append(m.chunked_layout(root, d.chunks, d.dtype.size))
        self.header(path, msgs, d.attrs)
        if d.chunks is not None and chunks:
            entries = [btrees.ChunkEntry(tuple(i * c for i, c in zip(ch.index, d.chunks)), ch.size, ch.mask,
                                         self.a(f"chunk:{path}:{ch.index}")) for ch in chunks]
            self.blocks.append((f"cbt:{path}", btrees.chunk_btree(self.a(f"cbt:{path}"), entries, d.chunks)))

    def addresses(self) -> tuple[dict[str, int], int]:
        """Where each block and chunk lies, and where the metadata ends."""
        addr, at = {}, SUPERBLOCK_SIZE
        for key, data in self.blocks[1:]:
            addr[key] = at if data else UNDEF
            at += len(data)
        meta_end = at
        for key, c in self.pieces:
            addr[key] = at
            at += c.size + c.extra
        addr["end"] = at
        return addr, meta_end


def superblock(eof: int, leaf_k: int, root: int, btree: int, heap: int) -> bytes:
    """A version-0 superblock with its root group's symbol table entry."""
    head = SIGNATURE + struct.pack("<8BHHI", 0, 0, 0, 0, 0, 8, 8, 0, leaf_k, btrees.GROUP_K, 0)
    head += struct.pack("<QQQQ", 0, UNDEF, eof, UNDEF)
    return head + struct.pack("<QQI4xQQ", 0, root, 1, btree, heap)


def layout(root: Group) -> Layout:
    """The file ``root`` describes: its metadata, and where its chunks go."""
    leaf_k = _leaf_k(root)
    first = _Pass(root, {}, leaf_k)
    first.run()
    addr, meta_end = first.addresses()
    final = _Pass(root, addr, leaf_k)
    final.run()
    again, end2 = final.addresses()
    if end2 != meta_end:
        raise AssertionError(f"metadata of {end2} bytes, planned {meta_end}")
    sb = superblock(addr["end"], leaf_k, addr["hdr:/"], addr["btree:/"], addr["heap:/"])
    meta = sb + b"".join(data for _, data in final.blocks[1:])
    pieces = [Piece(addr[key], c.size + c.extra, c.source) for key, c in final.pieces]
    headers = {k[4:]: v for k, v in addr.items() if k.startswith("hdr:")}
    return Layout(addr["end"], meta, pieces, headers, final.dropped)
