"""Whole-tree snapshots for real-mount tests: a mount, a plain directory or a backend, as one dict.

A snapshot maps each relative path (``/``-separated) to the file's bytes, or to :data:`DIR`
for a directory. Comparing two snapshots compares names, types and contents in one assert.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.helpers import keyed_differences

DIR = "<dir>"

Snapshot = dict[str, "bytes | str"]


def snapshot(root: str | os.PathLike) -> Snapshot:
    """Every entry under ``root`` through ``os.*`` calls; anything but files and directories fails."""
    root = os.fspath(root)
    out: Snapshot = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for name in dirnames + filenames:
            key = name if rel == "." else f"{rel}/{name}"
            full = os.path.join(dirpath, name)
            mode = os.lstat(full).st_mode
            if stat.S_ISDIR(mode):
                out[key] = DIR
            elif stat.S_ISREG(mode):
                with open(full, "rb") as f:
                    out[key] = f.read()
            else:
                raise AssertionError(f"{full}: neither a file nor a directory ({stat.filemode(mode)})")
    return out


def keeps_directories(backend) -> bool:
    """True if empty directories persist in the backend's medium (a directory tree does; S3 won't)."""
    return backend.name in ("directory", "zip")


def backend_dirs(backend) -> set[str]:
    """The directories the medium holds (backends that keep them)."""
    if backend.name == "zip":
        return backend.dirs()
    return {str(p.relative_to(backend.root)) for p in Path(backend.root).rglob("*") if p.is_dir()}


def backend_snapshot(backend) -> Snapshot:
    """What the medium holds: objects read through the backdoor, plus its directories."""
    out: Snapshot = {key: backend.read(key) for key in backend.keys()}
    if keeps_directories(backend):
        out.update({d: DIR for d in backend_dirs(backend)})
    else:
        for key in list(out):
            parts = key.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                out["/".join(parts[:i])] = DIR
    return out


def as_stored(snap: Snapshot, backend) -> Snapshot:
    """``snap`` as ``backend`` can hold it: without empty directories unless it keeps them."""
    if keeps_directories(backend):
        return dict(snap)
    out = {k: v for k, v in snap.items() if v != DIR}
    for key in list(out):
        parts = key.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            out["/".join(parts[:i])] = DIR
    return out


def diff_summary(a: Snapshot, b: Snapshot, names: tuple[str, str] = ("left", "right")) -> str:
    """A short human description of how two snapshots differ (for assertion messages)."""
    said = {"missing": lambda k: f"only in {names[0]}: {k} ({_describe(a[k])})",
            "extra": lambda k: f"only in {names[1]}: {k} ({_describe(b[k])})",
            "changed": lambda k: f"differs: {k}: {names[0]} {_describe(a[k])} vs {names[1]} {_describe(b[k])}"}
    lines = [said[how](k) for how, k in keyed_differences(a, b)]
    return "\n".join(lines[:50]) + ("\n..." if len(lines) > 50 else "")


def _describe(v: "bytes | str") -> str:
    if v == DIR:
        return "dir"
    assert isinstance(v, bytes)
    return f"{len(v)} bytes {v[:24]!r}{'...' if len(v) > 24 else ''}"
