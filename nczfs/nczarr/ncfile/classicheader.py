"""The netCDF classic file formats: the layout and header of a file from its definitions.

A classic file is a header followed by each variable's values, big-endian, in C order: first
the fixed-size variables one after another, then the records, each holding one slice of every
record variable (those whose first dimension is the record dimension). Three versions:

* CDF-1 (``CDF\\x01``, "classic"): 32-bit offsets (below 2 GiB), the six original types;
* CDF-2 (``CDF\\x02``, "64-bit offset"): 64-bit offsets;
* CDF-5 (``CDF\\x05``, "64-bit data"): 64-bit counts and sizes too, and the unsigned and 64-bit
  integer types.

:func:`layout` picks the oldest version that holds the definitions and computes every
variable's offset exactly as netCDF-C does for a file it writes (``NC_begins``: 4-byte
alignment, no free space; a lone record variable is not padded), so that the header is the one
netCDF-C would write for the same definitions. Pure computation: no I/O.
"""

from __future__ import annotations

import math
import struct
import unicodedata
from dataclasses import dataclass, field

import numpy as np

#: netCDF type name -> (nc_type code, numpy big-endian dtype)
TYPES: dict[str, tuple[int, str]] = {
    "byte": (1, ">i1"), "char": (2, "S1"), "short": (3, ">i2"), "int": (4, ">i4"), "float": (5, ">f4"),
    "double": (6, ">f8"), "ubyte": (7, ">u1"), "ushort": (8, ">u2"), "uint": (9, ">u4"),
    "int64": (10, ">i8"), "uint64": (11, ">u8"),
}
#: the types only CDF-5 has
CDF5_TYPES = frozenset({"ubyte", "ushort", "uint", "int64", "uint64"})
NC_DIMENSION, NC_VARIABLE, NC_ATTRIBUTE = 10, 11, 12
#: largest offset CDF-1 holds, largest count CDF-1/2 hold, largest variable size (vsize) they hold
MAX_OFFSET_1 = 2**31 - 1
MAX_COUNT_12 = 2**31 - 1
MAX_VSIZE_12 = 2**32 - 4


def itemsize(nctype: str) -> int:
    return np.dtype(TYPES[nctype][1]).itemsize


def _pad4(n: int) -> int:
    return (n + 3) & ~3


def valid_name(name: str) -> bool:
    """A name netCDF-C accepts in a classic file (``NC_check_name``): UTF-8 in NFC, starting with
    a letter, digit, ``_`` or a non-ASCII character, no ``/``, no control character, no trailing
    space."""
    if not name or len(name.encode("utf-8", "surrogatepass")) > 256:
        return False
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    if not unicodedata.is_normalized("NFC", name):
        return False
    first = name[0]
    if first.isascii() and not (first.isalnum() or first == "_"):
        return False
    if any(c == "/" or ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return False
    return not name[-1].isspace()


@dataclass
class Attr:
    name: str
    nctype: str
    #: the values, big-endian (char: the bytes of the text)
    data: bytes

    @property
    def nelems(self) -> int:
        return len(self.data) // itemsize(self.nctype)


@dataclass
class Dim:
    name: str
    #: the length (the record dimension: the number of records)
    size: int
    is_record: bool = False


@dataclass
class Var:
    name: str
    nctype: str
    #: indexes into the file's dimensions (the record dimension, if used, first)
    dimids: list[int]
    attrs: list[Attr] = field(default_factory=list)
    #: computed by :func:`layout`
    vsize: int = 0
    begin: int = 0
    is_record: bool = False
    #: the variable's shape in the file (record variables: with the number of records first)
    shape: tuple[int, ...] = ()

    @property
    def slice_bytes(self) -> int:
        """Bytes of the whole variable (fixed) or of one record's slice (record variable)."""
        dims = self.shape[1:] if self.is_record else self.shape
        return math.prod(dims) * itemsize(self.nctype)


@dataclass
class Layout:
    #: 1, 2 or 5
    version: int
    dims: list[Dim]
    attrs: list[Attr]
    vars: list[Var]
    numrecs: int
    header: bytes
    #: where the records begin, and the bytes of one record
    rec_begin: int
    recsize: int
    #: the file's size in bytes
    size: int

    @property
    def fixed(self) -> list[Var]:
        return [v for v in self.vars if not v.is_record]

    @property
    def records(self) -> list[Var]:
        return [v for v in self.vars if v.is_record]


class Encoder:
    """The header's fields in one version's widths."""

    def __init__(self, version: int):
        self.version = version
        self.parts: list[bytes] = []

    def int32(self, n: int) -> None:
        self.parts.append(struct.pack(">i", n))

    def count(self, n: int) -> None:  # NON_NEG: 64-bit in CDF-5
        self.parts.append(struct.pack(">q" if self.version == 5 else ">i", n))

    def vsize(self, n: int) -> None:  # vsize is unsigned 32-bit in CDF-1/2
        self.parts.append(struct.pack(">q" if self.version == 5 else ">I", n))

    def offset(self, n: int) -> None:
        self.parts.append(struct.pack(">i" if self.version == 1 else ">q", n))

    def padded(self, data: bytes) -> None:
        self.parts.append(data + bytes(_pad4(len(data)) - len(data)))

    def name(self, name: str) -> None:
        raw = name.encode("utf-8")
        self.count(len(raw))
        self.padded(raw)

    def listing(self, tag: int, n: int) -> None:
        if n:
            self.int32(tag)
            self.count(n)
        else:  # ABSENT
            self.int32(0)
            self.count(0)

    def attrs(self, attrs: list[Attr]) -> None:
        self.listing(NC_ATTRIBUTE, len(attrs))
        for a in attrs:
            self.name(a.name)
            self.int32(TYPES[a.nctype][0])
            self.count(a.nelems)
            self.padded(a.data)

    def bytes(self) -> bytes:
        return b"".join(self.parts)


def _header(version: int, dims: list[Dim], attrs: list[Attr], vars: list[Var], numrecs: int) -> bytes:
    e = Encoder(version)
    e.parts.append(b"CDF" + bytes([version]))
    e.count(numrecs)
    e.listing(NC_DIMENSION, len(dims))
    for d in dims:
        e.name(d.name)
        e.count(0 if d.is_record else d.size)
    e.attrs(attrs)
    e.listing(NC_VARIABLE, len(vars))
    for v in vars:
        e.name(v.name)
        e.count(len(v.dimids))
        for i in v.dimids:
            e.count(i)
        e.attrs(v.attrs)
        e.int32(TYPES[v.nctype][0])
        e.vsize(v.vsize)
        e.offset(v.begin)
    return e.bytes()


def _counts_fit(version: int, dims: list[Dim], vars: list[Var], numrecs: int) -> bool:
    if version == 5:
        return True
    return numrecs <= MAX_COUNT_12 and all(d.size <= MAX_COUNT_12 for d in dims) and \
        all(v.vsize <= MAX_VSIZE_12 for v in vars)


def _offsets_fit(version: int, vars: list[Var]) -> bool:
    return version != 1 or all(v.begin <= MAX_OFFSET_1 for v in vars)


def _needs_cdf5(attrs: list[Attr], vars: list[Var]) -> bool:
    return any(a.nctype in CDF5_TYPES for a in attrs) or any(
        v.nctype in CDF5_TYPES or any(a.nctype in CDF5_TYPES for a in v.attrs) for v in vars)


def _place(vars: list[Var], offset: int) -> tuple[int, int]:
    """Give each variable its begin: the fixed ones from ``offset`` on, then the record ones
    within a record; (where records begin, the size of a record)."""
    for v in vars:
        if not v.is_record:
            v.begin = offset
            offset += v.vsize
    rec_begin = offset
    recsize = 0
    for v in vars:
        if v.is_record:
            v.begin = rec_begin + recsize
            recsize += v.vsize
    records = [v for v in vars if v.is_record]
    if records and recsize == records[-1].vsize:  # one record variable: its records are not padded
        recsize = records[-1].slice_bytes
    return rec_begin, recsize


def layout(dims: list[Dim], attrs: list[Attr], vars: list[Var], oldest: int = 1) -> Layout:
    """The file holding ``dims``, global ``attrs`` and ``vars`` in the oldest version (from
    ``oldest`` on) that can.

    A variable is a record variable if its first dimension is the record dimension (at most one
    dimension is). ``vars`` are changed in place (vsize, begin, shape, is_record)."""
    numrecs = next((d.size for d in dims if d.is_record), 0)
    for v in vars:
        v.is_record = bool(v.dimids) and dims[v.dimids[0]].is_record
        v.shape = tuple(dims[i].size for i in v.dimids)
        v.vsize = _pad4(v.slice_bytes)
    for version in [v for v in ((5,) if _needs_cdf5(attrs, vars) else (1, 2, 5)) if v >= oldest]:
        if not _counts_fit(version, dims, vars, numrecs):
            continue
        header = _header(version, dims, attrs, vars, numrecs)  # the offsets' values do not change its length
        rec_begin, recsize = _place(vars, _pad4(len(header)))
        if _offsets_fit(version, vars):
            header = _header(version, dims, attrs, vars, numrecs)
            return Layout(version, dims, attrs, vars, numrecs, header, rec_begin, recsize,
                          rec_begin + numrecs * recsize)
    raise AssertionError("CDF-5 holds every definition")
