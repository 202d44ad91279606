"""Types, attributes and filters of a netCDF-4 file (``NAME.nc4``): the HDF5 form of a stored
dtype, of a model attribute, and of a Zarr codec chain whose bytes an HDF5 filter pipeline reads.

A chain is passed through, chunk for chunk, where its bytes are what HDF5 reads: no codec (no
filter), numcodecs ``zlib`` (deflate, 1; zlib framing, as HDF5's deflate filter writes),
numcodecs ``shuffle`` of the element size before it or alone (shuffle, 2). Pure computation.
"""

from __future__ import annotations

import functools
import re

import numpy as np

from nczfs.nczarr.chunks.v2form import V2Array
from nczfs.nczarr.metadata.model import NC_TYPES, Attribute
from nczfs.nczarr.ncfile.classicheader import TYPES, Attr as ClassicAttr
from nczfs.nczarr.ncfile.hdf5 import messages as m, types as t
from nczfs.nczarr.ncfile.hdf5.writer import Attr, Context
from nczfs.nczarr.ncfile.ncattrs import classic_attr
from nczfs.toolbox import version

#: attributes HDF5's dimension scales and netCDF-C's bookkeeping use: never the store's
RESERVED = frozenset({"CLASS", "NAME", "DIMENSION_LIST", "REFERENCE_LIST", "_Netcdf4Dimid",
                      "_Netcdf4Coordinates", "_NCProperties", "_nc3_strict"})


def file_type(dtype: str) -> t.Datatype | str:
    """The HDF5 type of a stored (Zarr v2 form) dtype, in its byte order, or why it has none."""
    try:
        dt = np.dtype(dtype)
    except TypeError:
        return f"type {dtype} has no netCDF-4 form here"
    big = dt.byteorder == ">"
    if dt.kind in "iu" or dt.kind in "mM":
        return t.integer(dt.itemsize, dt.kind != "u", big)
    if dt.kind == "b":
        return t.integer(1, True)
    if dt.kind == "f" and dt.itemsize in (4, 8):
        return t.floating(dt.itemsize, big)
    if dt.kind == "S" and dt.itemsize == 1:
        return t.fixed_string(1, nullterm=False)
    return f"type {dtype} has no netCDF-4 form here"


_FIXED = re.compile(r"^[<>|]?S(\d+)$")
_UNICODE = re.compile(r"^[<>|]?U(\d+)$")


def is_nc_string(dtype: str, nctype: str | None, flavor: str) -> bool:
    """Is an array of stored dtype ``dtype`` NC_STRING in the file (HDF5 variable-length strings,
    UTF-8)? Variable-length strings (Zarr v2 ``|O`` with ``vlen-utf8``, v3 ``string``) and numpy
    unicode (xarray's ``str``) are, but NCZarr's ``<U1`` chars; so are the fixed-width ``|S<n>``
    of NCZarr (netCDF-C's NC_STRING), not those of pure Zarr (xarray's bytes: chars)."""
    if dtype == "|O":
        return True
    if _UNICODE.match(dtype):
        return nctype != "char"
    fixed = _FIXED.match(dtype)
    return fixed is not None and int(fixed.group(1)) > 1 and flavor.startswith("V")


def text_form(dtype: str) -> tuple[str, str, int] | None:
    """A string array's form in the file, chars of one more axis, as the classic files hold it:
    (the dtype its chunks decode to, numpy's unicode dtype whose values are then UTF-8 or "",
    the chars' width); None for no such string array."""
    if (m := _FIXED.match(dtype)) and int(m.group(1)) > 1:
        return f"|S{m.group(1)}", "", int(m.group(1))
    if m := _UNICODE.match(dtype):
        return f"<U{m.group(1)}", f"<U{m.group(1)}", 4 * int(m.group(1))
    return None


#: registered HDF5 filters (https://github.com/HDFGroup/hdf5_plugins) whose framing is numcodecs'
BLOSC, ZSTD = 32001, 32015
_BLOSC_CODES = {"blosclz": 0, "lz4": 1, "lz4hc": 2, "snappy": 3, "zlib": 4, "zstd": 5}


def plugin_filter(codec: dict, itemsize: int, chunk_bytes: int) -> tuple[int, list[int]] | None:
    """The registered HDF5 filter (a plugin) reading a lone codec's bytes: numcodecs ``blosc``
    (its frames are what HDF5's blosc filter, 32001, reads) and ``zstd`` (one frame with its
    content size: filter 32015); None for others."""
    cid = codec.get("id")
    if cid == "blosc" and codec.get("cname", "lz4") in _BLOSC_CODES:
        shuffle = int(codec.get("shuffle", 1))
        return BLOSC, [2, 2, itemsize, chunk_bytes, int(codec.get("clevel", 5)), max(shuffle, 0),
                       _BLOSC_CODES[codec.get("cname", "lz4")]]
    if cid == "zstd" and not codec.get("checksum"):
        return ZSTD, [int(codec.get("level") or 0) & 0xFFFFFFFF]
    return None


def pipeline(v2: V2Array, itemsize: int, plugins: int = 0) -> list[tuple[int, list[int]]] | str:
    """The HDF5 filters reading the chain's bytes, or why they are not HDF5's; ``plugins``: the
    bytes of a chunk, to pass blosc and zstd through as registered filters (0: not)."""
    if v2.order != "C":
        return f"order {v2.order!r} (HDF5 chunks are in C order)"
    chain = [*(v2.filters or []), *([v2.compressor] if v2.compressor else [])]
    if plugins and len(chain) == 1 and (got := plugin_filter(chain[0], itemsize, plugins)) is not None:
        return [got]
    out: list[tuple[int, list[int]]] = []
    for i, codec in enumerate(chain):
        cid = codec.get("id")
        if cid == "shuffle" and i == 0 and int(codec.get("elementsize") or 4) == itemsize:
            out.append((m.SHUFFLE, [itemsize]))
        elif cid == "zlib" and i == len(chain) - 1:
            level = codec.get("level")
            out.append((m.DEFLATE, [min(9, max(0, int(level if level is not None else 1)))]))
        else:
            return f"codec {codec!r} is no HDF5 filter's bytes"
    return out


def fill_bytes(dtype: str, fill: object) -> bytes | None:
    """One element of what a missing chunk holds, in the stored dtype (None: zeros)."""
    if not isinstance(fill, (int, float)) or isinstance(fill, bool) and not fill:
        return None
    try:
        with np.errstate(over="raise", invalid="raise"):
            raw = np.asarray(fill, dtype=np.dtype(dtype)).tobytes()
    except (OverflowError, ValueError, FloatingPointError, TypeError):
        return None
    return raw if any(raw) else None


def _classic(a: ClassicAttr) -> Attr:
    if a.nctype == "char":
        if not a.data:
            return Attr(a.name, t.fixed_string(1), None, b"")
        ascii_ = all(b < 0x80 for b in a.data)
        return Attr(a.name, t.fixed_string(len(a.data), utf8=not ascii_), (), a.data)
    kind, size = NC_TYPES[a.nctype]
    values = np.frombuffer(a.data, dtype=TYPES[a.nctype][1]).astype(f"<{kind}{size}")
    dtype = t.floating(size) if kind == "f" else t.integer(size, kind == "i")
    return Attr(a.name, dtype, (len(values),), values.tobytes())


def _strings(name: str, values: list[str]) -> Attr:
    def data(ctx: Context) -> bytes:
        out = b""
        for v in values:
            raw = str(v).encode("utf-8", "replace")
            out += ctx.heap.add(raw, len(raw))
        return out
    return Attr(name, t.vlen_string(), (len(values),), data)


def file_attr(a: Attribute) -> Attr | str:
    """The HDF5 form of a model attribute (netCDF types: char as a fixed string, string, of one
    value too, as variable-length strings, as netCDF-C writes NC_STRING), or why it has none."""
    if a.name in RESERVED:
        return "a name HDF5 dimension scales or netCDF-C use for themselves"
    if a.nctype == "string" and a.value:
        got: Attr | ClassicAttr | str = _strings(a.name, list(a.value))
    else:
        got = classic_attr(a)
    if isinstance(got, ClassicAttr):
        got = _classic(got)
    return got


@functools.lru_cache(maxsize=1)
def provenance() -> Attr:
    """The root group's ``_NCProperties`` as netCDF-C writes it (a scalar fixed-length string of
    exactly its characters, null-terminated, ASCII): ``version=2`` first (netCDF-C takes the
    attribute as provenance only if it opens with a version it knows, 1 or 2), then comma-separated ``key=value``
    pairs, ``\\``, ``=``, ``|`` and ``,`` escaped with a backslash; ``nczfs=`` names the writer (netCDF-C
    writes ``netcdf=`` and ``hdf5=``: neither library wrote this file). Without it ``ncdump -s``
    shows no provenance at all."""
    text = "version=2,nczfs=" + "".join("\\" + c if c in "\\=|," else c for c in version.VERSION)
    raw = text.encode("ascii", "replace")
    return Attr("_NCProperties", t.fixed_string(len(raw)), (), raw)


def from_classic(a: ClassicAttr) -> Attr:
    """An attribute made for the classic files' readers (:func:`nczfs.nczarr.ncfile.ncattrs.implied_attrs`)."""
    return _classic(a)
