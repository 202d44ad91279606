"""Where a zip archive's objects are: its layout, and the member names it may hold.

Layouts: netCDF-C's (every key below one top directory named after the archive, with directory
entries) and zarr-python's (keys at the archive root); an existing archive keeps its layout.
Member names that could escape the mount (zip-slip) refuse the whole archive.
"""

from __future__ import annotations

import os
import struct
import zipfile

from nczfs.toolbox.errors import InvalidKey, SourceError
from nczfs.store.keys import check_key

LAYOUTS = ("netcdf", "flat")
#: a local file header: its signature, and the lengths of its name and extra field
LOCAL_HEADER = struct.Struct("<4s22xHH")


def bad_member_name(name: str) -> str | None:
    """Why a member name is refused (zip-slip and friends), or None if it is fine."""
    if "\x00" in name:
        return "NUL in the name"
    if "\\" in name:
        return "backslash in the name"
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        return "absolute path"
    segs = name.rstrip("/").split("/")
    if ".." in segs:
        return "'..' in the path"
    if any(s in ("", ".") for s in segs):
        return "empty or '.' path segment"
    return None


def check_member_key(key: str) -> str:
    """A key that can be a member name: valid, UTF-8, and not one zip-slip checks would refuse."""
    check_key(key)
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidKey(key, "zip member names must be valid UTF-8") from None
    if "\\" in key:
        raise InvalidKey(key, "a backslash in a zip member name is refused (zip-slip)")
    return key


def top_name(path: str) -> str:
    """netCDF-C's dataset directory for an archive: its base name minus the last extension."""
    return os.path.splitext(os.path.basename(path))[0]


def detect_layout(infos: list[zipfile.ZipInfo], archive: str) -> tuple[str, str] | None:
    """(layout, top directory) of an archive's members; None when there are none."""
    if not infos:
        return None
    first = infos[0].filename
    if first.endswith("/") and first.count("/") == 1:
        return "netcdf", first[:-1]  # netCDF-C: entry 0 names the dataset
    top = top_name(archive)
    if all(i.filename.startswith(top + "/") for i in infos):
        return "netcdf", top
    return "flat", ""


def check_no_overlap(path: str, infos: list[zipfile.ZipInfo]) -> None:
    """Members whose data would overlap the next member: bytes are missing (a cut archive)."""
    ordered = sorted(infos, key=lambda i: i.header_offset)
    for a, b in zip(ordered, ordered[1:]):
        name = a.orig_filename.encode("utf-8" if a.flag_bits & 0x800 else "cp437", "replace")
        if a.header_offset + LOCAL_HEADER.size + len(name) + a.compress_size > b.header_offset:
            raise SourceError(f"{path}: member {a.filename!r} overlaps the next one (truncated or corrupt archive)")

