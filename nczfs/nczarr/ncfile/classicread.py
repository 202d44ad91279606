"""A byte range of a classic file (:mod:`nczfs.nczarr.ncfile.classicfile`), made from its arrays' chunks.

A read is split into the header's bytes and, per variable, one run of the variable's bytes in C
order (a record variable's slices of consecutive records are consecutive in the array, though
not in the file); :func:`plan` says which chunks each run needs, :func:`assemble` copies their
elements (decoded, big-endian, already) into the read's bytes, fill values where a chunk is
missing or an element lies outside the stored array, zeros in the padding. Pure computation.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from nczfs.nczarr.ncfile.classicfile import GroupFile, Values

Index = tuple[int, ...]


@dataclass
class Run:
    """Bytes ``x0``..``x1`` of one variable's array (C order), for a read at ``start``."""

    var: int
    x0: int
    x1: int
    #: output offset of array byte x: ``base + (x // seg) * stride + x % seg``
    base: int
    seg: int
    stride: int

    def elements(self, itemsize: int) -> tuple[int, int]:
        return self.x0 // itemsize, -(-self.x1 // itemsize)


def _record_pos(rel: int, seg: int, stride: int) -> int:
    """The array byte at or after file offset ``begin + rel`` of a record variable."""
    if rel <= 0:
        return 0
    q, w = divmod(rel, stride)
    return q * seg + min(w, seg)


def runs(gf: GroupFile, start: int, end: int) -> list[Run]:
    """The variables' bytes in ``[start, end)`` of the file."""
    lay = gf.layout
    out = []
    for i, v in enumerate(lay.vars):
        seg = v.slice_bytes
        if not v.is_record:
            x0, x1 = max(start, v.begin) - v.begin, min(end, v.begin + seg) - v.begin
            stride = max(seg, 1)
            seg_ = stride
        else:
            if seg == 0 or lay.recsize == 0:
                continue
            stride, seg_ = lay.recsize, seg
            total = lay.numrecs * seg
            x0 = min(_record_pos(start - v.begin, seg, stride), total)
            x1 = min(_record_pos(end - v.begin, seg, stride), total)
        if x0 < x1:
            out.append(Run(i, x0, x1, v.begin - start, seg_, stride))
    return out


def boxes(shape: tuple[int, ...], lo: int, hi: int) -> Iterator[tuple[Index, Index]]:
    """Hyper-rectangles (start, stop) covering elements ``lo``..``hi`` of ``shape`` in C order,
    in order; each covers consecutive elements."""
    if lo >= hi:
        return
    if not shape:
        yield (), ()
        return
    inner = math.prod(shape[1:])
    if inner == 0:
        return
    i0, r0 = divmod(lo, inner)
    i1, r1 = divmod(hi, inner)
    if i0 == i1:
        for s, e in boxes(shape[1:], r0, r1):
            yield (i0, *s), (i0 + 1, *e)
        return
    if r0:
        for s, e in boxes(shape[1:], r0, inner):
            yield (i0, *s), (i0 + 1, *e)
        i0 += 1
    if i1 > i0:
        yield (i0, *([0] * (len(shape) - 1))), (i1, *shape[1:])
    if r1:
        for s, e in boxes(shape[1:], 0, r1):
            yield (i1, *s), (i1 + 1, *e)


def _chunk_ranges(val: Values, start: Index, stop: Index) -> list[range] | None:
    """Chunk indexes along each axis that hold stored elements of the box (None: none does)."""
    out = []
    for a, b, s, c in zip(start, stop, val.stored, val.chunks):
        b = min(b, s)
        if a >= b:
            return None
        out.append(range(a // c, (b - 1) // c + 1))
    return out


def chunks_needed(val: Values, e0: int, e1: int) -> list[Index]:
    """The chunks holding stored elements ``e0``..``e1`` (of ``val.shape``), in C order."""
    seen: dict[Index, None] = {}
    for start, stop in boxes(val.shape, e0, e1):
        ranges = _chunk_ranges(val, start, stop)
        if ranges is not None:
            for idx in itertools.product(*ranges):
                seen[idx] = None
    return list(seen)


def elements(val: Values, e0: int, e1: int, chunks: dict[Index, np.ndarray | None]) -> np.ndarray:
    """Elements ``e0``..``e1`` as a flat array of ``val.dtype``; ``chunks`` maps each chunk
    :func:`chunks_needed` named to its decoded elements (``val.chunks`` shaped), None if missing."""
    dt = np.dtype(val.dtype)
    flat = np.empty(e1 - e0, dtype=dt)
    flat[...] = np.frombuffer(val.fill, dtype=dt)[0]
    off = 0
    for start, stop in boxes(val.shape, e0, e1):
        size = math.prod(b - a for a, b in zip(start, stop))
        box = flat[off:off + size].reshape(tuple(b - a for a, b in zip(start, stop)))
        off += size
        ranges = _chunk_ranges(val, start, stop)
        if ranges is None:
            continue
        for idx in itertools.product(*ranges):
            arr = chunks.get(idx)
            if arr is None:
                continue
            src, dst = [], []
            for i, a, b, s, c in zip(idx, start, stop, val.stored, val.chunks):
                lo, hi = max(a, i * c), min(b, s, (i + 1) * c)
                src.append(slice(lo - i * c, hi - i * c))
                dst.append(slice(lo - a, hi - a))
            box[tuple(dst)] = arr[tuple(src)]
    return flat


def scatter(out: np.ndarray, run: Run, data: np.ndarray) -> None:
    """Put array bytes ``run.x0``..``run.x1`` (``data``) where the read holds them."""
    seg, stride, base = run.seg, run.stride, run.base

    def pos(x: int) -> int:
        return base + (x // seg) * stride + x % seg

    x0, x1 = run.x0, run.x1
    if seg == stride or x0 // seg == (x1 - 1) // seg:
        p = pos(x0)
        out[p:p + (x1 - x0)] = data
        return
    first_end = (x0 // seg + 1) * seg
    p = pos(x0)
    out[p:p + first_end - x0] = data[:first_end - x0]
    last_start = ((x1 - 1) // seg) * seg
    n = (last_start - first_end) // seg
    if n:
        p = pos(first_end)
        view = np.lib.stride_tricks.as_strided(out[p:], shape=(n, seg), strides=(stride, 1))
        view[...] = data[first_end - x0:last_start - x0].reshape(n, seg)
    p = pos(last_start)
    out[p:p + x1 - last_start] = data[last_start - x0:]


def assemble(gf: GroupFile, start: int, end: int, runs_: list[Run],
             chunks: list[dict[Index, np.ndarray | None]]) -> bytes:
    """Bytes ``start``..``end`` of the file (clipped at its end); ``chunks[i]`` holds what
    :func:`chunks_needed` named for ``runs_[i]``."""
    end = min(end, gf.layout.size)
    if start >= end:
        return b""
    out = np.zeros(end - start, dtype=np.uint8)
    head = gf.layout.header[start:end]
    out[:len(head)] = np.frombuffer(head, dtype=np.uint8)
    for run, got in zip(runs_, chunks):
        val = gf.values[run.var]
        isz = val.itemsize
        e0, e1 = run.elements(isz)
        data = elements(val, e0, e1, got).view(np.uint8)
        scatter(out, run, data[run.x0 - e0 * isz:run.x1 - e0 * isz])
    return out.tobytes()
