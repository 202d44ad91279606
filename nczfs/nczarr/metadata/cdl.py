"""The dataset model as a CDL header, the way ``ncdump -h`` prints it.

Like netCDF-C, ``_FillValue`` is shown only where it is stored as an attribute (a Zarr
``fill_value`` alone is not shown).
"""

from __future__ import annotations

import math

import numpy as np

from nczfs.nczarr.metadata.model import Attribute, Dataset, Group

_SUFFIX = {"byte": "b", "ubyte": "UB", "short": "s", "ushort": "US", "int": "", "uint": "U",
           "int64": "LL", "uint64": "ULL", "float": "f", "double": ""}
_ESCAPES = {'"': '\\"', "'": "\\'", "\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r", "\x00": "\\000"}


#: characters ncdump escapes with a backslash in names (ncdump/utils.c escaped_name)
_NAME_SPECIAL = set(" !\"#$&'()*,:;<=>?[]\\^`{|}~")


def cdl_name(name: str) -> str:
    """A name as ``ncdump`` writes it, so that ``ncgen`` reads it back: a leading digit and the
    special characters escaped with a backslash, control characters as ``\\%xx``."""
    out = ["\\"] if name[:1].isdigit() and name[:1].isascii() else []
    for c in name:
        if c.isascii() and (ord(c) < 0x20 or ord(c) == 0x7F):
            out.append(f"\\%{ord(c):02x}")
        elif c in _NAME_SPECIAL:
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def _char(c: str) -> str:
    if c in _ESCAPES:
        return _ESCAPES[c]
    if ord(c) < 0x20 or ord(c) == 0x7F:
        return f"\\{ord(c):03o}"
    return c  # as ncdump, a byte that is not UTF-8 is printed as it is (a surrogate escape here)


def quote(text: str) -> str:
    return '"' + "".join(_char(c) for c in text) + '"'


def number(nctype: str, v: float | int) -> str:
    suffix = _SUFFIX[nctype]
    if nctype in ("float", "double"):
        if math.isnan(v):
            return "NaN" + suffix
        if math.isinf(v):
            return ("Infinity" if v > 0 else "-Infinity") + suffix
        text = str(np.float32(v)) if nctype == "float" else repr(float(v))
        if text.endswith(".0"):
            text = text[:-1]
        elif "." not in text and "e" not in text:
            text += "."
        return text + suffix
    return f"{int(v)}{suffix}"


def attr_value(attr: Attribute) -> str:
    if attr.nctype == "char":
        return quote(attr.value)
    if attr.nctype == "string":
        return ", ".join(quote(v) for v in attr.value)
    return ", ".join(number(attr.nctype, v) for v in attr.value)


def attr_line(owner: str, attr: Attribute) -> str:
    prefix = "string " if attr.nctype == "string" else ""
    return f"{prefix}{owner}:{cdl_name(attr.name)} = {attr_value(attr)} ;"


def _dim_name(ds: Dataset, group: Group, ref: str) -> str:
    """The short name if it resolves to ``ref`` from ``group`` (innermost first), else the FQN."""
    name = ref.rpartition("/")[2]
    path = group.path
    while True:
        g = ds.group(path)
        if g is not None and g.dim(name) is not None:
            found = f"{path.rstrip('/')}/{name}"
            return cdl_name(name) if found == ref else "/".join(cdl_name(p) for p in ref.split("/"))
        if path == "/":
            return "/".join(cdl_name(p) for p in ref.split("/"))
        path = path.rpartition("/")[0] or "/"


def _group_lines(ds: Dataset, group: Group, depth: int) -> list[str]:
    ind = "  " * depth
    out: list[str] = []
    if group.dims:
        out.append(f"{ind}dimensions:")
        for d in group.dims:
            size = f"UNLIMITED ; // ({d.size} currently)" if d.unlimited else f"{d.size} ;"
            out.append(f"{ind}\t{cdl_name(d.name)} = {size}")
    if group.variables:
        out.append(f"{ind}variables:")
        for v in group.variables:
            dims = ", ".join(_dim_name(ds, group, r) for r in v.dimrefs)
            decl = f"{cdl_name(v.name)}({dims})" if dims else cdl_name(v.name)
            if v.nctype is None:
                out.append(f"{ind}\t// {v.name}: dtype {v.dtype} has no netCDF type")
                continue
            out.append(f"{ind}\t{v.nctype} {decl} ;")
            for a in v.attributes:
                out.append(f"{ind}\t\t{attr_line(cdl_name(v.name), a)}")
    if group.attributes:
        out.append("")
        out.append(f"{ind}// {'global' if depth == 0 else 'group'} attributes:")
        for a in group.attributes:
            out.append(f"{ind}\t\t{attr_line('', a)}")
    for sub in group.groups:
        out.append("")
        out.append(f"{ind}group: {cdl_name(sub.name)} {{")
        out.extend(_group_lines(ds, sub, depth + 1))
        out.append(f"{ind}  }} // group {cdl_name(sub.name)}")
    return out


def to_cdl(ds: Dataset, name: str) -> str:
    """``netcdf NAME { ... }`` as ``ncdump -h`` prints it."""
    return "\n".join([f"netcdf {cdl_name(name)} {{", *_group_lines(ds, ds.root, 0), "}"]) + "\n"
