"""Transparent huge pages for the daemon's heap, asked of glibc's malloc before the mount starts.

A cold read through the mount keeps touching fresh memory: every GET's body is a new buffer of
up to a block that obstore allocates with malloc, and the daemon's heap (one arena:
``mount.reuse_freed_blocks``) grows to the blocks it holds at once before it reuses any. Each
first touch of a 4 KiB page is a page fault. glibc's tunable ``glibc.malloc.hugetlb=1`` has
malloc ask for transparent huge pages (``madvise``) on the memory it gets from the kernel: one
fault per 2 MiB where the kernel grants them on request (``madvise`` in
``/sys/kernel/mm/transparent_hugepage/enabled``; with ``always`` it does so unasked). glibc reads
tunables only when a process starts, so ``nczfs mount`` run as a command runs itself again with
it set once its arguments are parsed, before it mounts; a ``GLIBC_TUNABLES`` that already names it is left as it is (``=0``:
without). docs/PERFORMANCE.md has what it saves.
"""

from __future__ import annotations

import os
import sys

TUNABLE = "glibc.malloc.hugetlb"
THP_MODE = "/sys/kernel/mm/transparent_hugepage/enabled"


def thp_mode(path: str = THP_MODE) -> str | None:
    """The kernel's transparent huge page mode (``always``, ``madvise``, ``never``); None: unknown."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    start, end = text.find("["), text.find("]")
    return text[start + 1 : end] if 0 <= start < end else None


def tunables_with_huge_pages(tunables: str | None, mode: str | None, libc: str | None) -> str | None:
    """The ``GLIBC_TUNABLES`` to run the mount with, from the present one; None: run as it is
    (not glibc, the kernel grants no huge pages on request, or the tunable is already set)."""
    if not (libc or "").startswith("glibc") or mode != "madvise":
        return None
    if any(item.partition("=")[0] == TUNABLE for item in (tunables or "").split(":")):
        return None
    return f"{tunables}:{TUNABLE}=1" if tunables else f"{TUNABLE}=1"


def _libc() -> str | None:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        return None


def run_with_huge_pages() -> None:
    """Run this process's command again with glibc's huge pages asked for, where it has them and
    they are not asked for yet; otherwise (and where the exec fails) return."""
    value = tunables_with_huge_pages(os.environ.get("GLIBC_TUNABLES"), thp_mode(), _libc())
    if value is None:
        return
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(sys.executable, sys.orig_argv, {**os.environ, "GLIBC_TUNABLES": value})
    except OSError:
        return
