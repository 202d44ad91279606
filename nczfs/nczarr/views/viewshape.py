"""The dataset model as a view's reader is to see it, before its objects are written (``emit``):
arrays the view cannot show taken out, dimensions, scalars and strings placed as that reader
would place them, and how chunks shown otherwise than stored are laid out (:class:`Layouts`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from nczfs.nczarr.chunks.recode import Recode
from nczfs.nczarr.chunks.sharding import Sharding
from nczfs.nczarr.chunks.v2form import v2_form, v3_to_v2
from nczfs.nczarr.metadata.model import Dataset, Dimension, Variable
from nczfs.nczarr.views.viewarrays import hide_reason


@dataclass
class Layouts:
    """How a view shows the chunks of arrays it does not show as stored, by array path (``emit``
    fills it): recoded; sharded (shown by their innermost chunks: the sharding, the array's shape
    and its chunk keys' separator); strings shown as chars along one more axis, of one chunk (the
    stored chunk keys' separator)."""

    recodes: dict[str, Recode] = field(default_factory=dict)
    shardings: dict[str, tuple[Sharding, list[int], str]] = field(default_factory=dict)
    char_axis: dict[str, str] = field(default_factory=dict)


def prune(ds: Dataset, view: str, reader: bool, transcode: str, facts: dict[str, dict]) -> list[tuple[str, str]]:
    """Remove the arrays ``view`` cannot show from the model; return (path, reason) for each."""
    hidden = []
    from_v3 = ds.flavor == "zarr-v3"
    for g in ds.root.walk():
        keep = []
        for v in g.variables:
            if reader and view != "xarray" and unicode_strings(v, from_v3):
                v.nctype = "string"  # numpy's fixed-width unicode (xarray's str): shown as UTF-8 strings
            reason = hide_reason(v, view, from_v3, reader, transcode, facts.get(array_path(g.path, v.name)))
            if reason is None:
                keep.append(v)
            else:
                hidden.append((array_path(g.path, v.name), reason))
        g.variables = keep
        if reader and view == "netcdf-4.9":
            g.dims = [d for d in g.dims if d.size > 0]
    return hidden


def unicode_strings(var: Variable, from_v3: bool) -> bool:
    """Is ``var`` numpy's fixed-width unicode (xarray's str), which netCDF readers are shown as strings?"""
    if var.nctype is not None or (from_v3 and isinstance(v3_to_v2(var), str)):
        return False
    return v2_form(var, from_v3).dtype[1:2] == "U"


def strings_as_chars(ds: Dataset, from_v3: bool, facts: dict[str, dict], hidden: list[tuple[str, str]],
                      layouts: Layouts) -> None:
    """netCDF-C 4.9.0 has no NC_STRING in NCZarr: a string array is shown as a char array along one
    more dimension, ``<name>_strlen``, as wide as its strings (variable-length: the longest), of
    one chunk: chunk ``i.j.0`` of the view is the stored chunk ``i.j``."""
    for g in ds.root.walk():
        keep = []
        for v in g.variables:
            if v.nctype == "string":
                path = array_path(g.path, v.name)
                v2 = v2_form(v, from_v3)
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


def scalars_on_a_dimension(ds: Dataset, hidden: list[tuple[str, str]]) -> None:
    """netCDF-C 4.9.0 crashes on NCZarr scalars (even its own): it is shown each as an array of
    one element along a root dimension ``_scalar_`` of length 1 (what pure Zarr readers see)."""
    if ds.root.dim("_scalar_") not in (None, Dimension("_scalar_", 1)):
        for g in ds.root.walk():
            hidden.extend((array_path(g.path, v.name), "scalar, and a dimension _scalar_ of another length exists")
                          for v in g.variables if v.scalar)
            g.variables = [v for v in g.variables if not v.scalar]
        return
    for g in ds.root.walk():
        for v in g.variables:
            if v.scalar:
                v.scalar, v.shape, v.chunks, v.dimrefs = False, [1], [1], ["/_scalar_"]
                if ds.root.dim("_scalar_") is None:
                    ds.root.dims.append(Dimension("_scalar_", 1))


def pure_zarr_dims_as_read(ds: Dataset, view: str) -> None:
    """Dimensions nczfs made for pure Zarr arrays, where the view's reader would make them reading
    the store itself: netCDF-C 4.9.0 makes them in the root group (where netCDF datasets usually
    declare them), 4.10.1 in the array's group, and takes a length of 0 as unlimited."""
    if ds.flavor not in ("zarr-v2", "zarr-v3"):
        return
    if view == "netcdf-4.10":
        for g in ds.root.walk():
            for d in g.dims:
                d.unlimited = d.unlimited or d.size == 0
    if view == "netcdf-4.9":
        _dims_to_root(ds)


def _dims_to_root(ds: Dataset) -> None:
    """Every sub-group's dimension made a root dimension (what netCDF-C 4.9.0 does)."""
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


def array_path(gpath: str, name: str) -> str:
    return f"{gpath.strip('/')}/{name}".lstrip("/")
