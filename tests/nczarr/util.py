"""Helpers for NCZarr-layer tests: corpus datasets as directories, models as plain summaries."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from nczfs.nczarr.metadata.model import Dataset
from nczfs.nczarr.metadata.read import DictObjects, StoreObjects, read_dataset

HANDMADE_NCZARR = ["v1", "v1dev", "v2uc", "v2lc", "v2lc_allzattrs", "v2za", "v2za_min"]

_NP_TO_NC = {"i1": "byte", "u1": "ubyte", "i2": "short", "u2": "ushort", "i4": "int", "u4": "uint",
             "i8": "int64", "u8": "uint64", "f4": "float", "f8": "double", "S1": "char"}


def unzip(zip_path: Path, dest: Path) -> Path:
    """Extract a corpus zip; return the dataset directory (the first entry's top folder)."""
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(dest)
        top = z.namelist()[0].split("/")[0]
    return dest / top if (dest / top).is_dir() else dest


def _nan_safe(value):
    """NaN as a string, so that summaries with NaN attributes compare equal."""
    if isinstance(value, list):
        return [_nan_safe(v) for v in value]
    return "NaN" if isinstance(value, float) and value != value else value


def summary(ds: Dataset) -> dict:
    """{group path: {dims, vars: {name: (type, dims)}, attrs: {owner: {name: (type, value)}}}}."""
    out = {}
    for g in ds.root.walk():
        attrs = {"": {a.name: (a.nctype, _nan_safe(a.value)) for a in g.attributes}}
        for v in g.variables:
            attrs[v.name] = {a.name: (a.nctype, _nan_safe(a.value)) for a in v.attributes}
        out[g.path] = {
            "dims": {d.name: d.size for d in g.dims},
            "vars": {v.name: (v.nctype, [r for r in v.dimrefs]) for v in g.variables},
            "attrs": {k: v for k, v in attrs.items() if v},
        }
    return out


def read_objects(objects: dict[str, object]) -> Dataset:
    """Read a dataset given as {key: JSON value or bytes}."""
    raw = {k: v if isinstance(v, bytes) else json.dumps(v).encode() for k, v in objects.items()}
    return read_dataset(DictObjects(raw))


def netcdf4_summary(path: Path) -> dict:
    """The same summary, from the netCDF4 wheel (netCDF-C 4.10.1) reading the store."""
    import netCDF4

    out = {}
    with netCDF4.Dataset(f"file://{path}#mode=nczarr,file") as nc:
        def walk(g, gpath):
            attrs = {"": {n: _nc_attr(g.getncattr(n)) for n in g.ncattrs()}}
            vars_ = {}
            for name, v in g.variables.items():
                vars_[name] = (_NP_TO_NC[v.dtype.str[1:]] if v.dtype != str else "string",
                               [_dim_fqn(v, d) for d in v.get_dims()])
                attrs[name] = {n: _nc_attr(v.getncattr(n)) for n in v.ncattrs()}
            out[gpath] = {"dims": {n: len(d) for n, d in g.dimensions.items()}, "vars": vars_,
                          "attrs": {k: v for k, v in attrs.items() if v}}
            for name, sub in g.groups.items():
                walk(sub, f"{gpath.rstrip('/')}/{name}")
        walk(nc, "/")
    return out


def _dim_fqn(v, d) -> str:
    grp = d.group()
    path = grp.path if grp.path != "/" else ""
    return f"{path}/{d.name}"


def _nc_attr(value):
    if isinstance(value, str):
        return ("char", value)
    arr = np.atleast_1d(value)
    return (_NP_TO_NC[arr.dtype.str[1:]], _nan_safe(arr.tolist()))


class Below(StoreObjects):
    """The reader's objects of the dataset in folder ``prefix`` of a store."""

    def __init__(self, store, prefix):
        super().__init__(store)
        self.prefix = prefix

    def get(self, key):
        return super().get(f"{self.prefix}/{key}")

    def children(self, prefix):
        return super().children(f"{self.prefix}/{prefix}" if prefix else self.prefix)


def chunk_values(data: bytes, zarray: dict) -> list:
    """The elements of a Zarr v2 chunk ``data`` of the array whose ``.zarray`` is ``zarray``."""
    import numcodecs

    for c in [zarray["compressor"], *reversed(zarray.get("filters") or [])]:
        if c:
            data = numcodecs.get_codec(c).decode(data)
    return np.frombuffer(bytes(data), dtype=zarray["dtype"]).tolist()
