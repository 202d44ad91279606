"""The mounts this process sees (``/proc/self/mountinfo``), and the path the kernel names a mount by.

The kernel names a mount by the real path of its mount point: a mount made on ``/data/link``,
a symlink to ``/data/real``, is listed on ``/data/real``, and so is one made through a
symlinked parent directory. :func:`kernel_path` finds that path without looking at the mount
itself (a ``stat`` of a mount point asks its daemon, which may not answer: stuck, or not
serving yet).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

MOUNTINFO = "/proc/self/mountinfo"
#: symlinks followed at most (the kernel's own limit)
MAX_LINKS = 40


@dataclass(frozen=True)
class Mounted:
    id: int
    path: str
    fstype: str


def table(mountinfo: str = MOUNTINFO) -> list[Mounted]:
    """Every mount, in the order listed (a later one on the same path is on top); [] if unreadable."""
    out = []
    try:
        with open(mountinfo, encoding="utf-8", errors="surrogateescape") as f:
            for line in f:
                fields = line.split(" ")
                try:
                    dash = fields.index("-", 6)
                    out.append(Mounted(int(fields[0]), _unescape(fields[4]), fields[dash + 1]))
                except (ValueError, IndexError):
                    continue
    except OSError:
        return []
    return out


def topmost(path: str, mountinfo: str = MOUNTINFO) -> Mounted | None:
    """The mount on ``path`` (a path as the kernel names mounts), the topmost if several, or None."""
    found = None
    for m in table(mountinfo):
        if m.path == path:
            found = m
    return found


def is_fuse_mount(path: str) -> bool:
    """Is the topmost mount on ``path`` a FUSE file system (nczfs's or another's)?"""
    found = topmost(path)
    return found is not None and found.fstype.startswith("fuse")


def kernel_path(path: str, mountinfo: str = MOUNTINFO) -> str:
    """``path`` as the kernel would name a mount on it: absolute, the parents' symlinks resolved,
    and the last component's symlinks followed unless it is a mount point already (then it is
    not looked at)."""
    mounted = {m.path for m in table(mountinfo)}
    p = os.path.abspath(path)
    for _ in range(MAX_LINKS):
        head, tail = os.path.split(p)
        p = os.path.join(os.path.realpath(head), tail) if tail else head
        if p in mounted or not tail:
            return p
        try:
            target = os.readlink(p)  # not a mount point: reading the link enters no mount
        except OSError:
            return p
        p = os.path.normpath(os.path.join(os.path.dirname(p), target))
    return p


def _unescape(path: str) -> str:
    """A mountinfo path: space, tab, newline and backslash are written as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m[1], 8)), path)
