"""How a view shows the chunks of an array whose stored chunks its reader cannot take.

A :class:`Recode` makes the chunk a view shows from the stored one: decoded with the stored codecs
(numcodecs, the implementations zarr-python uses), cut to the shown chunk shape (netCDF-C 4.9.0
refuses a chunk larger than its array), converted to the shown byte order, laid out in C order
(netCDF-C ignores ``order: "F"`` and reads such data transposed) and encoded with the shown codecs.
Shown uncompressed, a chunk's size is known without reading it. Chunk names do not change: a
chunk that is missing in the store (the fill value) is missing in the view too.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from nczfs.nczarr.chunks import deflater, inflater
from nczfs.toolbox.errors import NczfsError


class UndecodableChunk(NczfsError):
    """A stored chunk its codecs cannot decode, or that decodes to the wrong size: EIO, as a
    damaged object is (the read of that chunk fails, the key named; other chunks read)."""


@dataclass(frozen=True)
class Codecs:
    """A numcodecs pipeline in Zarr v2 terms: ``filters`` then ``compressor``."""

    compressor: Any = None
    filters: tuple = ()

    def __bool__(self) -> bool:
        return bool(self.compressor or self.filters)

    def ids(self) -> list[str]:
        return [str(c.get("id")) for c in (*self.filters, *([self.compressor] if self.compressor else []))]

    def _codecs(self) -> list:
        from numcodecs import get_codec

        return [get_codec(dict(c)) for c in (*self.filters, *([self.compressor] if self.compressor else []))]

    def check(self) -> str | None:
        """Why these codecs cannot run here (None if they can)."""
        try:
            self._codecs()
        except (ValueError, TypeError, KeyError) as exc:
            return f"codecs {[c.get('id') for c in (*self.filters, self.compressor) if c]} cannot be decoded here ({exc})"
        return None

    def decode(self, data: bytes, size: int | None = None) -> Any:
        """The decoded chunk: its bytes, or (variable-length strings) an array of objects.
        ``size``: its bytes' count, if known (a zlib chunk is then inflated by libdeflate)."""
        from numcodecs.compat import ensure_bytes

        buf: Any = data
        codecs = self._codecs()
        if size is not None and self._inflates_whole():
            fast = inflater.inflate(data, size)
            if fast is not None:
                buf, codecs = fast, codecs[:-1]  # the compressor's part done
        for codec in reversed(codecs):
            buf = codec.decode(buf)
        if isinstance(buf, np.ndarray):
            return buf if buf.dtype == object else buf.tobytes()
        return ensure_bytes(buf)

    def _inflates_whole(self) -> bool:
        """Is the compressor zlib, inflating to the whole chunk (no filter, or only
        shuffles, which keep the size)?"""
        return (bool(self.compressor) and self.compressor.get("id") == "zlib"
                and all(f.get("id") == "shuffle" for f in self.filters))

    def for_items(self, itemsize: int) -> Codecs:
        """These codecs for elements of ``itemsize`` bytes: netCDF-C writes the shuffle filter with
        ``elementsize: 0``, meaning the variable's type size (numcodecs would not unshuffle)."""
        def fix(c: Any) -> Any:
            if isinstance(c, dict) and c.get("id") == "shuffle" and not c.get("elementsize"):
                return {**c, "elementsize": itemsize}
            return c

        filters = tuple(fix(c) for c in self.filters)
        return self if filters == self.filters else Codecs(self.compressor, filters)

    def encode(self, data: bytes | np.ndarray) -> bytes:
        """``data`` (bytes, or an object array for an object codec) through these codecs; zlib's by :mod:`nczfs.nczarr.chunks.deflater` (the same
        stream, a faster encoder)."""
        from numcodecs.compat import ensure_bytes, ensure_contiguous_ndarray

        buf: Any = data
        for codec in self._codecs():
            if codec.codec_id == "zlib":
                buf = deflater.compress(ensure_contiguous_ndarray(buf), codec.level)
            else:
                buf = codec.encode(buf)
        return ensure_bytes(buf)


@dataclass(frozen=True, eq=False)
class Recode:
    #: the stored chunk: element type (numpy), shape, layout, codecs
    dtype: str
    chunks: tuple[int, ...]
    order: str
    codecs: Codecs
    #: the chunk the view shows: element type, shape (C order), codecs (empty: the raw bytes)
    shown_dtype: str
    shown_chunks: tuple[int, ...]
    shown_codecs: Codecs = Codecs()
    #: variable-length strings shown as fixed-width bytes of this many (their longest, UTF-8)
    text_width: int | None = None
    #: integer times shown in a coarser unit: divided by this (NaT kept)
    divide: int = 1

    @functools.cached_property
    def token(self) -> str:
        """The recode in one string (a cache key: the codecs' settings are dicts)."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    def shown_size(self) -> int | None:
        """Bytes of every shown chunk, if known without reading one (shown uncompressed)."""
        if self.shown_codecs:
            return None
        return math.prod(self.shown_chunks) * np.dtype(self.shown_dtype).itemsize

    def apply(self, data: bytes, key: str = "") -> bytes:
        """The shown chunk made from the stored chunk ``data`` (CPU work: run it off the trio thread)."""
        raw, shown = self._decoded(data, key)
        # the decoded bytes themselves where nothing changed them (type, layout, cut): no copy
        same = isinstance(raw, bytes) and shown.nbytes == len(raw) and np.may_share_memory(shown, np.frombuffer(raw, "u1"))
        out = raw if same else shown.tobytes()
        if not self.shown_codecs:
            return out
        return self.shown_codecs.for_items(np.dtype(self.shown_dtype).itemsize).encode(out)

    def shown_array(self, data: bytes, key: str = "") -> np.ndarray:
        """The shown chunk's elements (C order) made from the stored chunk ``data``: what
        :meth:`apply` gives before the shown codecs, without copying it into bytes."""
        return self._decoded(data, key)[1]

    def _decoded(self, data: bytes, key: str) -> tuple[Any, np.ndarray]:
        """The stored chunk ``data`` decoded, and as the shown elements (C-contiguous)."""
        dt, count = np.dtype(self.dtype), math.prod(self.chunks)
        try:
            size = None if dt.kind == "O" else count * dt.itemsize
            raw = self.codecs.for_items(dt.itemsize).decode(data, size) if self.codecs else bytes(data)
        except Exception as exc:  # noqa: BLE001 - any codec's failure on bad bytes
            raise UndecodableChunk(f"{key!r}: the stored chunk cannot be decoded: {exc}") from exc
        if isinstance(raw, np.ndarray):  # variable-length strings
            if raw.size != count:
                raise UndecodableChunk(f"{key!r}: the stored chunk holds {raw.size} strings, not {count}")
            arr = raw.reshape(self.chunks, order=self.order)  # type: ignore[call-overload]  # numpy's stubs: order as a plain str
            arr = arr[(*(slice(0, c) for c in self.shown_chunks), Ellipsis)]  # an array even at rank 0
            arr = np.char.encode(arr.astype(str), "utf-8") if arr.size else arr.astype("S1")
        else:
            if len(raw) != count * dt.itemsize:
                raise UndecodableChunk(f"{key!r}: the stored chunk decodes to {len(raw)} bytes, "
                                      f"not {count * dt.itemsize} ({self.chunks} of {self.dtype})")
            arr = np.frombuffer(raw, dtype=dt).reshape(self.chunks, order=self.order)  # type: ignore[call-overload]  # numpy's stubs: order as a plain str
            arr = arr[(*(slice(0, c) for c in self.shown_chunks), Ellipsis)]  # an array even at rank 0
            if dt.kind == "U" and np.dtype(self.shown_dtype).kind == "S":  # unicode shown as UTF-8 bytes
                arr = np.char.encode(arr, "utf-8")
        if self.divide != 1:
            ints = arr.astype("<i8")
            nat = ints == np.iinfo("i8").min
            arr = np.where(nat, ints, ints // self.divide)
        return raw, np.ascontiguousarray(arr.astype(self.shown_dtype, copy=False))
