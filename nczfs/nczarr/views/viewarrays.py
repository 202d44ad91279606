"""Which arrays a view shows, and how its reader is shown chunks it cannot take as stored
(recoded: decoded, re-encoded, transposed, byte-swapped, re-chunked)."""

from __future__ import annotations

import numpy as np

from nczfs.nczarr.chunks.recode import Codecs, Recode
from nczfs.nczarr.chunks.v2form import TIME_UNITS, V2Array, v2_form, v3_to_v2
from nczfs.nczarr.metadata.model import Variable


def hide_reason(var: Variable, view: str, from_v3: bool, reader: bool = True, transcode: str = "auto",
                fact: dict | None = None) -> str | None:
    """Why ``view`` cannot show ``var`` (None if it can). ``reader``: shown to the view's reader,
    recoded where its chunks need it; else written as the view's flavor stores it (a translation
    back), where an array that would need recoding cannot be written."""
    if from_v3 and isinstance(v2 := v3_to_v2(var), str):
        return v2
    if view == "xarray":
        return None
    why = _type_reason(var)
    if why is not None or not reader:
        return why or _stored_reason(var, view)
    if view == "netcdf-4.9" and 0 in var.shape:
        return "a dimension of length 0 (netCDF-C 4.9.0 refuses a dimension of size 0)"
    plan = recode(var, view, from_v3, transcode, fact)
    return plan if isinstance(plan, str) else None


def _type_reason(var: Variable) -> str | None:
    """Why no netCDF view can show an array of ``var``'s type."""
    if var.nctype is None:
        return f"dtype {var.dtype} has no netCDF type"
    if var.dtype in ("numpy.datetime64", "numpy.timedelta64") and (
            var.dtype_config.get("unit") not in TIME_UNITS or var.dtype_config.get("scale_factor", 1) != 1):
        return (f"{var.dtype} in unit {var.dtype_config.get('scale_factor', 1)} x {var.dtype_config.get('unit')!r}"
                " (shown in netCDF's terms: days to nanoseconds, no multiples)")
    return None


def _stored_reason(var: Variable, view: str) -> str | None:
    """Why ``view``'s flavor cannot store ``var`` (a translation back into it)."""
    if view == "netcdf-4.9" and var.nctype == "string":
        return "string type (netCDF-C 4.9.0 has no NC_STRING in NCZarr)"
    if var.shape == []:
        return "zero-rank Zarr array (NCZarr stores scalars with shape [1])"
    if view == "netcdf-4.9" and var.scalar:
        return "scalar (netCDF-C 4.9.0 crashes re-opening NCZarr scalars)"
    return None


def netcdf_dtype(dtype: str) -> str:
    """The dtype netCDF-C is shown for a numpy dtype of the same bytes: bool as byte, times as int64."""
    if dtype[1:] == "b1":
        return "|i1"
    if dtype[1:2] in ("M", "m"):
        return dtype[0] + "i8"
    return dtype


#: the numcodecs ids each view's reader decodes, measured with each reader (docs/SEMANTICS.md):
#: Debian's netCDF-C 4.9.0 has no filter plugins (it reads compressed bytes as data); the netCDF4
#: wheel (4.10.1) has HDF5 plugins for these; netcdf-4.9.1 could not be measured, taken as 4.10.1's
READER_CODECS: dict[str, frozenset[str]] = {
    "netcdf-4.9": frozenset(),
    "netcdf-4.9.1": frozenset({"zlib", "zstd", "blosc", "bz2", "shuffle"}),
    "netcdf-4.10": frozenset({"zlib", "zstd", "blosc", "bz2", "shuffle"}),
}
_ZLIB = Codecs({"id": "zlib", "level": 1})


def recode(var: Variable, view: str, from_v3: bool, transcode: str = "auto",
           fact: dict | None = None) -> Recode | str | None:
    """How ``view``'s reader is shown ``var``'s chunks when it cannot take them as stored (None:
    as stored; a str: why it cannot be shown).

    netCDF-C ignores ``order: "F"`` (reads the data transposed) and fails on codecs it has no
    plugin for (Debian's 4.9.0 has none: it reads compressed bytes as data) and on NCZarr scalars
    with a blosc filter (4.10.1); Debian's 4.9.0 also ignores the byte order and refuses a chunk
    larger than its array along any axis. ``transcode`` (``-o transcode=``): ``auto``, chunks
    whose codecs the reader lacks are shown decoded, uncompressed (sizes known without reading
    them); ``none``, every compressed chunk is; ``zlib``, those the reader lacks are re-encoded
    with zlib where the reader has it; ``off``, no codec is transcoded (such arrays are hidden).
    ``fact``: what a scan of the array's chunks found (the longest variable-length string; whether
    nanosecond times are whole microseconds)."""
    if view == "xarray":
        return None
    v2 = v2_form(var, from_v3)
    chunks = v2.chunks or [1]
    codecs = Codecs(v2.compressor, tuple(v2.filters or ()))
    reads = READER_CODECS[view]
    decode = _decodes(codecs, reads, var, transcode)
    if isinstance(decode, str):
        return f"codecs {codecs.ids()} the {view} reader {decode}"
    dtype = _stored_dtype(var, v2)
    old = view == "netcdf-4.9"
    swap = old and dtype[0] == ">"
    shown_chunks = _shown_chunks(chunks, var.shape or [1], old)
    shown_type = _shown_type(var, dtype, old, swap, fact)
    if isinstance(shown_type, str):
        return shown_type
    shown_dtype, text_width, divide = shown_type
    decode = decode or text_width is not None
    if not _reshown(v2.order, swap, shown_chunks != chunks, decode, divide):
        return None  # as stored
    why = codecs.check() if codecs else None
    if why is not None:
        return why
    shown = _shown_codecs(codecs, decode, transcode, reads)
    return Recode(dtype, tuple(chunks), v2.order, codecs, shown_dtype, tuple(shown_chunks), shown, text_width, divide)


def _reshown(order: str, swap: bool, cut: bool, decode: bool, divide: int) -> bool:
    """Does the reader need the chunks other than stored: transposed, byte-swapped, cut to the
    array, decoded, or times divided?"""
    return order == "F" or swap or cut or decode or divide != 1


def _stored_dtype(var: Variable, v2: V2Array) -> str:
    return "|S1" if var.nctype == "char" else v2.dtype


def _shown_chunks(chunks: list[int], shape: list[int], old: bool) -> list[int]:
    """Debian's 4.9.0 refuses a chunk larger than its array along any axis: such chunks are cut."""
    return [min(c, s) if s else c for c, s in zip(chunks, shape)] if old else list(chunks)


def _shown_codecs(codecs: Codecs, decode: bool, transcode: str, reads: frozenset[str]) -> Codecs:
    if not decode:
        return codecs  # only the layout changes
    if transcode == "zlib" and "zlib" in reads:
        return _ZLIB
    return Codecs()


def _decodes(codecs: Codecs, reads: frozenset[str], var: Variable, transcode: str) -> bool | str:
    """Whether the chunks are shown decoded (-o transcode=), or why they cannot be shown."""
    lacks = [i for i in codecs.ids() if i not in reads] or (codecs and (var.scalar or not var.shape))
    if lacks and transcode == "off":
        return "cannot decode (-o transcode=off)"
    return bool(codecs) and (transcode == "none" or (transcode != "off" and bool(lacks)))


def _shown_type(var: Variable, dtype: str, old: bool, swap: bool, fact: dict | None) -> tuple[str, int | None, int] | str:
    """(the dtype the reader is shown, the width of variable-length strings shown fixed-width,
    the divisor of nanosecond times shown as microseconds), or why the array cannot be shown."""
    shown_dtype = netcdf_dtype(("<" + dtype[1:]) if swap else dtype)
    text_width, divide = None, 1
    if dtype == "|O" or dtype[1:2] == "U":  # strings: shown fixed-width UTF-8, as wide as the longest
        width = (fact or {}).get("maxlen") if dtype == "|O" else np.dtype(dtype).itemsize
        if width is None:
            return "variable-length strings whose longest value is not known"
        text_width = max(width, 1 if old else 2)  # netCDF-C reads S1 as char, S2 and wider as string
        shown_dtype = f"|S{text_width}"
    if var.dtype == "numpy.datetime64" and var.dtype_config.get("unit") == "ns" and (fact or {}).get("us_exact"):
        divide = 1000  # shown as microseconds, which cftime decodes (it has no nanoseconds)
    return shown_dtype, text_width, divide
