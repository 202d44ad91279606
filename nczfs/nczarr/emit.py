"""Write the dataset model back out as the metadata objects of one flavor (a *view*).

``emit(ds, view)`` returns ``{key: bytes}`` for every metadata object of the view (keys
relative to the dataset root) and the arrays it had to leave out, each with its reason.
Chunks are never rewritten: for arrays read from Zarr v3, :func:`v3_chunk_prefix` says where
their chunks live. Views (NCZARR_FORMATS.md section 8):

* ``netcdf-4.10``: V2-ZA, what netCDF-C 4.9.3 and later read;
* ``netcdf-4.9.1``: V2-LC (lower-case keys inside ``.zgroup``/``.zarray``), what 4.9.1/4.9.2 read;
* ``netcdf-4.9``: V2-UC (upper-case keys), what 4.8.1 and 4.9.0 read (Debian's 4.9.0 ignores
  compressors and byte order, so compressed and big-endian arrays are left out there);
* ``xarray``: pure Zarr v2 with ``_ARRAY_DIMENSIONS`` on every array, no NCZarr keys.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from nczfs.nczarr import jsontext, sharding
from nczfs.nczarr.sharding import Sharding
from nczfs.nczarr.model import NC_TYPES, Attribute, Dataset, Dimension, Group, Variable
from nczfs.nczarr.transcode import Codecs, Recode

_V3_DTYPES = {"int8": "i1", "uint8": "u1", "int16": "i2", "uint16": "u2", "int32": "i4", "uint32": "u4",
              "int64": "i8", "uint64": "u8", "float16": "f2", "float32": "f4", "float64": "f8", "bool": "b1",
              "complex64": "c8", "complex128": "c16"}
_BLOSC_SHUFFLE = {"noshuffle": 0, "shuffle": 1, "bitshuffle": 2}
#: numpy units a datetime64/timedelta64 may have, and their CF names
TIME_UNITS = {"D": "days", "h": "hours", "m": "minutes", "s": "seconds", "ms": "milliseconds",
              "us": "microseconds", "ns": "nanoseconds"}


def _v2_base(var: Variable) -> str | None:
    """The numpy dtype (without byte order) of a Zarr v3 data type, if Zarr v2 has one."""
    conf = var.dtype_config
    if var.dtype in ("numpy.datetime64", "numpy.timedelta64"):
        unit, scale = conf.get("unit"), conf.get("scale_factor", 1)
        if unit not in TIME_UNITS and unit not in ("Y", "M", "W") or not isinstance(scale, int) or scale < 1:
            return None
        return ("M8" if var.dtype == "numpy.datetime64" else "m8") + f"[{scale if scale != 1 else ''}{unit}]"
    if var.dtype == "null_terminated_bytes" and isinstance(conf.get("length_bytes"), int):
        return f"S{conf['length_bytes']}"
    if var.dtype == "fixed_length_utf32" and isinstance(conf.get("length_bytes"), int):
        return f"U{conf['length_bytes'] // 4}"
    if var.dtype == "string":
        return "O"
    return _V3_DTYPES.get(var.dtype)


@dataclass
class V2Array:
    """How an array appears in Zarr v2 terms (translated from v3 where needed)."""

    dtype: str
    order: str
    compressor: dict | None
    filters: list[dict] | None
    separator: str
    #: the chunks a view shows (a sharded array: its innermost chunks)
    chunks: list[int] = field(default_factory=list)
    #: a sharded v3 array: how its shards hold those chunks
    sharding: Sharding | None = None


def v3_to_v2(var: Variable) -> V2Array | str:
    """The v2 form of an array read from Zarr v3, or why it has none."""
    base = _v2_base(var)
    if base is None:
        return f"data_type {var.dtype} has no Zarr v2 equivalent here"
    codecs = list(var.codecs)
    chunks, sharded, separator = list(var.chunks), None, var.dimension_separator
    if codecs and codecs[0].get("name") == "sharding_indexed":
        found = sharding.parse(codecs)
        if not isinstance(found, str):
            found = sharding.with_shard_shape(found, tuple(var.chunks))
        if isinstance(found, str):
            return found
        sharded, codecs, chunks, separator = found, list(found.codecs), list(found.chunks), "."
    order = _order(codecs, len(var.shape))
    if order not in ("C", "F"):
        return order
    mapped: list[dict] = []
    if base == "O" and codecs and codecs[0].get("name") == "vlen-utf8":  # the same bytes as numcodecs'
        codecs.pop(0)
        mapped.append({"id": "vlen-utf8"})
        big = False
    elif not codecs or codecs[0].get("name") != "bytes":
        return f"codecs {[c.get('name') for c in codecs]} do not start with 'bytes'"
    else:
        big = (codecs.pop(0).get("configuration") or {}).get("endian") == "big"
    endian = ">" if big else "<"
    dtype = ("|" if base in ("O", "b1", "i1", "u1") or base[0] == "S" else endian) + base
    for c in codecs:
        got = _v2_codec(c.get("name"), dict(c.get("configuration") or {}))
        if isinstance(got, str):
            return got
        mapped.append(got)
    compressor = mapped[-1] if mapped else None
    return V2Array(dtype, order, compressor, mapped[:-1] or None, separator, chunks, sharded)


def _order(codecs: list[dict], rank: int) -> str:
    """"C", or "F" for a leading transpose reversing the axes (taken off ``codecs``), or why
    the array has no v2 order."""
    if not codecs or codecs[0].get("name") != "transpose":
        return "C"
    perm = (codecs.pop(0).get("configuration") or {}).get("order")
    if list(perm or []) != list(reversed(range(rank))):
        return f"transpose order {perm} is neither C nor F"
    return "F"


def _v2_codec(name: Any, conf: dict) -> dict | str:
    """The numcodecs (Zarr v2) configuration of a v3 bytes-to-bytes codec, or why it has none."""
    if name == "gzip":
        return {"id": "gzip", "level": conf.get("level", 5)}
    if name == "zstd":
        if conf.get("checksum"):
            return "zstd with checksum has no numcodecs v2 equivalent"
        return {"id": "zstd", "level": conf.get("level", 0)}
    if name == "blosc":
        shuffle = _BLOSC_SHUFFLE.get(conf.get("shuffle", "noshuffle"), conf.get("shuffle"))
        return {"id": "blosc", "cname": conf.get("cname", "lz4"), "clevel": conf.get("clevel", 5),
                "shuffle": shuffle, "blocksize": conf.get("blocksize", 0)}
    if name == "crc32c":
        return {"id": "crc32c"}
    if isinstance(name, str) and name.startswith("numcodecs."):
        return {"id": name[len("numcodecs."):], **conf}
    return f"codec {name!r} has no Zarr v2 equivalent"


def v3_chunk_prefix(var: Variable, encoding_name: str = "default") -> str:
    """What v3 puts before the chunk indices: ``c/`` or ``c.`` (default encoding), else nothing."""
    return f"c{var.dimension_separator}" if encoding_name == "default" else ""


def attr_dtype(nctype: str, view: str) -> str | None:
    if nctype == "char":
        return "<U1" if view == "netcdf-4.9" else ">S1"
    if nctype == "string":
        return None if view == "netcdf-4.9" else "|S128"
    kind, size = NC_TYPES[nctype]
    return f"<{kind}{size}"


def json_value(attr: Attribute) -> Any:
    if attr.nctype == "char":
        return attr.value
    values = [_json_number(v) for v in attr.value] if attr.nctype != "string" else list(attr.value)
    return values[0] if len(values) == 1 else values


def _json_number(v: Any) -> Any:
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
    return v


def _v2_form(var: Variable, from_v3: bool) -> V2Array:
    if from_v3:
        v2 = v3_to_v2(var)
        assert isinstance(v2, V2Array)
        return v2
    return V2Array(var.dtype, var.order, var.compressor, var.filters or None, var.dimension_separator, list(var.chunks))


def hide_reason(var: Variable, view: str, from_v3: bool, reader: bool = True, transcode: str = "auto",
                fact: dict | None = None) -> str | None:
    """Why ``view`` cannot show ``var`` (None if it can). ``reader``: shown to the view's reader,
    recoded where its chunks need it; else written as the view's flavor stores it (a translation
    back), where an array that would need recoding cannot be written."""
    if from_v3:
        v2 = v3_to_v2(var)
        if isinstance(v2, str):
            return v2
    if view == "xarray":
        return None
    if var.nctype is None:
        return f"dtype {var.dtype} has no netCDF type"
    if var.dtype in ("numpy.datetime64", "numpy.timedelta64") and (
            var.dtype_config.get("unit") not in TIME_UNITS or var.dtype_config.get("scale_factor", 1) != 1):
        return (f"{var.dtype} in unit {var.dtype_config.get('scale_factor', 1)} x {var.dtype_config.get('unit')!r}"
                " (shown in netCDF's terms: days to nanoseconds, no multiples)")
    if view == "netcdf-4.9" and var.nctype == "string" and not reader:
        return "string type (netCDF-C 4.9.0 has no NC_STRING in NCZarr)"
    if not reader:
        if var.shape == []:
            return "zero-rank Zarr array (NCZarr stores scalars with shape [1])"
        if view == "netcdf-4.9" and var.scalar:
            return "scalar (netCDF-C 4.9.0 crashes re-opening NCZarr scalars)"
        return None
    if view == "netcdf-4.9" and 0 in var.shape:
        return "a dimension of length 0 (netCDF-C 4.9.0 refuses a dimension of size 0)"
    plan = recode(var, view, from_v3, transcode, fact)
    return plan if isinstance(plan, str) else None


def _netcdf_dtype(dtype: str) -> str:
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
    v2 = _v2_form(var, from_v3)
    chunks, shape = v2.chunks or [1], var.shape or [1]
    codecs = Codecs(v2.compressor, tuple(v2.filters or ()))
    reads = READER_CODECS[view]
    decode = _decodes(codecs, reads, var, transcode)
    if isinstance(decode, str):
        return f"codecs {codecs.ids()} the {view} reader {decode}"
    dtype = "|S1" if var.nctype == "char" else v2.dtype
    old = view == "netcdf-4.9"
    swap = old and dtype[0] == ">"
    shown_chunks = [min(c, s) if s else c for c, s in zip(chunks, shape)] if old else list(chunks)
    shown_type = _shown_type(var, dtype, old, swap, fact)
    if isinstance(shown_type, str):
        return shown_type
    shown_dtype, text_width, divide = shown_type
    decode = decode or text_width is not None
    if v2.order != "F" and not swap and shown_chunks == chunks and not decode and divide == 1:
        return None
    if codecs and (why := codecs.check()) is not None:
        return why
    shown = Codecs()
    if not decode:
        shown = codecs  # only the layout changes
    elif transcode == "zlib" and "zlib" in reads:
        shown = _ZLIB
    return Recode(dtype, tuple(chunks), v2.order, codecs, shown_dtype, tuple(shown_chunks), shown, text_width, divide)


def _decodes(codecs: Codecs, reads: frozenset[str], var: Variable, transcode: str) -> bool | str:
    """Whether the chunks are shown decoded (-o transcode=), or why they cannot be shown."""
    lacks = [i for i in codecs.ids() if i not in reads] or (codecs and (var.scalar or not var.shape))
    if lacks and transcode == "off":
        return "cannot decode (-o transcode=off)"
    return bool(codecs) and (transcode == "none" or (transcode != "off" and bool(lacks)))


def _shown_type(var: Variable, dtype: str, old: bool, swap: bool, fact: dict | None) -> tuple[str, int | None, int] | str:
    """(the dtype the reader is shown, the width of variable-length strings shown fixed-width,
    the divisor of nanosecond times shown as microseconds), or why the array cannot be shown."""
    shown_dtype = _netcdf_dtype(("<" + dtype[1:]) if swap else dtype)
    text_width, divide = None, 1
    if dtype == "|O":  # variable-length strings: shown fixed-width, as wide as the longest
        width = (fact or {}).get("maxlen")
        if width is None:
            return "variable-length strings whose longest value is not known"
        text_width = max(width, 1 if old else 2)  # netCDF-C reads S1 as char, S2 and wider as string
        shown_dtype = f"|S{text_width}"
    if var.dtype == "numpy.datetime64" and var.dtype_config.get("unit") == "ns" and (fact or {}).get("us_exact"):
        divide = 1000  # shown as microseconds, which cftime decodes (it has no nanoseconds)
    return shown_dtype, text_width, divide


def _prune(ds: Dataset, view: str, reader: bool, transcode: str, facts: dict[str, dict]) -> list[tuple[str, str]]:
    """Remove the arrays ``view`` cannot show from the model; return (path, reason) for each."""
    hidden = []
    from_v3 = ds.flavor == "zarr-v3"
    for g in ds.root.walk():
        keep = []
        for v in g.variables:
            reason = hide_reason(v, view, from_v3, reader, transcode, facts.get(_join(g.path, v.name)))
            if reason is None:
                keep.append(v)
            else:
                hidden.append((_join(g.path, v.name), reason))
        g.variables = keep
        if reader and view == "netcdf-4.9":
            g.dims = [d for d in g.dims if d.size > 0]
    return hidden


def _strings_as_chars(ds: Dataset, from_v3: bool, facts: dict[str, dict], hidden: list[tuple[str, str]],
                      layouts: Layouts) -> None:
    """netCDF-C 4.9.0 has no NC_STRING in NCZarr: a string array is shown as a char array along one
    more dimension, ``<name>_strlen``, as wide as its strings (variable-length: the longest), of
    one chunk: chunk ``i.j.0`` of the view is the stored chunk ``i.j``."""
    for g in ds.root.walk():
        keep = []
        for v in g.variables:
            if v.nctype == "string":
                path = _join(g.path, v.name)
                v2 = _v2_form(v, from_v3)
                width = (facts.get(path) or {}).get("maxlen") if v2.dtype == "|O" else np.dtype(v2.dtype).itemsize
                name, dim = f"{v.name}_strlen", g.dim(f"{v.name}_strlen")
                if width is None or (dim is not None and dim.size != max(width, 1)):
                    hidden.append((path, "strings whose width is not known, or a dimension of their name"))
                    continue
                if dim is None:
                    g.dims.append(Dimension(name, max(width, 1)))
                v.dimrefs = [*v.dimrefs, f"{g.path.rstrip('/')}/{name}"]
                layouts.char_axis[path] = v.dimension_separator
            keep.append(v)
        g.variables = keep


def _cf_attributes(var: Variable, view: str, g: Group, plan: Recode | str | None) -> list[Attribute]:
    """What netCDF views add to an array of a type netCDF has not, in CF's terms (where the array
    has no attribute of that name): bool as byte with flag_values/flag_meanings, times as int64
    counts with units (and calendar) that cftime and netCDF4.num2date decode, NaT as _FillValue; in
    the netcdf-4.9 view, a string array's ``_nczarr_maxstrlen``."""
    if view == "xarray":
        return []
    out = []
    if var.dtype == "bool":
        out += [Attribute("flag_values", "byte", [0, 1]), Attribute("flag_meanings", "char", "false true")]
    elif var.dtype in ("numpy.datetime64", "numpy.timedelta64"):
        unit = TIME_UNITS.get(var.dtype_config.get("unit", ""), "")
        if isinstance(plan, Recode) and plan.divide == 1000:
            unit = "microseconds"
        if var.dtype == "numpy.datetime64":
            out += [Attribute("units", "char", f"{unit} since 1970-01-01"),
                    Attribute("calendar", "char", "proleptic_gregorian")]
        else:
            out.append(Attribute("units", "char", unit))
        if var.fill_value == np.iinfo("i8").min:
            out.append(Attribute("_FillValue", "int64", [var.fill_value]))
    elif view == "netcdf-4.9" and var.nctype == "string" and var.dimrefs:
        strlen = g.dim(var.dimrefs[-1].rpartition("/")[2])
        if strlen is not None:
            out.append(Attribute("_nczarr_maxstrlen", "int", [strlen.size]))
    have = {a.name for a in var.attributes}
    return [a for a in out if a.name not in have]


def _scalars_on_a_dimension(ds: Dataset, hidden: list[tuple[str, str]]) -> None:
    """netCDF-C 4.9.0 crashes on NCZarr scalars (even its own): it is shown each as an array of
    one element along a root dimension ``_scalar_`` of length 1 (what pure Zarr readers see)."""
    if ds.root.dim("_scalar_") not in (None, Dimension("_scalar_", 1)):
        for g in ds.root.walk():
            hidden.extend((_join(g.path, v.name), "scalar, and a dimension _scalar_ of another length exists")
                          for v in g.variables if v.scalar)
            g.variables = [v for v in g.variables if not v.scalar]
        return
    for g in ds.root.walk():
        for v in g.variables:
            if v.scalar:
                v.scalar, v.shape, v.chunks, v.dimrefs = False, [1], [1], ["/_scalar_"]
                if ds.root.dim("_scalar_") is None:
                    ds.root.dims.append(Dimension("_scalar_", 1))


def _join(gpath: str, name: str) -> str:
    return f"{gpath.strip('/')}/{name}".lstrip("/")


def dumps_for(view: str) -> Callable[[Any], bytes]:
    """How ``view`` writes JSON: as netCDF-C does for its readers, standard JSON for zarr-python."""
    return jsontext.dumps_zarr if view == "xarray" else jsontext.dumps_netcdf


def _zarray(var: Variable, from_v3: bool, view: str, plan: Recode | None = None) -> dict:
    v2 = _v2_form(var, from_v3)
    dtype, order, compressor, filters, sep = v2.dtype, v2.order, v2.compressor, v2.filters, v2.separator
    chunks = v2.chunks
    if plan is not None:
        dtype, chunks, order = plan.shown_dtype, list(plan.shown_chunks), "C"
        compressor = plan.shown_codecs.compressor
        filters = list(plan.shown_codecs.filters) or None
    elif view != "xarray":
        dtype = _netcdf_dtype(dtype)
    shape = var.shape
    if view == "netcdf-4.9" and var.nctype == "string":  # 4.9.0 has no strings: chars along a length
        width = np.dtype(dtype).itemsize
        shape, chunks, dtype, sep = [*(shape or [1]), width], [*(chunks or [1]), width], "<U1", "."
    elif var.nctype == "char":  # one byte per char in every flavor; zarr-python 3 refuses <U1 and >S1
        dtype = {"netcdf-4.9": "<U1", "xarray": "|S1"}.get(view, ">S1")
    elif view == "xarray" and len(dtype) == 3 and dtype[0] in "<>" and dtype[1] in "iub" and dtype[2] == "1":
        dtype = "|" + dtype[1:]  # netCDF-C writes <i1/<u1, which zarr-python 3 refuses
    fill = _xarray_v3_fill(var, dtype) if from_v3 and view == "xarray" else _fill(var)
    if not shape and view != "xarray":  # a zero-rank Zarr array, shown as an NCZarr scalar
        shape, chunks = [1], [1]
    out = {"zarr_format": 2, "shape": shape, "chunks": chunks, "dtype": dtype,
           "fill_value": fill, "order": order, "compressor": compressor, "filters": filters}
    if sep != ".":
        out["dimension_separator"] = sep
    return out


def _fill(var: Variable) -> Any:
    return _json_number(var.fill_value) if isinstance(var.fill_value, float) else var.fill_value


def _xarray_v3_fill(var: Variable, dtype: str) -> Any:
    """xarray masks Zarr v2 data with ``fill_value`` but Zarr v3 data only with the ``_FillValue``
    attribute (base64 of the value's bytes): the v2 form takes that attribute, or no fill."""
    attr = next((a for a in var.attributes if a.name == "_FillValue"), None)
    if attr is None:
        # no _FillValue: a zero fill is what a v2 reader fills missing chunks with anyway; another
        # one must be the v2 fill_value, or missing chunks would read as zeros (xarray then masks it)
        fill = _fill(var)
        return None if fill in (0, "", None) else fill
    if attr.nctype != "char":
        return _json_number(attr.value[0])
    try:
        raw = base64.b64decode(attr.value, validate=True)
        dt = np.dtype(dtype)
        if dt.kind == "f" and len(raw) == 8:
            dt = np.dtype("<f8")  # xarray encodes float fills as float64
        value = np.frombuffer(raw, dtype=dt)
    except (ValueError, TypeError):
        return None
    return _json_number(value[0].item()) if value.size == 1 else None


#: netCDF-C 4.9.0's type for an untyped JSON integer: the first of these that holds it (zsync.c mininttype)
_SMALLEST_INT = (("byte", -(2**7), 2**7 - 1), ("ubyte", 0, 2**8 - 1), ("short", -(2**15), 2**15 - 1),
                 ("ushort", 0, 2**16 - 1), ("int", -(2**31), 2**31 - 1), ("uint", 0, 2**32 - 1),
                 ("int64", -(2**63), 2**63 - 1), ("uint64", 0, 2**64 - 1))


def _as_read_by(a: Attribute, view: str) -> Attribute:
    """An untyped (pure Zarr) attribute as ``view``'s reader would type it reading the store
    itself: 4.9.0 gives integers the smallest type that holds them (4.10 and nczfs: int first)."""
    if view == "netcdf-4.9" and a.raw is not None and a.nctype in ("int", "uint", "int64", "uint64"):
        for nctype, lo, hi in _SMALLEST_INT:
            if all(lo <= v <= hi for v in a.value):
                return Attribute(a.name, nctype, a.value, a.raw)
    return a


def _types(attrs: list[Attribute], view: str, key: str, dropped: list[tuple[str, str]]) -> tuple[dict, dict]:
    """(attribute values, NCZarr type strings) as ``view`` writes them; the xarray view shows
    untyped (pure Zarr) attributes as they are stored."""
    values, types = {}, {}
    for a in attrs:
        if view == "xarray" and a.raw is not None:
            values[a.name] = a.raw
            continue
        a = _as_read_by(a, view)
        dtype = attr_dtype(a.nctype, view)
        if dtype is None:
            if len(a.value) != 1:
                dropped.append((f"{key}:{a.name}", f"{a.nctype} attribute with {len(a.value)} values"))
                continue
            values[a.name], types[a.name] = a.value[0], attr_dtype("char", view)
            continue
        values[a.name], types[a.name] = json_value(a), dtype
    return values, types


def _dims_json(g: Group, unlimited: bool) -> dict:
    return {d.name: {"size": d.size, "unlimited": 1} if (d.unlimited and unlimited) else d.size for d in g.dims}


def _pure_zarr_dims_as_read(ds: Dataset, view: str) -> None:
    """Dimensions nczfs made for pure Zarr arrays, where the view's reader would make them reading
    the store itself: netCDF-C 4.9.0 makes them in the root group (where netCDF datasets usually
    declare them), 4.10.1 in the array's group, and takes a length of 0 as unlimited."""
    if ds.flavor not in ("zarr-v2", "zarr-v3"):
        return
    if view == "netcdf-4.10":
        for g in ds.root.walk():
            for d in g.dims:
                d.unlimited = d.unlimited or d.size == 0
    if view != "netcdf-4.9":
        return
    for g in list(ds.root.walk())[1:]:
        keep = []
        for d in g.dims:
            top = ds.root.dim(d.name)
            if top is not None and top.size != d.size:
                keep.append(d)  # 4.9.0 fails on the whole file here; the view keeps it in its group
                continue
            if top is None:
                ds.root.dims.append(d)
            old, new = f"{g.path.rstrip('/')}/{d.name}", f"/{d.name}"
            for h in ds.root.walk():
                for v in h.variables:
                    v.dimrefs = [new if r == old else r for r in v.dimrefs]
        g.dims = keep


@dataclass
class Layouts:
    """How a view shows the chunks of arrays it does not show as stored, by array path (``emit``
    fills it): recoded; sharded (shown by their innermost chunks: the sharding, the array's shape
    and its chunk keys' separator); strings shown as chars along one more axis, of one chunk (the
    stored chunk keys' separator)."""

    recodes: dict[str, Recode] = field(default_factory=dict)
    shardings: dict[str, tuple[Sharding, list[int], str]] = field(default_factory=dict)
    char_axis: dict[str, str] = field(default_factory=dict)


def emit(ds: Dataset, view: str, reader: bool = True, transcode: str = "auto", facts: dict[str, dict] | None = None,
         layouts: Layouts | None = None) -> tuple[dict[str, bytes], list[tuple[str, str]]]:
    """The metadata objects of ``view`` for ``ds`` ({key: bytes}), and what was left out.

    ``reader``: as shown to the view's reader (chunks it cannot take as stored are shown otherwise,
    said in ``layouts``); else as the view's flavor stores ``ds`` (a translation back into it),
    where such arrays are left out. ``facts``: by path, what scans of arrays' chunks found (see
    :func:`recode`)."""
    from_v3 = ds.flavor == "zarr-v3"
    facts = facts or {}
    layouts = layouts if layouts is not None else Layouts()
    hidden = _prune(ds, view, reader, transcode, facts)
    if reader:
        _pure_zarr_dims_as_read(ds, view)
    if reader and view == "netcdf-4.9":
        _scalars_on_a_dimension(ds, hidden)
        _strings_as_chars(ds, from_v3, facts, hidden, layouts)

    def plan_for(v: Variable, g: Group) -> Recode | str | None:
        return recode(v, view, from_v3, transcode, facts.get(_join(g.path, v.name))) if reader else None

    _dumps = dumps_for(view)
    out: dict[str, bytes] = {}
    for g in ds.root.walk():
        prefix = g.path.strip("/")
        gkey = (prefix + "/") if prefix else ""
        values, types = _types(g.attributes, view, gkey + ".zattrs", hidden)
        zgroup, zattrs = _group_objects(g, g is ds.root, view, values, types)
        out[gkey + ".zgroup"] = _dumps(zgroup)
        if zattrs or view in ("netcdf-4.10", "netcdf-4.9.1"):
            out[gkey + ".zattrs"] = _dumps(zattrs)
        for v in g.variables:
            akey = gkey + v.name + "/"
            plan = plan_for(v, g)
            values, types = _types(_array_attributes(v, g, view, from_v3, plan), view, akey + ".zattrs", hidden)
            if isinstance(plan, Recode):
                layouts.recodes[_join(g.path, v.name)] = plan
            if from_v3 and (sh := _v2_form(v, True).sharding) is not None:
                layouts.shardings[_join(g.path, v.name)] = (sh, list(v.shape), v.dimension_separator)
            zarray, zattrs = _array_objects(v, g is ds.root, view, from_v3, plan, values, types)
            out[akey + ".zarray"] = _dumps(zarray)
            if zattrs or view in ("netcdf-4.10", "netcdf-4.9.1"):
                out[akey + ".zattrs"] = _dumps(zattrs)
    if ds.consolidated:
        meta = {k: jsontext.loads(b) for k, b in out.items()}
        out[".zmetadata"] = _dumps({"zarr_consolidated_format": 1, "metadata": meta})
    return out, hidden


def _nczarr_key(view: str) -> Callable[[str], str]:
    """How ``view`` spells NCZarr's keys (netCDF-C 4.9.0: upper case)."""
    return (lambda s: s.upper()) if view == "netcdf-4.9" else (lambda s: s)


def _group_objects(g: Group, root: bool, view: str, values: dict, types: dict) -> tuple[dict, dict]:
    """A group's ``.zgroup`` and ``.zattrs`` as ``view`` writes them."""
    group_meta = {"arrays": [v.name for v in g.variables], "groups": [s.name for s in g.groups]}
    zgroup: dict = {"zarr_format": 2}
    zattrs = dict(values)
    if view == "netcdf-4.10":
        zattrs["_nczarr_group"] = {"dimensions": _dims_json(g, True), **group_meta}
        if root:
            zattrs["_nczarr_superblock"] = {"version": "2.0.0"}
        zattrs["_nczarr_attr"] = {"types": {**types, **{k: "|J0" for k in zattrs if k.startswith("_nczarr_")},
                                            "_nczarr_attr": "|J0"}}
    elif view in ("netcdf-4.9", "netcdf-4.9.1"):
        k = _nczarr_key(view)
        if root:
            zgroup[k("_nczarr_superblock")] = {"version": "2.0.0"}
        zgroup[k("_nczarr_group")] = {"dims": _dims_json(g, False), "vars": group_meta["arrays"],
                                      "groups": group_meta["groups"]}
        if values:
            zattrs[k("_nczarr_attr")] = {"types": types}
    return zgroup, zattrs


def _array_attributes(v: Variable, g: Group, view: str, from_v3: bool, plan: Recode | str | None) -> list[Attribute]:
    """The attributes ``view`` shows of ``v``: _FillValue only where its reader takes it, the CF
    attributes that say what a shown type means."""
    attrs = v.attributes
    if view != "xarray" or from_v3:  # netCDF-C wants it of the variable's type; v3: in fill_value
        attrs = [a for a in attrs if a.name != "_FillValue" or (a.nctype == v.nctype and not from_v3)]
    if view == "netcdf-4.9" and v.nctype == "string":  # shown as chars: a string fill is no char
        attrs = [a for a in attrs if a.name != "_FillValue"]
    return [*attrs, *_cf_attributes(v, view, g, plan)]


def _array_objects(v: Variable, root: bool, view: str, from_v3: bool, plan: Recode | str | None,
                   values: dict, types: dict) -> tuple[dict, dict]:
    """An array's ``.zarray`` and ``.zattrs`` as ``view`` writes them."""
    zarray = _zarray(v, from_v3, view, plan if isinstance(plan, Recode) else None)
    if not v.shape and view != "xarray":
        v.scalar = True  # a zero-rank Zarr array, shown as an NCZarr scalar
    names = [r.rpartition("/")[2] for r in v.dimrefs] if not v.scalar else (["_scalar_"] if v.shape else [])
    zattrs = dict(values)
    if view != "netcdf-4.9" or root:
        zattrs["_ARRAY_DIMENSIONS"] = names
    if view == "netcdf-4.10":
        ncz = {"dimension_references": v.dimrefs, "storage": "chunked"}
        if v.scalar:
            ncz["scalar"] = 1
        zattrs["_nczarr_array"] = ncz
        zattrs["_nczarr_attr"] = {"types": {**types, "_nczarr_array": "|J0", "_nczarr_attr": "|J0"}}
    elif view in ("netcdf-4.9", "netcdf-4.9.1"):
        k = _nczarr_key(view)
        zarray[k("_nczarr_array")] = {"dimrefs": v.dimrefs, "storage": "scalar" if v.scalar else "chunked"}
        if types:
            zattrs[k("_nczarr_attr")] = {"types": types}
    return zarray, zattrs


def signature(ds: Dataset) -> str:
    """What a dataset means to netCDF, independent of flavor (to check a translation loses nothing)."""
    def var(v: Variable) -> list:
        fill = _json_number(v.fill_value) if isinstance(v.fill_value, float) else v.fill_value
        return [v.name, v.nctype, v.big_endian, v.shape, v.chunks, v.dimrefs, fill, v.order, v.compressor,
                v.filters or None, v.scalar, [(a.name, a.nctype, json_value(a)) for a in v.attributes]]

    def group(g: Group) -> list:
        return [g.name, [(d.name, d.size, d.unlimited) for d in g.dims], [var(v) for v in g.variables],
                [(a.name, a.nctype, json_value(a)) for a in g.attributes], [group(s) for s in g.groups]]

    return json.dumps(group(ds.root), sort_keys=True, default=str)
