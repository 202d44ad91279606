"""Read and change zip archives behind nczfs's back (test backdoors), layout-aware."""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from nczfs.store.zip import detect_layout, top_name


def dataset_prefix(path: Path, default_layout: str = "netcdf") -> str:
    """What member names start with for a dataset key: ``top/`` (netCDF-C) or ``""`` (flat)."""
    if path.exists():
        with zipfile.ZipFile(path) as zf:
            found = detect_layout(zf.infolist(), str(path))
        if found is not None:
            return found[1] + "/" if found[1] else ""
    return top_name(str(path)) + "/" if default_layout == "netcdf" else ""


def zip_members(path: Path, default_layout: str = "netcdf") -> dict[str, bytes]:
    """Every file member below the dataset directory, by dataset key (the last duplicate wins)."""
    if not path.exists():
        return {}
    start = dataset_prefix(path, default_layout)
    with zipfile.ZipFile(path) as zf:
        return {i.filename[len(start):]: zf.read(i) for i in zf.infolist()
                if not i.is_dir() and i.filename.startswith(start)}


def rewrite_zip(path: Path, put: dict[str, bytes] | None = None, drop: set[str] = frozenset(),
                default_layout: str = "netcdf") -> None:
    """Replace the archive (new inode, as another program would) with members changed."""
    start = dataset_prefix(path, default_layout)
    put = {start + k: v for k, v in (put or {}).items()}
    drop = {start + k for k in drop}
    tmp = path.with_name(path.name + ".rewrite")
    with zipfile.ZipFile(tmp, "w") as out:
        if path.exists():
            with zipfile.ZipFile(path) as zf:
                for info in zf.infolist():
                    if info.filename not in put and info.filename not in drop:
                        out.writestr(info, zf.read(info))
        elif start:
            out.mkdir(start)
        for name, data in put.items():
            out.writestr(name, data)
    os.replace(tmp, path)
