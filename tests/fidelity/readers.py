"""The three readers of the views' fidelity matrix, each reading a dataset into one plain model.

``ncdump``: Debian's ``ncdump`` (netCDF-C 4.9.0) prints the whole dataset, Debian ``ncgen`` reads
the print back into a netCDF-4 file, which the netCDF4 wheel reads; ``wheel``: the netCDF4 wheel
(netCDF-C 4.10.1); ``xarray``: xarray (zarr-python 3 for stores, netCDF4 for the original).
A model is {group path: {"dims": {name: (length, unlimited)}, "attrs": {name: (type, value)},
"vars": {name: {"type", "dims", "shape", "attrs", "data"}}}}; :func:`diff` lists what differs.
"""

from __future__ import annotations

import math
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from tests.helpers import keyed_differences

READERS = ("ncdump", "wheel", "xarray")
#: the view written for each reader (what it reads through nczfs)
OWN_VIEW = {"ncdump": "netcdf-4.9", "wheel": "netcdf-4.10", "xarray": "xarray"}
#: attributes netCDF libraries add of their own
IGNORED_ATTRS = {"_NCProperties", "_Format", "_SuperblockVersion", "_IsNetcdf4"}


def url(path: Path | str) -> str:
    return f"file://{path}#mode=nczarr,file"


def value(x: Any) -> Any:
    """A value as plain Python: text as str (NULs at the end dropped), numbers as lists."""
    if isinstance(x, (bytes, np.bytes_)):
        x = bytes(x).decode("utf-8", "replace")
    if isinstance(x, str):
        return x.rstrip("\x00")
    a = np.asarray(x)
    if a.dtype.kind in "SUOT":
        return [value(e) for e in a.ravel().tolist()]
    if a.dtype.kind in "Mm":
        a = a.astype("<i8")
    return [float(e) if a.dtype.kind in "fc" else int(e) for e in a.ravel().tolist()]


NC_TYPES = {1: "byte", 2: "char", 3: "short", 4: "int", 5: "float", 6: "double", 7: "ubyte", 8: "ushort",
            9: "uint", 10: "int64", 11: "uint64", 12: "string"}


def _atttype(gid: int, vid: int, name: str) -> str:
    import ctypes

    from tests.fidelity.writers import _netcdf_lib

    t = ctypes.c_int()
    rc = _netcdf_lib().nc_inq_atttype(gid, vid, name.encode(), ctypes.byref(t))
    return NC_TYPES.get(t.value, str(t.value)) if rc == 0 else "?"


def _nc_model(ds: Any) -> dict:
    out: dict = {}

    def walk(g: Any) -> None:
        m = out.setdefault(g.path, {"dims": {}, "attrs": {}, "vars": {}})
        m["dims"] = {n: (len(d), d.isunlimited()) for n, d in g.dimensions.items()}
        for a in g.ncattrs():
            if a not in IGNORED_ATTRS:
                m["attrs"][a] = (_atttype(g._grpid, -1, a), value(g.getncattr(a)))
        for n, v in g.variables.items():
            v.set_auto_maskandscale(False)
            v.set_auto_chartostring(False)
            data = v[...] if all(s > 0 for s in v.shape) else np.zeros(0)
            m["vars"][n] = {"type": str(v.dtype), "dims": list(v.dimensions), "shape": list(v.shape),
                            "attrs": {a: (_atttype(g._grpid, v._varid, a), value(v.getncattr(a))) for a in v.ncattrs()},
                            "data": np.asarray(data)}
        for sub in g.groups.values():
            walk(sub)

    walk(ds)
    return out


def _ncdump(target: str) -> dict:
    import netCDF4

    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run(["ncdump", "-p", "9,17", target], capture_output=True, timeout=300)
        if p.returncode:
            raise RuntimeError(f"ncdump rc={p.returncode}: {p.stderr.decode(errors='replace').strip()[-200:]}")
        (Path(tmp) / "d.cdl").write_bytes(p.stdout)
        p = subprocess.run(["ncgen", "-4", "-o", f"{tmp}/d.nc", f"{tmp}/d.cdl"], capture_output=True, timeout=300)
        if p.returncode:
            raise RuntimeError(f"ncgen could not read the print back: {p.stderr.decode(errors='replace').strip()[-200:]}")
        with netCDF4.Dataset(f"{tmp}/d.nc") as ds:
            return _nc_model(ds)


def _xarray(target: str, engine: str) -> dict:
    import xarray as xr

    out: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        groups = xr.open_groups(target, engine=engine, mask_and_scale=False, decode_times=False,
                                decode_timedelta=False)
    for path, ds in groups.items():
        m = out.setdefault(path, {"dims": {n: (s, False) for n, s in ds.sizes.items()}, "attrs": {}, "vars": {}})
        m["attrs"] = {a: (None, value(v)) for a, v in ds.attrs.items() if a not in IGNORED_ATTRS}
        for n, v in ds.variables.items():
            kind = "str" if v.dtype.kind in "SUOT" else v.dtype.str[1:]
            m["vars"][n] = {"type": kind, "dims": list(v.dims), "shape": list(v.shape),
                            "attrs": {a: (None, value(x)) for a, x in v.attrs.items()}, "data": np.asarray(v.values)}
    return out


def read(reader: str, path: Path | str, original: bool = False) -> dict:
    """``path`` (a dataset folder, or with ``original`` a netCDF-4 file) read by ``reader``."""
    import netCDF4

    target = str(path) if original else url(path)
    if reader == "ncdump":
        return _ncdump(target)
    if reader == "wheel":
        with netCDF4.Dataset(target) as ds:
            return _nc_model(ds)
    return _xarray(str(path), "netcdf4" if original else "zarr")


def _same_data(a: np.ndarray, b: np.ndarray) -> bool:
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "SUOT" or b.dtype.kind in "SUOT":
        return value(a) == value(b)
    return bool(np.array_equal(a.astype("f8") if a.dtype.kind != "c" else a, b.astype("f8") if b.dtype.kind != "c" else b,
                               equal_nan=True))


def _same(a: Any, b: Any) -> bool:
    if a == b:
        return True
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return all(x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))
                   for x, y in zip(a, b))
    return False


def diff(ref: dict, got: dict) -> list[str]:
    """What ``got`` lacks, adds or changes against ``ref`` (``kind path``, one a line)."""
    out: list[str] = []
    for g in sorted(set(ref) | set(got)):
        if g not in got:
            out.append(f"group-missing {g}")
            continue
        if g not in ref:
            out.append(f"group-extra {g}")
            continue
        r, m = ref[g], got[g]
        p = g.rstrip("/") + "/"
        out += _keyed_diff("dim", r["dims"], m["dims"], p)
        out += _keyed_diff("attr", r["attrs"], m["attrs"], p)
        for n in sorted(set(r["vars"]) | set(m["vars"])):
            if n not in m["vars"]:
                out.append(f"var-missing {p}{n}")
                continue
            if n not in r["vars"]:
                out.append(f"var-extra {p}{n}")
                continue
            rv, mv = r["vars"][n], m["vars"][n]
            for k in ("type", "dims", "shape"):
                if rv[k] != mv[k]:
                    out.append(f"var-{k} {p}{n} {rv[k]}->{mv[k]}")
            out += _keyed_diff("attr", rv["attrs"], mv["attrs"], f"{p}{n}@")
            if rv["shape"] == mv["shape"] and not _same_data(rv["data"], mv["data"]):
                out.append(f"data {p}{n}")
    return out


def _keyed_diff(kind: str, r: dict, m: dict, p: str) -> list[str]:
    """Dimensions or attributes (by name) missing, extra or changed."""
    return [f"{kind}-{how} {p}{a}" for how, a in keyed_differences(r, m, _same)]
