"""``nczfs demo``: mount the bundled sample dataset, show its tree and its netCDF header, unmount.

The header is read through the mount by the netCDF4 wheel in file mode
(``file://MNT/ocean.file#mode=nczarr,file``), as any netCDF-C program would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import resources

SAMPLE = "ocean.file"

#: numpy dtype -> CDL type name
CDL_TYPES = {"int8": "byte", "uint8": "ubyte", "int16": "short", "uint16": "ushort", "int32": "int",
             "uint32": "uint", "int64": "int64", "uint64": "uint64", "float32": "float",
             "float64": "double", "<class 'str'>": "string", "|S1": "char"}


def _cdl_type(dtype) -> str:
    return CDL_TYPES.get(str(dtype), str(dtype))


def _cdl_value(value) -> str:
    import numpy as np

    if isinstance(value, str):
        return json.dumps(value)
    return ", ".join(str(x) for x in np.atleast_1d(value).tolist())


def cdl_header(ds, indent: str = "") -> list[str]:
    """An ``ncdump -h``-like header of an open netCDF4 Dataset or Group."""
    out = []
    if ds.dimensions:
        out.append(f"{indent}dimensions:")
        for d in ds.dimensions.values():
            size = f"UNLIMITED ; // ({len(d)} currently)" if d.isunlimited() else f"{len(d)} ;"
            out.append(f"{indent}\t{d.name} = {size}")
    if ds.variables:
        out.append(f"{indent}variables:")
        for v in ds.variables.values():
            dims = f"({', '.join(v.dimensions)})" if v.dimensions else ""
            out.append(f"{indent}\t{_cdl_type(v.dtype)} {v.name}{dims} ;")
            for a in v.ncattrs():
                out.append(f"{indent}\t\t{v.name}:{a} = {_cdl_value(v.getncattr(a))} ;")
    attrs = ds.ncattrs()
    if attrs:
        out.append(f"{indent}// global attributes:" if not indent else f"{indent}// group attributes:")
        for a in attrs:
            out.append(f"{indent}\t\t:{a} = {_cdl_value(ds.getncattr(a))} ;")
    for g in ds.groups.values():
        out.append(f"{indent}group: {g.name} {{")
        out.extend(cdl_header(g, indent + "  "))
        out.append(f"{indent}}} // group {g.name}")
    return out


def main() -> int:
    import netCDF4

    work = tempfile.mkdtemp(prefix="nczfs-demo-")
    store, mnt, log = (os.path.join(work, n) for n in ("store", "mnt", "nczfs.log"))
    os.makedirs(mnt)
    with resources.as_file(resources.files("nczfs") / "samples" / SAMPLE) as sample:
        shutil.copytree(sample, os.path.join(store, SAMPLE))
    nczfs = [sys.executable, "-m", "nczfs"]
    print(f"$ nczfs mount {store} {mnt}")
    res = subprocess.run([*nczfs, "mount", store, mnt, "--log-file", log], capture_output=True, text=True)
    if res.returncode != 0:
        print(res.stderr, file=sys.stderr, end="")
        return res.returncode
    status = 0
    try:
        print(f"\n$ find {mnt} -type f  (size, path)")
        for dirpath, dirnames, filenames in sorted(os.walk(mnt)):
            dirnames.sort()
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                print(f"{os.path.getsize(path):6d}  {os.path.relpath(path, mnt)}")
        url = f"file://{mnt}/{SAMPLE}#mode=nczarr,file"
        print(f"\n$ netCDF4.Dataset('{url}')   (netCDF-C {netCDF4.__netcdf4libversion__})")
        with netCDF4.Dataset(url) as ds:
            print(f"netcdf {SAMPLE} {{")
            print("\n".join(cdl_header(ds)))
            print("}")
            print(f"\nsst[0, :, :] =\n{ds['sst'][0, :, :]}")
    except Exception as exc:  # show what failed, still unmount
        print(f"nczfs demo: {exc}", file=sys.stderr)
        status = 1
    finally:
        print(f"\n$ nczfs umount {mnt}")
        res = subprocess.run([*nczfs, "umount", mnt], capture_output=True, text=True)
        if res.returncode != 0:
            print(res.stderr, file=sys.stderr, end="")
            status = status or res.returncode
    shutil.rmtree(work, ignore_errors=True)
    return status
