"""Read and change zip archives behind nczfs's back (test backdoors), layout-aware."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

from nczfs.store.zip.layout import detect_layout, top_name


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
                mkdirs: set[str] = frozenset(), default_layout: str = "netcdf") -> None:
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
        for d in mkdirs:
            out.mkdir(start + d)
    os.replace(tmp, path)



def _parents(key: str) -> list[str]:
    parts = key.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def medium_tree(path: Path, default_layout: str = "netcdf") -> tuple[dict[str, bytes], set[str]]:
    """What a zip mount's medium holds (objects, directories): the archive with the staged
    journal replayed.

    An independent reading of the staging directory (nczfs/store/zip/staging.py's format), so tests see
    writes the mount accepted but has not committed yet, without asking the daemon anything.
    """
    members: dict[str, bytes | Path] = dict(zip_members(path, default_layout))
    dirs = {d for k in members for d in _parents(k)}
    if path.exists():
        start = dataset_prefix(path, default_layout)
        with zipfile.ZipFile(path) as zf:
            dirs |= {n[len(start):].rstrip("/") for n in zf.namelist() if n.endswith("/") and n.startswith(start)}
    dirs.discard("")
    staging = path.parent / f".{path.name}.nczfs"
    journal = staging / "journal"
    lines = [json.loads(line) for line in journal.read_text().splitlines() if line] if journal.exists() else []
    st = path.stat() if path.exists() else None
    if lines and lines[0]["base"] == ([st.st_ino, st.st_size, st.st_mtime_ns] if st else None):
        for rec in lines[1:]:
            op = rec["op"]
            key = rec.get("key") or rec.get("dst")
            if op == "set":
                members[key] = staging / rec["file"]  # read at the end: later changes may drop it
            elif op == "del":
                members.pop(key, None)
            elif op in ("mv", "cp"):
                members[key] = members[rec["src"]] if op == "cp" else members.pop(rec["src"])
            elif op == "mkdir":
                dirs.add(key)
            elif op == "rmdir":
                dirs.discard(key)
            elif op == "mvdir":
                src = rec["src"]
                for k in [k for k in members if k.startswith(src + "/")]:
                    members[key + k[len(src):]] = members.pop(k)
                for d in [d for d in dirs if d == src or d.startswith(src + "/")]:
                    dirs.discard(d)
                    dirs.add(key + d[len(src):])
            if op in ("set", "mv", "cp", "mkdir", "mvdir"):
                dirs |= set(_parents(key))
    out = {k: v.read_bytes() if isinstance(v, Path) else v for k, v in members.items()}
    return out, dirs

def sync_mounts_of(source: str) -> None:
    """Ask every nczfs mount of ``source`` to commit (``nczfs sync``), so the archive is current."""
    from nczfs.fuse.control import read_control
    from nczfs.daemon.controlsock import request

    with open("/proc/self/mounts") as f:
        mounts = [line.split() for line in f]
    for fields in mounts:
        if len(fields) > 2 and fields[0] == source and fields[2] == "fuse.nczfs":
            mnt = fields[1].replace("\\040", " ")
            control = read_control(mnt)
            reply = request(control["socket"], control["pid"], "sync")
            assert reply["ok"], reply
