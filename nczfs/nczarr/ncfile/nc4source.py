"""Where a chunk of a netCDF-4 file (``NAME.nc4``) comes from, and how its bytes in the file are
made from the stored ones: as stored, or recoded (decoded, then deflated or left unfiltered, as
the views' :class:`nczfs.nczarr.chunks.recode.Recode` does), or, for strings (``NC_STRING``),
decoded into HDF5 variable-length strings.

A string chunk's piece of the file is the chunk HDF5's index names, one 16-byte reference
(length, global heap collection address, object index) per element in C order, followed by the
global heap collections holding the strings (UTF-8, one object each, an empty string an empty
object): a collection holds at most :data:`HEAP_OBJECTS` objects and, unless one string is
larger, :data:`HEAP_BYTES`. The piece is made with addresses relative to its start and placed at
its offset when read (:meth:`Source.place`), so that its bytes can be kept once, wherever the
file's version puts them. A string chunk the store does not hold is a chunk of the fill value
(:func:`fill_piece`), not absent: HDF5 1.10 to 1.14 refuse to read a missing chunk of
variable-length data from a file opened read-only ("no write intent on file": the fill value is
converted through the global heap), netCDF-C's own files alike. Pure computation.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from nczfs.toolbox.errors import InvalidArgument
from nczfs.nczarr.chunks.madechunks import Stored
from nczfs.nczarr.chunks.recode import Recode
from nczfs.nczarr.ncfile.hdf5.heap import GlobalHeap
from nczfs.nczarr.ncfile.hdf5.types import VLEN_SIZE, pad8
from nczfs.nczarr.ncfile.hdf5.writer import Chunk, Context

#: objects of one global heap collection (HDF5 numbers them in 16 bits, 0 its free space)
HEAP_OBJECTS = 8192
#: bytes of one collection, unless a string alone is larger (HDF5 reads a collection whole)
HEAP_BYTES = 1 << 20
#: a variable-length element: sequence length, collection address, object index
_REF = np.dtype([("length", "<u4"), ("address", "<u8"), ("index", "<u4")])


@dataclass(frozen=True)
class Source:
    """Where a chunk of the file comes from: store key ``key``, as stored (``recode`` None), or
    decoded by ``recode`` (then its bytes in the file are unfiltered or deflated, in C order;
    numpy unicode strings of dtype ``text`` then UTF-8 in ``width`` bytes each; ``vlen``: HDF5
    variable-length strings, the chunk's elements as ``recode`` decodes them)."""

    key: str
    recode: Recode | None = None
    text: str = ""
    width: int = 0
    vlen: bool = False
    #: strings of a chunk the store does not hold: each this one (no store object: ``key`` "")
    fill: str | None = None
    #: where the chunk's stored bytes lie in the object (a sharded array's inner chunk: in its
    #: shard), and how many (None: the whole object)
    start: int = 0
    length: int | None = None

    @property
    def size_needs_making(self) -> bool:
        """Is the chunk's size in the file known only once it was made (strings, or deflated)?"""
        return self.vlen or (self.recode is not None and bool(self.recode.shown_codecs))

    @property
    def maker(self) -> str:
        """What makes the chunk's bytes in the file of the stored ones: the recode's token (as a
        view recoding alike: the two share the chunk), with the strings' form for strings."""
        token = self.recode.token if self.recode else ""
        return f"nc4 {'vlen' if self.vlen else self.text}:{self.width} {token}" if self.vlen or self.text else token

    def stored(self, etag: str) -> Stored:
        """The stored chunk the chunk is made of, at version ``etag``."""
        return Stored(self.key, etag, self.start, self.length)

    def decode(self, raw: bytes) -> bytes:
        """The chunk's bytes in the file, made from its stored bytes (CPU work: off the trio
        thread); a string chunk's with addresses relative to its start (:meth:`place`)."""
        assert self.recode is not None
        if self.fill is not None:
            return fill_piece(self.fill, math.prod(self.recode.chunks))
        if self.vlen:
            return string_piece(chunk_strings(self.recode, raw, self.key))
        out = self.recode.apply(raw, self.key)
        if not self.text:
            return out
        return np.char.encode(np.frombuffer(out, dtype=self.text), "utf-8").astype(f"|S{self.width}").tobytes()

    def place(self, data: bytes, at: int, lo: int, hi: int) -> bytes:
        """Bytes ``lo``..``hi`` of the piece ``data`` (:meth:`decode`'s) put at offset ``at`` of the file."""
        refs = VLEN_SIZE * math.prod(self.recode.chunks) if self.vlen and self.recode else 0
        if lo >= refs or not at:
            return data[lo:hi]
        first, last = lo // VLEN_SIZE, min(-(-hi // VLEN_SIZE), refs // VLEN_SIZE)
        got = np.frombuffer(data, _REF, last - first, first * VLEN_SIZE).copy()
        got["address"] += at
        out = got.tobytes() + data[last * VLEN_SIZE:hi]
        return out[lo - first * VLEN_SIZE:hi - first * VLEN_SIZE]


def chunk_strings(recode: Recode, raw: bytes, key: str = "") -> list[bytes]:
    """The strings of a stored chunk (``recode``'s dtype, shape, layout and codecs), in C order,
    UTF-8 (fixed-width bytes without their trailing NULs)."""
    dtype = np.dtype(recode.dtype)
    try:
        got = recode.codecs.for_items(dtype.itemsize).decode(raw) if recode.codecs else bytes(raw)
    except Exception as exc:  # noqa: BLE001 - any codec's failure on bad bytes
        raise InvalidArgument(f"{key!r}: the stored chunk cannot be decoded: {exc}") from exc
    arr = got if isinstance(got, np.ndarray) else np.frombuffer(got, dtype=dtype) if dtype != object else None
    count = math.prod(recode.chunks)
    if arr is None or arr.size != count:
        raise InvalidArgument(f"{key!r}: the stored chunk holds {getattr(arr, 'size', 0)} strings, not {count}")
    flat = arr.reshape(recode.chunks, order=recode.order).ravel(order="C")  # type: ignore[call-overload]  # order is "C" or "F", a str to numpy's stubs
    if dtype.kind == "S":
        return [bytes(s) for s in flat]
    return [str(s).encode("utf-8", "replace") for s in flat]


@functools.lru_cache(maxsize=16)
def fill_piece(fill: str, count: int) -> bytes:
    """A string chunk of ``count`` elements, each ``fill``: every reference names one object."""
    raw = fill.encode("utf-8")
    heap = GlobalHeap(VLEN_SIZE * count)
    return heap.add(raw, len(raw)) * count + heap.encode()


def string_piece(values: list[bytes]) -> bytes:
    """The references to ``values`` followed by the global heap collections holding them, their
    addresses relative to the piece's start."""
    refs, heaps = bytearray(), []
    heap = GlobalHeap(VLEN_SIZE * len(values))
    used = 16
    for v in values:
        need = 16 + pad8(len(v))
        if len(heap.objects) >= HEAP_OBJECTS or (heap.objects and used + need > HEAP_BYTES):
            heaps.append(heap.encode())
            heap, used = GlobalHeap(heap.address + heap.size), 16
        refs += heap.add(v, len(v))
        used += need
    heaps.append(heap.encode())
    return bytes(refs) + b"".join(heaps)


def chunk_indexes(grid: list[int]):
    """Every index of a grid of chunks ``grid`` long along each axis, in C order."""
    if not grid:
        yield ()
        return
    total = math.prod(grid)
    for flat in range(total):
        idx = []
        for n in reversed(grid):
            flat, r = divmod(flat, n)
            idx.append(r)
        yield tuple(reversed(idx))


def with_fill(stored: list[Chunk], shape: tuple[int, ...], chunks: tuple[int, ...],
              fill: object) -> list[Chunk]:
    """A string variable's chunks: those stored, and one of the fill value for each missing."""
    have = {c.index for c in stored}
    grid = [math.ceil(s / c) if c else 0 for s, c in zip(shape, chunks)]
    text = fill if isinstance(fill, str) else ""
    return stored + [Chunk(i, 0, Source("", fill=text)) for i in chunk_indexes(grid) if i not in have]


def vlen_fill(value: object) -> Callable[[Context], bytes]:
    """An NC_STRING variable's fill value, in the global heap: the array's, else "" (netCDF-C's)."""
    raw = (value if isinstance(value, str) else "").encode("utf-8")
    return lambda ctx: ctx.heap.add(raw, len(raw))
