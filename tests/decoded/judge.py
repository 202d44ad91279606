"""The decoded judge (issue 43): what a CF reader *decodes* from each path nczfs offers to a store,
compared with what xarray decodes from the store itself.

``expected(store)`` reads the store xarray/zarr wrote directly (``xr.open_groups(store,
engine="zarr")``, CF decoding on; where xarray cannot decode the Zarr v3 ``_FillValue`` of a
fixed-width string it wrote, zarr-python's read CF-decoded: tests/decoded/zarrread.py, as every
zarr-engine path is read); ``read(path, where)`` reads the same dataset through one
path of :data:`PATHS` (a view of a mount read by xarray's zarr engine or the netCDF4 wheel's
``file://…#mode=nczarr,file`` URL, ``NAME.nc`` by the netCDF4 and scipy engines, ``open_view``,
``nczfs inspect``'s CDL made a file by ``ncgen``); ``compare(want, got)`` lists, per variable,
what differs in decoded values (NaN/NaT in the same places), decoded dtype, attributes, and the
CF encoding that matters (units, calendar, _FillValue present and its value), one human-readable
line each; ``judge(where, paths)`` does all three for every path: {path: [difference, ...]}.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import signal
import subprocess
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tests.decoded.documented import DOCUMENTED, kind_of, touches_data, undocumented  # noqa: F401 - the judge's API
from tests.decoded.zarrread import open_groups

#: path -> (kind, view, engine): kind "view" (a mount of that view), "nc" (NAME.nc beside the
#: dataset on a mount with -o nc_files), "open_view" (nczfs.open_view, present=view),
#: "inspect" (the CDL of ``nczfs inspect`` through ncgen: header only, no values),
#: "ncdump" (Debian ncdump 4.9.0 through the view, its print made a file by ncgen)
PATHS: dict[str, tuple[str, str, str]] = {
    "as-stored/zarr": ("view", "as-stored", "zarr"),
    "xarray/zarr": ("view", "xarray", "zarr"),
    "netcdf-4.10/netcdf4": ("view", "netcdf-4.10", "netcdf4"),
    "netcdf-4.10/zarr": ("view", "netcdf-4.10", "zarr"),
    "netcdf-4.9.1/netcdf4": ("view", "netcdf-4.9.1", "netcdf4"),
    "netcdf-4.9/netcdf4": ("view", "netcdf-4.9", "netcdf4"),
    "netcdf-4.9/ncdump": ("ncdump", "netcdf-4.9", "netcdf4"),
    "nc/netcdf4": ("nc", "as-stored", "netcdf4"),
    "nc/scipy": ("nc", "as-stored", "scipy"),
    "open_view-xarray/zarr": ("open_view", "xarray", "zarr"),
    "open_view-as-stored/zarr": ("open_view", "as-stored", "zarr"),
    "inspect/netcdf4": ("inspect", "as-stored", "netcdf4"),
}
#: attributes readers add or keep of their own (netCDF-C's, NCZarr's, xarray's bookkeeping)
IGNORED_ATTRS = {"_NCProperties", "_Netcdf4Dimid", "_Netcdf4Coordinates", "_ARRAY_DIMENSIONS", "coordinates",
                 "_nczarr_array", "_nczarr_attr", "_nczarr_group", "_nczarr_superblock", "_Encoding"}
CALENDAR_ALIASES = {"gregorian": "standard"}


@dataclass
class Where:
    """How to reach one dataset ``name`` by each path: the store as written (the expected's
    source), the roots of the mounts of each view, the mount showing NAME.nc files, and the
    SOURCE (with its options) of ``open_view`` and ``nczfs inspect``."""

    name: str
    store: Path
    views: dict[str, Path] = field(default_factory=dict)
    nc_root: Path | None = None
    source: str = ""
    options: dict = field(default_factory=dict)

    def needs(self, path: str) -> bool:
        """Can ``path`` be read here (its mount is there)?"""
        kind, view, _ = PATHS[path]
        if kind in ("view", "ncdump"):
            return view in self.views
        return self.nc_root is not None if kind == "nc" else bool(self.source)


#: how the header-only paths are decoded (and their expected): a file ncgen made from a CDL
#: without data holds fill values, which no calendar decodes
HEADER_DECODING = {"decode_times": False, "decode_timedelta": False}


def expected(store: Path | str, **decoding: Any) -> dict[str, Any]:
    """{group: Dataset} xarray decodes from the store itself (loaded); ``decoding``: keywords of
    ``open_groups`` (default: CF decoding on)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return open_groups(store, **decoding)


def _nc_files(root: Path, name: str, want: dict[str, Any], engine: str) -> dict[str, Any] | None:
    """NAME.nc and NAME.GROUP.nc; a group without variables has no file (an empty Dataset: its
    attributes, if any, count as lost)."""
    import xarray as xr

    out = {}
    for g, ds in want.items():
        f = root / (name + (g.replace("/", ".") if g != "/" else "") + ".nc")
        if not f.exists() and not ds.variables:
            out[g] = xr.Dataset()
            continue
        if engine == "scipy" and f.read_bytes()[3:4] not in (b"\x01", b"\x02"):
            return None  # scipy reads CDF-1 and CDF-2 only
        out[g] = xr.open_dataset(f, engine=engine).load()
        if engine == "scipy":
            out[g] = _names_as_utf8(out[g])
    return out


def _utf8(name: Any) -> Any:
    """``name`` as scipy should have read it: scipy decodes a classic file's names (UTF-8, as
    netCDF-C writes them) as Latin-1."""
    try:
        return name.encode("latin-1").decode("utf-8") if isinstance(name, str) else name
    except (UnicodeEncodeError, UnicodeDecodeError):
        return name


def _names_as_utf8(ds: Any) -> Any:
    """``ds`` (read by scipy) with its names read back as UTF-8 (the values are then compared as
    any others); how many were renamed goes in ``ds.encoding["judge_notes"]``."""
    renames = {k: _utf8(k) for k in [*ds.variables, *ds.dims] if _utf8(k) != k}
    ds = ds.rename(renames) if renames else ds
    n = len(renames)
    for attrs in [ds.attrs, *(v.attrs for v in ds.variables.values())]:
        fixed = {_utf8(k): v for k, v in attrs.items()}
        n += sum(1 for k in attrs if _utf8(k) != k)
        attrs.clear()
        attrs.update(fixed)
    if n:
        ds.encoding["judge_notes"] = [f"names: scipy decodes names as Latin-1 ({n} read back as UTF-8)"]
    return ds


#: a char variable's _FillValue in CDL (a string's is typed: ``string v:_FillValue``)
CHAR_FILL = re.compile(r'^(\t\t[^\s:]+):_FillValue = (".*") ;$', re.M)
#: its name while ncgen makes the file: ncgen pads a char variable's strings with it (as if the
#: NULs ncdump leaves out were missing), not with the NULs ncdump read
CHAR_FILL_ASIDE = "_judge_char_FillValue"


def _cdl_file(cdl: str, tmp: str, ncdump: bool) -> str:
    if not ncdump:  # nczfs inspect: its comment lines after the CDL
        cdl = "\n".join(line for line in cdl.splitlines() if not line.startswith("//"))
    cdl, aside = CHAR_FILL.subn(rf"\1:{CHAR_FILL_ASIDE} = \2 ;", cdl)
    Path(tmp, "d.cdl").write_text(cdl)
    p = subprocess.run(["ncgen", "-4", "-o", f"{tmp}/d.nc", f"{tmp}/d.cdl"], capture_output=True, text=True, timeout=60)
    if p.returncode < 0 and ncdump and re.search(r'\\n",\n\s+"', cdl):  # ncdump breaks chars after a \n
        raise RuntimeError(f"ncgen crashed ({signal.Signals(-p.returncode).name}) on ncdump's print of chars"
                           " holding a newline")
    if p.returncode:
        raise RuntimeError(f"ncgen refuses the CDL: {p.stderr.strip()[-300:]}")
    if aside:
        _char_fills_back(f"{tmp}/d.nc")
    return f"{tmp}/d.nc"


def _char_fills_back(path: str) -> None:
    """The char ``_FillValue`` attributes :data:`CHAR_FILL_ASIDE` named back, in every group."""
    import netCDF4

    with netCDF4.Dataset(path, "a") as ds:
        groups = [ds]
        while groups:
            g = groups.pop()
            groups += list(g.groups.values())
            for v in g.variables.values():
                if CHAR_FILL_ASIDE in v.ncattrs():
                    v.renameAttribute(CHAR_FILL_ASIDE, "_FillValue")


def _through_cdl(kind: str, where: Where) -> dict[str, Any]:
    import xarray as xr

    if kind == "inspect":  # the command's own code, in this process (no interpreter started)
        from nczfs.cli import main

        out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()  # it reconfigures stdout
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(["inspect", *(f"-o{k}={v}" for k, v in where.options.items()), where.source])
        out.flush()
        text, label = out.buffer.getvalue().decode("utf-8", "surrogateescape"), "nczfs inspect"
    else:
        url = f"file://{where.views['netcdf-4.9'] / where.name}#mode=nczarr,file"
        p = subprocess.run(["ncdump", "-p", "9,17", url], capture_output=True, text=True, timeout=120)
        rc, text, label, err = p.returncode, p.stdout, "ncdump", io.StringIO(p.stderr)
    if rc:
        raise RuntimeError(f"{label} rc={rc}: {err.getvalue().strip()[-300:]}")
    with tempfile.TemporaryDirectory() as tmp:
        f = _cdl_file(text, tmp, kind == "ncdump")
        decoding = HEADER_DECODING if kind == "inspect" else {}
        return {g: ds.load() for g, ds in xr.open_groups(f, engine="netcdf4", **decoding).items()}


def read(path: str, where: Where, want: dict[str, Any]) -> dict[str, Any] | None:
    """{group: Dataset} xarray decodes through ``path`` (``want``: the expected, whose groups
    name the NAME.GROUP.nc files); None where the path cannot apply (scipy on a CDF-5 file)."""
    import xarray as xr

    kind, view, engine = PATHS[path]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if kind == "view":
            target = where.views[view] / where.name
            if engine == "netcdf4":
                return {g: ds.load() for g, ds in xr.open_groups(f"file://{target}#mode=nczarr,file",
                                                                 engine=engine).items()}
            return open_groups(target)
        if kind == "nc":
            return _nc_files(where.nc_root, where.name, want, engine)
        if kind == "open_view":
            import nczfs

            store = nczfs.open_view(where.source, present=view, read_only=True, **where.options)
            try:
                return open_groups(store)
            finally:
                store.close()
        return _through_cdl(kind, where)


# --- comparing -------------------------------------------------------------------------------

def _kind(dtype: np.dtype) -> str:
    """The decoded dtype as the judge compares it: text of any storage is text, datetimes of
    any resolution are datetimes; everything else exactly."""
    if dtype.kind in "OSUT":
        return "text"
    if dtype.kind == "M":
        return "datetime64"
    if dtype.kind == "m":
        return "timedelta64"
    return str(dtype)


def _text(x: Any) -> str:
    if isinstance(x, (bytes, np.bytes_)):
        return bytes(x).decode("utf-8", "replace").rstrip("\x00")
    return str(x)


def _missing(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "Mm":
        return np.isnat(a)
    if a.dtype.kind == "f":
        return np.isnan(a)
    if a.dtype.kind == "O":
        return np.array([isinstance(e, float) and math.isnan(e) for e in a.ravel()]).reshape(a.shape)
    return np.zeros(a.shape, bool)


def _show(a: np.ndarray) -> str:
    return np.array2string(a.ravel(), threshold=6, max_line_width=160, separator=",")


def values_differ(want: np.ndarray, got: np.ndarray) -> str:
    """'' if equal (NaN/NaT in the same places), else what differs."""
    want, got = np.asarray(want), np.asarray(got)
    if want.shape != got.shape:
        return f"shape {want.shape} -> {got.shape}"
    if _kind(want.dtype) == "text" and _kind(got.dtype) == "text":
        same = [_text(a) == _text(b) for a, b in zip(want.ravel(), got.ravel())]
    else:
        mw, mg = _missing(want), _missing(got)
        try:
            eq = np.asarray(want == got) if want.dtype.kind != "O" else np.array(
                [a == b for a, b in zip(want.ravel(), got.ravel())], dtype=bool).reshape(want.shape)
        except (TypeError, ValueError):
            eq = np.zeros(want.shape, bool)
        same = ((mw & mg) | (~mw & ~mg & eq)).ravel().tolist()
    if all(same):
        return ""
    bad = [i for i, s in enumerate(same) if not s]
    return f"at {bad[:4]}: want {_show(want)} got {_show(got)}"


def _same_attr(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "OSUT" or b.dtype.kind in "OSUT":
        return [_text(x) for x in a.ravel()] == [_text(x) for x in b.ravel()]
    try:
        return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a.astype(float)) & np.isnan(b.astype(float)))))
    except (TypeError, ValueError):
        return False


def _attrs(where: str, want: dict, got: dict) -> list[str]:
    from tests.helpers import keyed_differences

    w = {k: v for k, v in want.items() if k not in IGNORED_ATTRS}
    g = {k: v for k, v in got.items() if k not in IGNORED_ATTRS}
    return [f"{where}: attr {k} {how}" + (f": {w[k]!r} -> {g[k]!r}" if how == "changed" else "")
            for how, k in keyed_differences(w, g, _same_attr)]


def _encoding(where: str, want: Any, got: Any) -> list[str]:
    """units and calendar of decoded times, _FillValue's presence and value."""
    out = []
    we, ge = want.encoding, got.encoding
    if _kind(want.dtype) in ("datetime64", "timedelta64") or want.dtype.kind == "O" and "calendar" in we:
        for key in ("units", "calendar"):
            a = CALENDAR_ALIASES.get(we.get(key), we.get(key))
            b = CALENDAR_ALIASES.get(ge.get(key), ge.get(key))
            if key in we and a != b:
                out.append(f"{where}: {key} {we.get(key)!r} -> {ge.get(key)!r}")
    if ("_FillValue" in we) != ("_FillValue" in ge):
        if "_FillValue" in we and _same_attr(we["_FillValue"], ge.get("missing_value")):
            out.append(f"{where}: _FillValue as missing_value ({we['_FillValue']!r})")  # the same mask
        else:
            out.append(f"{where}: _FillValue {'lost' if '_FillValue' in we else 'added'}"
                       f" ({we.get('_FillValue', ge.get('_FillValue'))!r})")
    elif "_FillValue" in we and not _same_attr(we["_FillValue"], ge["_FillValue"]):
        out.append(f"{where}: _FillValue {we['_FillValue']!r} -> {ge['_FillValue']!r}")
    return out


def _masked_as_mask(want: Any, got: Any) -> str:
    """``", the masked strings read as their mask ''"`` where text differs only so: every
    element that differs is missing in ``want`` and the mask's text in ``got``."""
    fill = want.encoding.get("_FillValue")
    if fill is None or _kind(want.dtype) != "text" or _kind(got.dtype) != "text":
        return ""
    w, g = np.asarray(want.values).ravel(), np.asarray(got.values).ravel()
    missing = _missing(w)
    if all(m and _text(b) == _text(fill) for a, b, m in zip(w, g, missing) if m or _text(a) != _text(b)):
        return f", the masked strings read as their mask {_text(fill)!r}"
    return ""


def compare_variable(where: str, want: Any, got: Any, values: bool = True) -> list[str]:
    """What differs between two decoded variables (xarray Variables) ``where`` names."""
    out = []
    if want.dims != got.dims:
        out.append(f"{where}: dims {want.dims} -> {got.dims}")
    if _kind(want.dtype) != _kind(got.dtype):
        out.append(f"{where}: dtype {want.dtype} -> {got.dtype}")
    if values and (d := values_differ(want.values, got.values)):
        out.append(f"{where}: values {d}{_masked_as_mask(want, got)}")
    return out + _attrs(where, want.attrs, got.attrs) + _encoding(where, want, got)


def compare_dataset(group: str, want: Any, got: Any, values: bool = True) -> list[str]:
    """What differs between two decoded Datasets of group ``group``."""
    p = group.rstrip("/") + "/"
    out = _attrs(p, want.attrs, got.attrs)
    empty = {n for n, v in want.variables.items() if 0 in v.shape}  # along a dimension of length 0
    if dict(want.sizes) != dict(got.sizes):
        used = {d for n, v in want.variables.items() if n not in empty for d in v.dims}
        left = {d: n for d, n in want.sizes.items() if n and d in used} == dict(got.sizes)
        out.append(f"{p}: sizes {dict(want.sizes)} -> {dict(got.sizes)}"
                   + (": only the dimensions of length 0 (and those only arrays along one use) left out" if left else ""))
    if set(want.coords) != set(got.coords):
        left = set(want.coords) - empty == set(got.coords)
        out.append(f"{p}: coords {sorted(want.coords)} -> {sorted(got.coords)}"
                   + (": only those along a dimension of length 0 left out" if left else ""))
    out += [f"{p}: {note}" for note in got.encoding.get("judge_notes", [])]
    for name in sorted(set(want.variables) | set(got.variables), key=str):
        if name not in got.variables:
            out.append(f"{p}{name}: missing ({want[name].dtype})"
                       + (", along a dimension of length 0" if name in empty else ""))
        elif name not in want.variables:
            out.append(f"{p}{name}: extra ({got[name].dtype})")
        else:
            out += compare_variable(f"{p}{name}", want.variables[name], got.variables[name], values)
    return out


def compare(want: dict[str, Any], got: dict[str, Any], values: bool = True) -> list[str]:
    """Every difference between two {group: Dataset}, one human-readable line each ([] if equal);
    ``values=False`` compares what a header holds only (``nczfs inspect``)."""
    out = [f"{g}: group missing" for g in want if g not in got]
    out += [f"{g}: group extra" for g in got if g not in want]
    for g in want:
        if g in got:
            out += compare_dataset(g, want[g], got[g], values)
    return out


def judge(where: Where, paths: list[str] | None = None) -> dict[str, list[str] | None]:
    """{path: differences} for each of ``paths`` (default: every path ``where`` can reach); a
    path that fails to read gives ``["open: <error>"]``, one that cannot apply gives None.
    Raises what xarray raises when it cannot read the store itself (no expected)."""
    want = expected(where.store)
    out: dict[str, list[str] | None] = {}
    for path in paths or [p for p in PATHS if where.needs(p)]:
        header = PATHS[path][0] == "inspect"
        ref = expected(where.store, **HEADER_DECODING) if header else want
        if PATHS[path][2] == "zarr":
            out[path] = _judge_one(path, where, ref, header)
        else:  # netCDF-C reads in a child: a reader that crashes on what a path shows is a difference
            out[path] = _in_child(_judge_one, path, where, ref, header)
    return out


def _judge_one(path: str, where: Where, ref: dict[str, Any], header: bool) -> list[str] | None:
    try:
        got = read(path, where, ref)
    except Exception as exc:  # noqa: BLE001 - a read that fails is this path's difference
        return [f"open: {type(exc).__name__}: {str(exc).strip()[:300]}"]
    return None if got is None else compare(ref, got, values=not header)


_worker: list = []  # the one worker process netCDF-C reads run in (a ProcessPoolExecutor of 1)
#: seconds a read may take before its reader counts as hung
READ_TIMEOUT = 120


def _in_child(fn, *args: Any) -> Any:
    """``fn(*args)`` in a worker process of its own (a clean interpreter, forked from a
    forkserver: no thread of this process, such as a store's, holds a lock there); a worker that
    dies (netCDF-C crashing on what it reads) or hangs gives ``["open: reader ..."]``, and the
    next call starts another."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures import TimeoutError as Timeout
    from concurrent.futures.process import BrokenProcessPool

    if not _worker:
        _worker.append(ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver")))
    pool = _worker[0]
    try:  # the caller's environment now (an S3 server's credential files set after the worker started)
        return pool.submit(_with_environment, dict(os.environ), fn, *args).result(timeout=READ_TIMEOUT)
    except (BrokenProcessPool, Timeout) as exc:
        codes = [p.exitcode for p in getattr(pool, "_processes", {}).values()]
        stop_worker()
        if isinstance(exc, Timeout):
            return [f"open: reader hung (no answer in {READ_TIMEOUT} s)"]
        died = next((c for c in codes if c), None)
        name = signal.Signals(-died).name if died and died < 0 else f"exit {died}"
        return [f"open: reader crashed ({name})"]


def _with_environment(env: dict[str, str], fn, *args: Any) -> Any:
    os.environ.clear()
    os.environ.update(env)
    return fn(*args)


def stop_worker() -> None:
    """End the worker process netCDF-C reads run in (killed: it may hang); the next read starts
    another. Call it when done (a test module's teardown)."""
    if _worker:
        pool = _worker.pop()
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.kill()
        pool.shutdown(wait=False, cancel_futures=True)
