"""Attributes as a netCDF classic file holds them, and the ones a file adds for its readers."""

from __future__ import annotations

from typing import Any, Protocol, Sequence

import numpy as np

from nczfs.nczarr.chunks.v2form import TIME_UNITS
from nczfs.nczarr.metadata.model import Attribute, Variable
from nczfs.nczarr.ncfile.classicheader import TYPES, Attr, valid_name


def _encode_attr(nctype: str, value: Any) -> bytes:
    if nctype == "char":
        return value.encode("utf-8", "replace")
    return np.asarray(value, dtype=TYPES[nctype][1]).tobytes()


def classic_attr(a: Attribute) -> Attr | str:
    """The classic form of a model attribute, or why it has none."""
    if not valid_name(a.name):
        return "a name the classic formats refuse"
    nctype, value = a.nctype, a.value
    if nctype == "string":
        if len(value) != 1:
            return f"a string attribute of {len(value)} values (the classic formats have text only)"
        nctype, value = "char", value[0]
    if nctype not in TYPES:
        return f"type {nctype} has no classic form"
    try:
        with np.errstate(over="raise", invalid="raise"):
            data = _encode_attr(nctype, value)
    except (OverflowError, ValueError, FloatingPointError, TypeError) as exc:
        return f"values {value!r} do not fit {nctype} ({exc})"
    return Attr(a.name, nctype, data)


class Named(Protocol):
    """An attribute of either file form (a classic file's :class:`Attr`, a netCDF-4 file's)."""

    @property
    def name(self) -> str: ...


def implied_attrs(var: Variable, attrs: Sequence[Named], utf8: bool) -> list[Attr]:
    """What readers need that the array's attributes do not say: the units of Zarr v3 times,
    the _Encoding of xarray's strings (``utf8``: chars holding UTF-8), that bytes are bool
    (xarray's netCDF convention, ``dtype = "bool"``; CF's flag_values and flag_meanings)."""
    out = []
    have = {a.name for a in attrs}
    if var.is_bool:
        out += [Attr(n, t, d) for n, t, d in (("dtype", "char", b"bool"), ("flag_values", "byte", b"\x00\x01"),
                                              ("flag_meanings", "char", b"false true")) if n not in have]
    if var.dtype in ("numpy.datetime64", "numpy.timedelta64") and not any(a.name == "units" for a in attrs):
        unit = TIME_UNITS.get(str(var.dtype_config.get("unit")), "")
        since = " since 1970-01-01" if var.dtype == "numpy.datetime64" else ""
        out.append(Attr("units", "char", f"{unit}{since}".encode()))  # CF: the int64 counts' meaning
    if utf8 and "_Encoding" not in have:
        out.append(Attr("_Encoding", "char", b"utf-8"))  # xarray decodes the chars to str
    return out
