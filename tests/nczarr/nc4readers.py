"""Every reader of issue 45 on one NAME.nc4, each compared with what the store decodes: h5py,
the netCDF4 wheel and ``ncks --jsn`` by raw value against zarr-python, xarray's two engines
(and ``ncdump`` through ncgen) by the decoded judge against xarray on the store; ``cdo``,
``gdalinfo`` (netCDF and HDF5 drivers), ``h5dump`` and ``h5ls`` by exit status and error text.
A reader's result: a list of differences ([] equal) or an exception (fails)."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tests.decoded.judge import _cdl_file, compare, expected

#: the readers, in the table's order
READERS = ("h5py", "xarray-netcdf4", "xarray-h5netcdf", "netCDF4", "ncdump", "ncks", "cdo",
           "gdal-netcdf", "gdal-hdf5", "h5dump", "h5ls")

#: differences the file shows by design or a reader's own limit: (readers, pattern, why)
DOCUMENTED = [
    (("xarray-netcdf4", "xarray-h5netcdf", "ncdump"), r": attr flag_(values|meanings) extra$",
     "bool as byte with CF flag_values and flag_meanings (as the classic files)"),
    (("xarray-netcdf4", "xarray-h5netcdf", "ncdump"),
     r"^\(netCDF-C reference\) /\w+: (dtype uint8 -> float32|values at .* got \[nan|_FillValue added)",
     "a pure Zarr v2 fill_value 0 of an array xarray cannot read (no dimension names; netCDF-C, the"
     " reference here, masks nothing) is the file's _FillValue, as in the classic .nc files (SEMANTICS)"),
    (("xarray-netcdf4", "xarray-h5netcdf", "ncdump"),
     r": (_FillValue lost \(np\.(int32\(-2147483647|float32\(9\.96921e\+36)\)\)|dtype float64 -> int32)$",
     "an NCZarr array without a _FillValue attribute: no _FillValue in the file, as netCDF-C reads the"
     " store (its default fill); xarray's Zarr backend takes the .zarray fill_value as a mask"),
    (("ncdump",), r"ncgen refuses the CDL: .*syntax error, unexpected '\(', expecting ':'",
     "ncdump prints a variable named as a CDL type (byte) unescaped, which ncgen refuses (ncdump on the store too)"),
    (("ncks",), r"values differ: want \[[^]]*1\.79769313e\+308[^]]*\] got \[[^]]*inf",
     "ncks --jsn prints doubles to 15 digits: the largest double prints as a number beyond it (inf)"),
    (("cdo",), r"^cdo refuses netCDF-C's own copy too: ",
     "CDO's own limit (it refuses nccopy's copy of the file too): groups, more than one time variable,"
     " no data variable on its grids"),
    (("gdal-netcdf",), r"^gdal refuses netCDF-C's own copy too: ",
     "GDAL's netCDF driver's own limit (it refuses nccopy's copy of the file too): no variable of two"
     " distinct dimensions or more"),
]

#: one command's time limit (s)
TIMEOUT = 300


def documented(reader: str, difference: str) -> str | None:
    """Why ``difference`` of ``reader`` is documented (None: it is not)."""
    return next((why for readers, pat, why in DOCUMENTED if reader in readers and re.search(pat, difference)), None)


def _run(cmd: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, errors="replace")


def _checked(cmd: list[str], label: str) -> str:
    """stdout of ``cmd``; an exception naming ``label`` on a non-zero exit or an error message."""
    res = _run(cmd)
    text = res.stderr + ("" if label == "ncks" else res.stdout)
    if res.returncode or re.search(r"\berror\b", text, re.I):
        raise RuntimeError(f"{label} rc={res.returncode}: {(res.stderr or res.stdout).strip()[-300:]}")
    return res.stdout


# --- raw values: zarr-python on the store ------------------------------------------------------

def nczarr_url(store: Path) -> str:
    """netCDF-C's URL of ``store`` (the reference where xarray and zarr-python cannot read it)."""
    return f"file://{store}#mode=nczarr,file"


def zarr_arrays(store: Path) -> dict[str, tuple[np.ndarray, dict]]:
    """{"/path/name": (raw values, attributes)} of every array zarr-python reads in ``store``;
    where it cannot, what netCDF-C reads (attributes not compared)."""
    try:
        return _zarr_arrays(store)
    except Exception:  # noqa: BLE001 - NCZarr zarr-python refuses (u1 with a null fill, ...)
        return {k: (v, {}) for k, v in read_wheel(nczarr_url(store)).items()}


def _zarr_arrays(store: Path) -> dict[str, tuple[np.ndarray, dict]]:
    import zarr

    out = {}
    root = zarr.open_group(str(store), mode="r")
    for path, node in root.members(max_depth=None):
        if isinstance(node, zarr.Array):
            out["/" + path] = (np.asarray(node[...]), dict(node.attrs))
    return out


def _as_text(a: np.ndarray) -> np.ndarray:
    def one(x: Any) -> str:
        return (x.decode("utf-8", "replace") if isinstance(x, bytes) else str(x)).rstrip("\x00")
    return np.vectorize(one, otypes=[object])(a) if a.size else a.astype(object)


def raw_differs(where: str, want: np.ndarray, got: np.ndarray, printed: bool = False) -> list[str]:
    """How ``got`` differs from the raw ``want`` (bool as byte, text of any storage as text;
    ``printed``: floats as printed text, to 7 digits for float32, 15 for float64)."""
    want, got = np.asarray(want), np.asarray(np.ma.filled(got) if np.ma.isMaskedArray(got) else got)
    if want.dtype.kind in "OSUT" or got.dtype.kind in "OSU":
        want, got = _as_text(want), _as_text(got)
        same = want.shape == got.shape and (want == got).all()
    elif want.shape != got.shape:
        return [f"{where}: shape {want.shape} -> {got.shape}"]
    else:
        w, g = want.astype(want.dtype.kind == "b" and "i1" or want.dtype), got
        same = np.array_equal(w, g, equal_nan=w.dtype.kind in "fc")
        if printed and not same and w.dtype.kind == "f":
            same = np.allclose(w, g.astype(w.dtype), rtol=2e-7 if w.dtype.itemsize == 4 else 1e-14, atol=0,
                               equal_nan=True)
    return [] if same else [f"{where}: values differ: want {want.ravel()[:6]} got {got.ravel()[:6]}"]


def attr_differs(want: Any, got: Any) -> bool:
    """Does the attribute ``got`` (as h5py reads it) hold other than the store's ``want``? Text
    as text, numbers (and lists of them, bool as 0/1) by value."""
    got = got.decode() if isinstance(got, bytes) else got
    if isinstance(want, str) or isinstance(got, str):
        return str(want) != (str(got) if not isinstance(got, np.ndarray) else str(got.tolist()))
    try:
        w, g = np.ravel(np.asarray(want, float)), np.ravel(np.asarray(got, float))
    except (TypeError, ValueError):
        return _texts(want) != _texts(got)
    return w.shape != g.shape or not np.allclose(w, g, rtol=1e-6, equal_nan=True)


def _texts(x: Any) -> list[str]:
    return [v.decode() if isinstance(v, bytes) else str(v) for v in np.ravel(np.asarray(x, dtype=object))]


def _compare_raw(store: Path, got: dict[str, Any], attrs: dict[str, dict] | None = None,
                 printed: bool = False) -> list[str]:
    out = []
    for path, (want, wattrs) in zarr_arrays(store).items():
        if path not in got:
            out.append(f"{path}: missing")
            continue
        out += raw_differs(path, want, got[path], printed)
        if attrs is not None:
            mine = {a: v for a, v in wattrs.items() if not a.startswith("_")}
            out += [f"{path}: attr {a} lost" for a in sorted(mine.keys() - attrs[path].keys())]
            out += [f"{path}: attr {a} {mine[a]!r} -> {attrs[path][a]!r}"
                    for a in sorted(mine.keys() & attrs[path].keys()) if attr_differs(mine[a], attrs[path][a])]
    return out


def read_h5py(path: Path) -> tuple[dict[str, np.ndarray], dict[str, dict]]:
    import h5py

    values, attrs = {}, {}

    def visit(name: str, obj) -> None:
        if isinstance(obj, h5py.Dataset):
            values["/" + name] = obj.asstr()[()] if h5py.check_string_dtype(obj.dtype) else obj[()]
            attrs["/" + name] = {a: obj.attrs[a] for a in obj.attrs}
    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return values, attrs


def read_wheel(path: Path | str) -> dict[str, np.ndarray]:
    import netCDF4

    out: dict[str, np.ndarray] = {}
    with netCDF4.Dataset(path) as nc:
        groups = [nc]
        while groups:
            g = groups.pop()
            groups += list(g.groups.values())
            for name, v in g.variables.items():
                v.set_auto_maskandscale(False)
                v.set_auto_chartostring(False)
                prefix = g.path.rstrip("/")
                out[f"{prefix}/{name}"] = v[...]
    return out


def _json_values(data: Any, text: bool) -> np.ndarray:
    """ncks' JSON values as an array; its ``null`` (it prints no NaN) as NaN."""
    a = np.array(np.nan if data is None else data, dtype=object)
    if text:
        return a
    nulls = np.equal(a, None)
    return np.where(nulls, np.nan, a).astype(float) if nulls.any() else np.array(a.tolist())


def read_ncks(path: Path) -> dict[str, np.ndarray]:
    data = json.loads(_checked(["ncks", "--jsn", str(path)], "ncks"))
    out: dict[str, np.ndarray] = {}

    def walk(node: dict, prefix: str) -> None:
        for name, v in node.get("variables", {}).items():
            out[f"{prefix}/{name}"] = _json_values(v.get("data"), v.get("type") in ("string", "char"))
        for name, sub in node.get("groups", {}).items():
            walk(sub, f"{prefix}/{name}")
    walk(data, "")
    return out


# --- decoded values: xarray on the store (tests/decoded/judge.py) -----------------------------

def _decoded(store: Path, got: Callable[[], dict[str, Any]]) -> list[str]:
    try:
        want = expected(store)
    except Exception:  # noqa: BLE001 - NCZarr xarray's Zarr backend refuses: netCDF-C on the store
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = _xarray(nczarr_url(store), "netcdf4")
        return [f"(netCDF-C reference) {d}" for d in compare(want, got())]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return compare(want, got())


def _xarray(path: Path, engine: str) -> dict[str, Any]:
    import xarray as xr

    return {g: ds.load() for g, ds in xr.open_groups(path, engine=engine).items()}


def _ncdump(path: Path) -> dict[str, Any]:
    """ncdump's CDL of the file (its values printed), made a file again by ncgen and read by
    xarray: the judge's ncdump path."""
    import xarray as xr

    text = _checked(["ncdump", "-p", "9,17", str(path)], "ncdump")
    with tempfile.TemporaryDirectory() as tmp:
        f = _cdl_file(text, tmp, True)
        return {g: ds.load() for g, ds in xr.open_groups(f, engine="netcdf4").items()}


# --- opens without an error ----------------------------------------------------------------

def _gdal_hdf5(path: Path) -> list[str]:
    """gdalinfo by the HDF5 driver on every numeric dataset of one dimension or more (its
    ``HDF5:"file"://name`` form: the driver leaves a file with netCDF-4's marks to netCDF's)."""
    import h5py

    names: list[str] = []
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and o.ndim
                     and o.dtype.kind in "iuf" else None)
    out = []
    for n in names:
        r = _run(["gdalinfo", f'HDF5:"{path}"://{n}'])
        if r.returncode or "ERROR" in r.stdout + r.stderr:
            out.append(f"/{n}: gdal refuses: {(r.stderr or r.stdout).strip()[-300:]}")
    return out


def _refused(label: str, cmd: Callable[[Path], list[str]], path: Path, bad: Callable) -> list[str]:
    """[] if ``cmd`` on ``path`` reads it; else the refusal, saying whether the reader refuses
    netCDF-C's own copy of the file (written by nccopy) too: its own limit, not the file's."""
    res = _run(cmd(path))
    if not bad(res):
        return []
    why = " / ".join((res.stderr or res.stdout).strip().splitlines())[-300:]
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp, "copy.nc")
        subprocess.run(["nccopy", "-k", "nc4", str(path), str(copy)], capture_output=True, timeout=TIMEOUT, check=True)
        too = bad(_run(cmd(copy)))
    also = " netCDF-C's own copy too" if too else ""
    return [f"{label} refuses{also}: {why}"]


def _gdal(path: Path, driver: str) -> list[str]:
    """gdalinfo on the file by ``driver`` and on each of its subdatasets."""
    refused = _refused("gdal", lambda p: ["gdalinfo", "-if", driver, str(p)], path,
                       lambda r: r.returncode or "ERROR" in r.stdout + r.stderr)
    if refused:
        return refused
    res = _run(["gdalinfo", "-if", driver, str(path)])
    out = []
    for sub in re.findall(r"SUBDATASET_\d+_NAME=(.*)", res.stdout):
        r = _run(["gdalinfo", sub.strip()])
        if r.returncode or "ERROR" in r.stdout + r.stderr:
            out.append(f"{sub}: gdal refuses: {(r.stderr or r.stdout).strip()[-300:]}")
    return out


def _cdo(path: Path) -> list[str]:
    return _refused("cdo", lambda p: ["cdo", "-s", "sinfon", str(p)], path,
                    lambda r: r.returncode or "Error" in r.stderr)


def run_reader(reader: str, store: Path, path: Path) -> list[str]:
    """The differences ``reader`` shows reading ``path`` (NAME.nc4 of ``store``)."""
    if reader == "h5py":
        values, attrs = read_h5py(path)
        return _compare_raw(store, values, attrs)
    if reader == "netCDF4":
        return _compare_raw(store, read_wheel(path))
    if reader == "ncks":
        return _compare_raw(store, read_ncks(path), printed=True)
    if reader.startswith("xarray-"):
        return _decoded(store, lambda: _xarray(path, reader.split("-")[1]))
    if reader == "ncdump":
        return _decoded(store, lambda: _ncdump(path))
    if reader == "cdo":
        return _cdo(path)
    if reader == "gdal-netcdf":
        return _gdal(path, "netCDF")
    if reader == "gdal-hdf5":
        return _gdal_hdf5(path)
    _checked(["h5dump" if reader == "h5dump" else "h5ls", *([] if reader == "h5dump" else ["-r"]), str(path)], reader)
    return []


def verdict(reader: str, store: Path, path: Path) -> tuple[str, list[str]]:
    """("equal" | "documented" | "differs" | "fails", the lines behind it)."""
    try:
        diffs = run_reader(reader, store, path)
    except Exception as exc:  # noqa: BLE001 - a reader that cannot open or read the file
        line = f"{type(exc).__name__}: {str(exc)[:300]}"
        why = documented(reader, line)
        return ("documented", [why]) if why else ("fails", [line])
    if not diffs:
        return "equal", []
    rest = [d for d in diffs if documented(reader, d) is None]
    return ("differs", rest) if rest else ("documented", sorted({documented(reader, d) for d in diffs}))
