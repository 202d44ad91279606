"""Keys and the tree they form.

Keys are ``/``-separated UTF-8 strings without a leading slash (``g/v/.zarray``). A
directory is nothing but the first segments under a prefix; ``list_dir`` returns the
immediate children of a prefix, objects and implied directories alike, as netCDF-C's
``zmap search`` does.
"""

from __future__ import annotations

import time
from typing import Iterable

from nczfs.toolbox.errors import InvalidKey, NameTooLong
from nczfs.store.values import DirEntry, ObjectInfo

MAX_SEGMENT_BYTES = 255

#: what the data of a write another writer got in before is kept as: ``NAME`` + this + the UTC time
CONFLICT_SUFFIX = ".nczfs-conflict-"


def conflict_name(key: str, now: float | None = None, n: int = 0) -> str:
    """``NAME.nczfs-conflict-YYYYMMDDTHHMMSSZ`` (``-N`` after it if that name is taken)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    return f"{key}{CONFLICT_SUFFIX}{stamp}" + (f"-{n}" if n else "")


def check_key(key: str) -> str:
    """Refuse keys that could escape a prefix or that no medium can hold."""
    if not isinstance(key, str) or not key:
        raise InvalidKey(repr(key), "empty key")
    if key.startswith("/") or key.endswith("/"):
        raise InvalidKey(key, "keys have no leading or trailing '/'")
    if "\x00" in key:
        raise InvalidKey(key, "NUL in key")
    for seg in key.split("/"):
        if seg in ("", ".", ".."):
            raise InvalidKey(key, f"bad path segment {seg!r}")
        if len(seg.encode("utf-8", "surrogateescape")) > MAX_SEGMENT_BYTES:
            raise NameTooLong(f"{key!r}: a segment is longer than {MAX_SEGMENT_BYTES} bytes")
    return key


def check_prefix(prefix: str) -> str:
    """A prefix is ``""`` (the root) or a valid key naming a directory."""
    return prefix if prefix == "" else check_key(prefix)


def join(prefix: str, name: str) -> str:
    return f"{prefix}/{name}" if prefix else name


def parent_of(key: str) -> str:
    return key.rpartition("/")[0]


def usable_name(name: str) -> bool:
    """Can ``name`` (one component of a key) be shown as a file name?"""
    return name not in ("", ".", "..") and "/" not in name and "\\" not in name and "\x00" not in name and len(name.encode()) <= 255


def tree_listings(prefix: str, objects: Iterable[tuple[str, ObjectInfo]]) -> dict[str, list[DirEntry]]:
    """The listings of ``prefix`` and of every directory below it, as ``list_dir`` gives each,
    from every object below ``prefix`` (its key relative to ``prefix``, and its info). A key
    ending in ``/`` is a directory marker; a name that cannot be shown hides what lies below
    it; an object and a directory of one name: the directory wins."""
    dirs: dict[str, dict[str, DirEntry]] = {prefix: {}}
    for rel, info in objects:
        parts = rel.split("/")
        here = prefix
        for depth, name in enumerate(parts):
            if not usable_name(name):
                break
            listing = dirs[here]
            if depth + 1 < len(parts):  # a directory on the way
                listing[name] = DirEntry(name, True)
                here = join(here, name)
                dirs.setdefault(here, {})
            elif name not in listing:
                listing[name] = DirEntry(name, False, info)
    return {d: [entries[n] for n in sorted(entries)] for d, entries in dirs.items()}
