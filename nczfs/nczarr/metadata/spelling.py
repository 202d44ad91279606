"""How NCZarr and Zarr metadata spell things, read as leniently as netCDF-C reads them.

NCZarr keys in any letter case and under every alias netCDF-C has written (``dims|dimensions``,
``dimrefs|dimension_references`` ...), both forms of a group's dimension list, and the netCDF
type of a Zarr v2 dtype or of an ``_nczarr_attr.types`` entry. Shared by the reader
(:mod:`.read`) and the checks (:mod:`.validate`); it imports neither.
"""

from __future__ import annotations

import re
from typing import Any

from nczfs.nczarr.metadata.model import NC_TYPE_CODES

_DTYPE = re.compile(r"^([<>|=]?)([a-zA-Z])(\d+)$")
_INT_TYPES = {("i", 1): "byte", ("u", 1): "ubyte", ("i", 2): "short", ("u", 2): "ushort",
              ("i", 4): "int", ("u", 4): "uint", ("i", 8): "int64", ("u", 8): "uint64",
              ("f", 4): "float", ("f", 8): "double"}


def nczarr_key(name: str, *dicts: dict | None) -> Any:
    """The value of NCZarr key ``name`` (any letter case) from the first dict holding it."""
    for d in dicts:
        if not isinstance(d, dict):
            continue
        for k, v in d.items():
            if k.lower() == name:
                return v
    return None


def alias(d: dict, *names: str) -> Any:
    for n in names:
        for k, v in d.items():
            if k.lower() == n:
                return v
    return None


def nctype_of_dtype(dtype: Any, nczarr: bool) -> tuple[str | None, bool]:
    """(netCDF type or None if none fits, big-endian?) of a Zarr v2 dtype string."""
    if not isinstance(dtype, str):
        return None, False
    m = _DTYPE.match(dtype)
    if not m:
        return None, False
    order, kind, size = m.group(1), m.group(2), int(m.group(3))
    big = order == ">" and size > 1
    if (kind, size) in _INT_TYPES:
        return _INT_TYPES[(kind, size)], big
    if kind == "S":
        # one byte an element: a char (what xarray writes for netCDF char variables; netCDF-C
        # reads pure Zarr S1 as strings of at most one byte)
        return ("char" if size == 1 else "string"), False
    if kind == "U" and size == 1 and nczarr:
        return "char", False  # written by netCDF-C <= 4.9.0
    return None, False


def nctype_of_zarray(zarray: dict, nczarr: bool) -> tuple[str | None, bool]:
    """As :func:`nctype_of_dtype`, and the pure Zarr types netCDF shows in its own: numpy's bool
    (``|b1``) as byte, variable-length UTF-8 strings (``|O`` with the ``vlen-utf8`` filter) as
    string."""
    dtype = zarray.get("dtype")
    if not nczarr and isinstance(dtype, str) and dtype[-2:] == "b1" and dtype[:-2] in ("", "|", "<", ">"):
        return "byte", False
    filters = zarray.get("filters")
    if dtype == "|O" and isinstance(filters, list) and any(isinstance(f, dict) and f.get("id") == "vlen-utf8"
                                                           for f in filters):
        return "string", False
    return nctype_of_dtype(dtype, nczarr)


def attr_type(t: Any) -> str | None:
    """An entry of ``_nczarr_attr.types``: a dtype or (V1) an nc_type code. None if unknown."""
    if isinstance(t, int) or (isinstance(t, str) and t.isdigit()):
        return NC_TYPE_CODES.get(int(t))
    nctype, _ = nctype_of_dtype(t, nczarr=True)
    return nctype


def dim_items(dims: Any) -> list[tuple[str, Any]]:
    if isinstance(dims, dict):
        return list(dims.items())
    if isinstance(dims, list):  # the documented-but-never-written list form
        return [(d["name"], d) for d in dims if isinstance(d, dict) and isinstance(d.get("name"), str)]
    return []


def dim_spec(spec: Any) -> tuple[int | None, bool]:
    if isinstance(spec, dict):
        size, unlimited = spec.get("size"), bool(spec.get("unlimited"))
    else:
        size, unlimited = spec, False
    if isinstance(size, list) and len(size) == 1:
        size = size[0]
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        return None, False
    return size, unlimited
