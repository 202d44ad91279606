"""The netCDF classic file of one group of a dataset: what it holds and where its values come from.

The classic formats have no groups: a dataset ``NAME`` gives ``NAME.nc`` for its root group and
``NAME.G.nc`` (``NAME.G.H.nc`` ...) for each sub-group holding arrays. A group's file holds its
dimensions, the dimensions of outer groups its variables use (renamed ``x_1`` ... where names
clash), its attributes as global attributes, and every variable the format has a type for:

* the netCDF types as they are; ``ubyte``, ``ushort``, ``uint``, ``int64``, ``uint64`` (of a
  variable or an attribute) make the file CDF-5;
* fixed-width strings (``|S<n>``) as char arrays with one more dimension ``string<n>``;
* numpy's unicode strings (``<U<n>``, Zarr v3 ``fixed_length_utf32``) as UTF-8 in chars of a
  dimension ``string<4n>``, variable-length strings (Zarr v2 ``|O`` with vlen-utf8, v3 ``string``)
  in chars as wide as the longest (a scan of their chunks), both with ``_Encoding = "utf-8"``;
* bool as byte with ``dtype = "bool"`` (xarray restores bool), ``flag_values``, ``flag_meanings``;
* a scalar as a variable without dimensions;
* one unlimited dimension (in pure Zarr, failing one, one of length 0), the first one every
  variable using it uses as its first axis, as the record dimension; the others fixed;
* a string attribute of one value as text; the mask (:mod:`nczfs.nczarr.metadata.masks`) as ``_FillValue``
  (of bytes in chars: one char, :mod:`nczfs.nczarr.ncfile.classicfills`).

A sharded Zarr v3 array's values come from its innermost chunks, each a byte range of its shard.

Left out, each with its reason (``nczfs inspect`` lists them): variables of types with no netCDF
type (complex, ``float16``; datetimes are shown as ``int64`` with CF ``units``), variable-length
strings whose chunks were not scanned (sharded), variables whose codecs cannot be
decoded here, variables on a dimension of length 0 that is not the record dimension, names the
classic formats refuse, string attributes of several values, attribute values out of their
type's range. Pure computation: no I/O.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from nczfs.nczarr.chunks.recode import Codecs, Recode
from nczfs.nczarr.chunks.sharding import ShardedArray, Sharding
from nczfs.nczarr.chunks.v2form import V2Array, v3_to_v2
from nczfs.nczarr.metadata import jsontext
from nczfs.nczarr.metadata.masks import cf_attributes
from nczfs.nczarr.metadata.model import Attribute, Dataset, Dimension, Group, Variable
from nczfs.nczarr.ncfile.classicfills import char_fill, chars_mask, missing_fill
from nczfs.nczarr.ncfile.classicheader import TYPES, Attr, Dim, Layout, Var, layout, valid_name
from nczfs.nczarr.ncfile.ncattrs import classic_attr, implied_attrs

_FIXED_STRING = re.compile(r"^[<>|]?S(\d+)$")
_UNICODE = re.compile(r"^[<>|]?U(\d+)$")


@dataclass
class Values:
    """Where a classic variable's values come from: one Zarr array, element for element.

    Elements are counted over ``shape``: the array's shape, except that a record variable's first
    axis has the file's number of records (records past the array's length are fill values). A
    fixed-width string is one element of ``dtype`` ``|S<n>`` (its n chars in the file)."""

    #: the array's key prefix in the store (where its chunks lie)
    array: str
    shape: tuple[int, ...]
    #: the stored array's shape (elements outside it are fill values)
    stored: tuple[int, ...]
    chunks: tuple[int, ...]
    #: an element in the file: big-endian number, ``|S1`` char or ``|S<n>`` string
    dtype: str
    #: one element of fill, for chunks missing in the store
    fill: bytes
    #: a stored chunk -> its elements as ``dtype``, in C order
    recode: Recode
    #: between the chunk indexes; what comes before them (Zarr v3: ``c/``, ``c.``)
    separator: str = "."
    chunk_prefix: str = ""
    #: numpy unicode strings (``<U<n>``): what ``recode`` gives, each then UTF-8 in ``dtype``
    text: str = ""
    #: a sharded Zarr v3 array: ``chunks`` are its innermost chunks, each a byte range of the
    #: shard that :meth:`key_of` names for the shard's grid index (see :attr:`shards`)
    sharding: Sharding | None = None

    def decode(self, raw: bytes, key: str = "") -> np.ndarray:
        """A stored chunk as its elements in the file's form (CPU work: off the trio thread)."""
        out = self.recode.shown_array(raw, key)  # shown uncompressed: the array, not copied into bytes
        if self.text:
            arr = out.view(self.text).reshape(self.chunks)
            return np.char.encode(arr, "utf-8").astype(self.dtype)
        return out.view(self.dtype).reshape(self.chunks)

    def key_of(self, index: tuple[int, ...]) -> str:
        """The store key of chunk ``index`` (zero-rank: Zarr v2 ``0``, v3 ``c``)."""
        name = self.chunk_prefix + self.separator.join(map(str, index)) if index else \
            (self.chunk_prefix.rstrip("/.") or "0")
        return f"{self.array}/{name}" if self.array else name

    @functools.cached_property
    def shards(self) -> ShardedArray | None:
        """How to find an innermost chunk in its shard (None: not sharded)."""
        if self.sharding is None:
            return None
        return ShardedArray(self.array, self.chunk_prefix, self.separator, self.sharding, self.grid)

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def grid(self) -> tuple[int, ...]:
        """Chunks along each axis of the stored array."""
        return tuple(math.ceil(s / c) if c else 0 for s, c in zip(self.stored, self.chunks))


@dataclass
class GroupFile:
    """The classic file of one group."""

    #: the group's path in the dataset (``/``, ``/g``)
    group: str
    layout: Layout
    #: parallel to ``layout.vars``
    values: list[Values]
    #: what the file leaves out: ``/g/v: reason`` or ``/g/v:attr: reason``
    left_out: list[str] = field(default_factory=list)

    @property
    def format(self) -> str:
        return f"CDF-{self.layout.version}"


def file_names(ds: Dataset, name: str) -> dict[str, str]:
    """``{file name: group path}`` of the dataset ``name``: its root, and each sub-group holding
    arrays or attributes (a file of global attributes alone, as netCDF-C writes a dataset that
    has nothing else). None for a dataset without any array."""
    if not any(g.variables for g in ds.root.walk()):
        return {}
    out = {f"{name}.nc": "/"}
    for g in ds.root.walk():
        if g is not ds.root and (g.variables or g.attributes):
            out[f"{name}.{'.'.join(g.path.strip('/').split('/'))}.nc"] = g.path
    return out


def _join(gpath: str, name: str) -> str:
    return f"{gpath.rstrip('/')}/{name}"


class _Builder:
    def __init__(self, ds: Dataset, group: Group, prefix: str, encodings: dict[str, str], facts: dict[str, dict]):
        self.ds, self.group, self.prefix, self.encodings, self.facts = ds, group, prefix, encodings, facts
        self.left_out: list[str] = []
        #: dimension key (FQN, or ``string:<n>``) -> Dim, in file order
        self.dims: dict[str, Dim] = {}

    def leave_out(self, what: str, why: str) -> None:
        self.left_out.append(f"{what}: {why}")

    def dim(self, key: str, name: str, size: int) -> int:
        if key not in self.dims:
            taken = {d.name for d in self.dims.values()}
            shown, n = name, 0
            while shown in taken:
                n += 1
                shown = f"{name}_{n}"
            self.dims[key] = Dim(shown, size)
        return list(self.dims).index(key)

    def record_dim(self, usable: list[tuple[Variable, list[Dimension]]]) -> Dimension | None:
        """The first unlimited dimension that every variable using it has as its first axis only;
        then, of pure Zarr, one of length 0 (netCDF-C 4.10 takes it as unlimited)."""
        seen: list[Dimension] = []
        for zero in (False, True) if self.ds.flavor in ("zarr-v2", "zarr-v3") else (False,):
            for _, dims in usable:
                seen.extend(d for d in dims if d not in seen and (d.size == 0 if zero else d.unlimited))
        for cand in seen:
            if all(cand not in dims[1:] for _, dims in usable):
                return cand
        return None

    def unicode(self, var: Variable) -> bool:
        """numpy's fixed-width unicode (xarray's strings; Zarr v3 ``fixed_length_utf32``)?"""
        v2 = v3_to_v2(var) if self.ds.flavor == "zarr-v3" else var.dtype
        return var.nctype is None and bool(_UNICODE.match(v2 if isinstance(v2, str) else v2.dtype))

    def maxlen(self, var: Variable) -> int | None:
        """The longest of ``var``'s variable-length strings (UTF-8 bytes), if its chunks were scanned."""
        path = _join(self.group.path, var.name).lstrip("/")
        return (self.facts.get(path) or {}).get("maxlen")

    def codecs(self, var: Variable) -> tuple[V2Array | None, str | None]:
        if self.ds.flavor == "zarr-v3":
            v2 = v3_to_v2(var)
            if isinstance(v2, str):
                return None, v2
        else:
            v2 = V2Array(var.dtype, var.order, var.compressor, var.filters or None, var.dimension_separator)
        if v2.order not in ("C", "F"):
            return None, f"order {v2.order!r}"
        why = Codecs(v2.compressor, tuple(v2.filters or ())).check()
        return v2, why

    def build(self) -> GroupFile:
        g = self.group
        usable = self.usable()
        rec = self.record_dim(usable)
        for d in g.dims:  # the group's own dimensions first, in their order
            if d.size > 0 or d is rec:
                self.dim(_join(g.path, d.name), d.name, d.size)
        vars: list[Var] = []
        values: list[Values] = []
        for var, dims in usable:
            got = self.variable(var, dims, rec)
            if got is not None:
                vars.append(got[0])
                values.append(got[1])
        dims_list = list(self.dims.values())
        if rec is not None:
            self.records(rec, dims_list, vars, values)
        lay = layout(dims_list, self.global_attrs(), vars)
        return GroupFile(g.path, lay, values, self.left_out)

    def usable(self) -> list[tuple[Variable, list[Dimension]]]:
        """The group's variables a classic file can hold by name, type and dimensions, each with
        its dimensions (the others left out, with the reason)."""
        usable: list[tuple[Variable, list[Dimension]]] = []
        for var in self.group.variables:
            what = _join(self.group.path, var.name)
            if not valid_name(var.name):
                self.leave_out(what, "a name the classic formats refuse")
                continue
            if var.nctype is None and not self.unicode(var):
                self.leave_out(what, f"type {var.dtype} has no netCDF type")
                continue
            refs = [] if var.scalar or not var.shape else var.dimrefs
            dims = [self.ds.find_dim(ref) for ref in refs]
            if None in dims or len(dims) != (0 if var.scalar or not var.shape else len(var.shape)):
                self.leave_out(what, "its dimensions are not all declared")
                continue
            usable.append((var, dims))  # type: ignore[arg-type]  # None not in dims (checked above)
        return usable

    def variable(self, var: Variable, dims: list[Dimension], rec: Dimension | None) -> tuple[Var, Values] | None:
        """``var`` as a variable of the file, with where its values come from (None: left out)."""
        what = _join(self.group.path, var.name)
        v2 = self.storable(var, dims, rec, what)
        if v2 is None:
            return None
        refs = [r if r.startswith("/") else "/" + r for r in var.dimrefs] if dims else []
        dimids = [self.dim(ref, d.name, d.size) for ref, d in zip(refs, dims)]
        nctype, dtype, stored_dtype, text, width = self.file_type(var, v2)
        if width:
            dimids.append(self.dim(f"string:{width}", f"string{width}", width))
        attrs = self.var_attrs(var, what, nctype, width)
        attrs.extend(implied_attrs(var, attrs, bool(text) or v2.dtype == "|O"))
        return Var(var.name, nctype, dimids, attrs), self.values(var, v2, what, dtype, stored_dtype, text, width)

    def storable(self, var: Variable, dims: list[Dimension], rec: Dimension | None, what: str) -> V2Array | None:
        """``var``'s Zarr v2 form if a classic file can hold its values (else None, left out)."""
        zero = [d.name for d in dims if d.size == 0 and d is not rec]
        if zero:
            self.leave_out(what, f"dimension {zero[0]} has length 0 and is not the record dimension")
            return None
        v2, why = self.codecs(var)
        if why is not None or v2 is None:
            self.leave_out(what, why or "no codecs")
            return None
        if var.nctype == "string" and not _FIXED_STRING.match(v2.dtype) and (
                v2.dtype != "|O" or self.maxlen(var) is None):
            self.leave_out(what, f"variable-length strings ({var.dtype}) whose longest value is not known "
                                 "(their chunks not scanned: sharded)")
            return None
        return v2

    def file_type(self, var: Variable, v2: V2Array) -> tuple[str, str, str, str, int]:
        """(the file's type, its numpy dtype, the stored dtype, numpy's unicode dtype of
        xarray's strings or "", the width of a string's char dimension or 0)."""
        if self.unicode(var):  # numpy's fixed-width unicode (xarray's strings): UTF-8, 4 bytes a character
            width = 4 * int(_UNICODE.match(v2.dtype).group(1))  # type: ignore[union-attr]  # unicode(var): the dtype matches
            return "char", f"|S{width}", v2.dtype, "<" + v2.dtype.lstrip("<>|"), width
        if var.nctype == "char":
            return "char", "|S1", "|S1", "", 0
        if var.nctype == "string" and v2.dtype == "|O":  # as wide as the longest, UTF-8 (xarray's vlen str)
            width = max(self.maxlen(var) or 0, 1)
            return "char", f"|S{width}", "|O", "", width
        if var.nctype == "string":
            width = int(_FIXED_STRING.match(v2.dtype).group(1))  # type: ignore[union-attr]  # a fixed string's dtype matches
            return "char", f"|S{width}", f"|S{width}", "", width
        return var.nctype, TYPES[var.nctype][1], v2.dtype, "", 0  # type: ignore[index,return-value]  # a variable read has its nctype

    def values(self, var: Variable, v2: V2Array, what: str, dtype: str, stored_dtype: str, text: str,
               width: int) -> Values:
        """Where ``var``'s values come from: its chunks' keys, how each is decoded, its fill."""
        stored = tuple(var.shape)
        chunks = tuple(v2.chunks or var.chunks) if var.shape else ()  # sharded: the innermost chunks
        codecs = Codecs(v2.compressor, tuple(v2.filters or ()))
        recode = Recode(stored_dtype, chunks, v2.order, codecs, text or dtype, chunks,
                        text_width=width if stored_dtype == "|O" else None)
        # a sharded array's chunk keys name its shards
        sep, cprefix = (var.dimension_separator if v2.sharding is not None else v2.separator), ""
        if self.ds.flavor == "zarr-v3":
            default = self.encodings.get(what, "default") == "default"
            cprefix = ("c" if not stored else f"c{sep}") if default else ""
        array = "/".join(p for p in (self.prefix, self.group.path.strip("/"), var.name) if p)
        fill = missing_fill(var, self.ds.flavor, dtype, text, width)
        return Values(array, stored, stored, chunks, dtype, fill, recode, sep, cprefix, text, v2.sharding)

    def global_attrs(self) -> list[Attr]:
        return [got for a in self.group.attributes if (got := self.attr(self.group.path, a)) is not None]

    def attr(self, owner: str, a: Attribute) -> Attr | None:
        """``a`` as an attribute of the file (None: left out, with the reason)."""
        got = classic_attr(a)
        if isinstance(got, str):
            self.leave_out(f"{owner}:{a.name}", got)
            return None
        return got

    def records(self, rec: Dimension, dims_list: list[Dim], vars: list[Var], values: list[Values]) -> None:
        """Mark the record dimension; its length (and the record variables' shape) is the
        longest record variable's."""
        for key, d in self.dims.items():
            if self.ds.find_dim(key) is rec:
                d.is_record = True
        lengths = [val.stored[0] for var, val in zip(vars, values) if var.dimids and dims_list[var.dimids[0]].is_record]
        numrecs = max([rec.size, *lengths])
        for d in dims_list:
            if d.is_record:
                d.size = numrecs
        for var, val in zip(vars, values):
            if var.dimids and dims_list[var.dimids[0]].is_record:
                val.shape = (numrecs, *val.stored[1:])

    def var_attrs(self, var: Variable, what: str, nctype: str, width: int) -> list[Attr]:
        attrs = cf_attributes(var, self.ds.flavor)
        out = [got for a in attrs if a.name != "_FillValue" and (got := self.attr(what, a)) is not None]
        if (fill := self.fill_attr(var, attrs, what, nctype, width)) is not None:
            out.append(fill)
        return out

    def fill_attr(self, var: Variable, attrs: list[Attribute], what: str, nctype: str, width: int) -> Attr | None:
        """The variable's mask as its _FillValue in the file's type (None: no mask, or left out)."""
        stored = next((a for a in var.attributes if a.name == "_FillValue"), None)
        if width and (chars := chars_mask(var, self.ds.flavor)) is not None:
            if isinstance(chars, str):
                self.leave_out(f"{what}:_FillValue", chars)
            return None if isinstance(chars, str) else chars
        if nctype == "char" or width:
            return self.attr(what, stored) if stored is not None and stored.nctype == "char" and not width \
                else char_fill(var, nctype, width)
        got = next((a for a in attrs if a.name == "_FillValue"), None)
        if got is None:
            if stored is not None:
                self.leave_out(f"{what}:_FillValue", f"a {stored.nctype} _FillValue on a {var.nctype} variable")
            return None
        return self.attr(what, Attribute("_FillValue", nctype, got.value))


def group_file(ds: Dataset, group: str, prefix: str = "", encodings: dict[str, str] | None = None,
               facts: dict[str, dict] | None = None) -> GroupFile:
    """The classic file of ``group`` (a path: ``/``, ``/g``) of ``ds``, stored under ``prefix``.
    ``encodings``: Zarr v3 arrays' ``chunk_key_encoding`` names, by path (``/g/v``; default "default");
    ``facts``: what scans of arrays' chunks found, by path (``g/v``; :mod:`nczfs.nczarr.chunks.chunkfacts`):
    the width of variable-length strings."""
    g = ds.group(group)
    if g is None:
        raise KeyError(group)
    return _Builder(ds, g, prefix, encodings or {}, facts or {}).build()


def v3_encodings(ds: Dataset, get: Callable[[str], bytes | None]) -> dict[str, str]:
    """The ``chunk_key_encoding`` name of each Zarr v3 array (by path ``/g/v``), from its
    ``zarr.json`` (``get`` takes a key relative to the dataset root)."""
    out: dict[str, str] = {}
    if ds.flavor != "zarr-v3":
        return out
    for g in ds.root.walk():
        for v in g.variables:
            path = _join(g.path, v.name)
            raw = get(f"{path.strip('/')}/zarr.json")
            try:
                node = jsontext.loads(raw) if raw is not None else {}
            except ValueError:
                node = {}
            enc = node.get("chunk_key_encoding") if isinstance(node, dict) else None
            out[path] = str(enc.get("name", "default")) if isinstance(enc, dict) else "default"
    return out
