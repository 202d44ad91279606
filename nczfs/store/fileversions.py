"""The versions of files in a local directory, and renames made only over the version expected.

A regular file's version is its inode number, mtime (ns) and size (:func:`version_of`): a rename
over it (every atomic rewrite: the mount's own, zarr's, an editor's) makes a new inode, a write in
place a new mtime or size. ``ctime`` is left out so that a ``chmod`` makes no new version. Blind
spot: a write in place that keeps the size within one tick of the kernel's file clock (some ms)
after the version was taken.

:func:`replace_if` renames a new file over a name only while the name is still version V: its
``lstat`` is compared with V right before the rename (POSIX has no compare-and-rename: a change
another program makes between the two, a few microseconds, is replaced). A rename made only where
no file is (ABSENT) cannot replace one: ``renameat2(RENAME_NOREPLACE)`` or a hard link, one step
(:mod:`.noreplace`).
"""

from __future__ import annotations

import os
import stat as stat_mod
from typing import Callable

from nczfs.errors import Conflict
from nczfs.store.noreplace import rename_noreplace
from nczfs.store.values import ABSENT


def version_of(st: os.stat_result | None) -> str:
    """A regular file's version: its inode, mtime and size ("" for anything else, or nothing)."""
    if st is None or not stat_mod.S_ISREG(st.st_mode):
        return ""
    return f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}"


def check_version(key: str, st: os.stat_result | None, if_version: str | None) -> None:
    """Conflict unless the file ``st`` is version ``if_version`` (ABSENT: there is none; None: any)."""
    if if_version is None:
        return
    if st is None if if_version == ABSENT else version_of(st) == if_version:
        return
    raise Conflict(key, if_version, version_of(st))


def replace_if(key: str, rename: Callable[[Callable[..., None]], None], current: Callable[[], os.stat_result | None],
               if_version: str | None) -> None:
    """``rename(call)`` (which runs ``call(src, dst, src_dir_fd=, dst_dir_fd=)``) over ``key``:
    only while ``current()`` (its ``lstat``, None if absent) is version ``if_version`` (None: any)."""
    if if_version == ABSENT:
        try:
            rename(rename_noreplace)
        except FileExistsError:
            raise Conflict(key, ABSENT, version_of(current())) from None
        return
    check_version(key, current() if if_version is not None else None, if_version)
    rename(os.replace)
