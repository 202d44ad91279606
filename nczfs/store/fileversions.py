"""The versions of files in a local directory, and renames made only over the version expected.

A regular file's version is its inode number, mtime (ns) and size (:func:`version_of`): a rename
over it (every atomic rewrite: the mount's own, zarr's, an editor's) makes a new inode, a write in
place a new mtime or size. ``ctime`` is left out so that a ``chmod`` makes no new version. Blind
spot, before Linux 6.13's multigrain timestamps (or on a file system without them): a write in
place that keeps the size within one tick of the kernel's coarse clock after the version was
taken (docs/SEMANTICS.md).

:func:`replace_if` renames a new file over a name only while the name is still version V
(:func:`replace_checked`, with any check of what is there: the zip commit's, of the archive
read), in one step where it can: ``renameat2(RENAME_EXCHANGE)`` swaps the new file with the one there, and
the file swapped out is compared with V (its ``lstat``: a rewrite in place or a rename over the
name made at any time before the swap is seen); not V, the two are swapped back (only while the
name still holds the new file) and the rename is refused. Where the file system or the C library
cannot swap, the name's ``lstat`` is compared with V right before a plain rename (a change another
program makes between the two, a few microseconds, is replaced). A rename made only where no file
is (ABSENT) cannot replace one: ``renameat2(RENAME_NOREPLACE)`` or a hard link, one step
(:mod:`.noreplace`). :func:`remove_if` unlinks a file only while it is version V the same way: it
is renamed aside first, compared there, and put back if it is another.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_mod
import uuid
from typing import Callable

from nczfs.toolbox.errors import Conflict
from nczfs.store.noreplace import rename_exchange, rename_noreplace
from nczfs.store.values import ABSENT

#: temporary files of in-flight writes (and of files being removed); never listed
TMP_MARK = ".nczfs-tmp-"


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


#: ``check(path, dir_fd)``: Conflict unless the file at ``path`` (relative to ``dir_fd``; none
#: there: ``lstat`` finds nothing) is the one a replace expects
Check = Callable[[str, "int | None"], None]


def version_check(key: str, if_version: str) -> Check:
    """The :data:`Check` that a file is version ``if_version`` (ABSENT: that there is none)."""
    def check(path: str, dir_fd: int | None) -> None:
        try:
            st: os.stat_result | None = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        check_version(key, st, if_version)
    return check


def replace_if(key: str, rename: Callable[[Callable[..., None]], None], current: Callable[[], os.stat_result | None],
               if_version: str | None, between: Callable[[str], None] | None = None) -> None:
    """``rename(call)`` (which runs ``call(src, dst, src_dir_fd=, dst_dir_fd=)``) over ``key``:
    only while ``current()`` (its ``lstat``, None if absent) is version ``if_version`` (None: any).
    ``between(key)``: a fault hook run right before the rename (tests)."""
    if if_version is None:
        if between is not None:
            between(key)
        rename(os.replace)
        return
    try:
        replace_checked(key, rename, version_check(key, if_version), if_version == ABSENT, between)
    except FileExistsError:
        raise Conflict(key, ABSENT, version_of(current())) from None


def replace_checked(key: str, rename: Callable[[Callable[..., None]], None], check: Check, absent: bool = False,
                    between: Callable[[str], None] | None = None) -> None:
    """``rename(call)`` over ``key`` only while the file there passes ``check`` (:data:`Check`);
    ``absent``: only where there is none (FileExistsError where there is). ``between(key)``: a
    fault hook run right before the rename (tests). Conflict, nothing changed, if it does not."""
    if between is not None:
        between(key)
    if absent:
        rename(rename_noreplace)
    else:
        rename(lambda src, dst, **fds: _swap_checked(key, src, dst, check, **fds))


def _swap_checked(key: str, src: str, dst: str, check: Check, src_dir_fd: int | None = None,
                  dst_dir_fd: int | None = None) -> None:
    """Swap ``src`` (the new file) with ``dst`` and keep the swap only if what came out passes
    ``check`` (then removed), else swap back and Conflict. Where the swap cannot be made, ``dst``
    is checked right before a plain rename (a change made between the two, microseconds, is replaced)."""
    mine = os.stat(src, dir_fd=src_dir_fd, follow_symlinks=False)
    try:
        swapped = rename_exchange(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
    except FileNotFoundError:  # ``src`` was there a moment ago: nothing is at ``dst``
        check(dst, dst_dir_fd)
        raise Conflict(key, "", "") from None  # a check that passes on no file: refused all the same
    if not swapped:  # no RENAME_EXCHANGE here: the check right before a plain rename
        check(dst, dst_dir_fd)
        os.replace(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)
        return
    try:
        check(src, src_dir_fd)
    except Conflict:
        there = os.stat(dst, dir_fd=dst_dir_fd, follow_symlinks=False)
        if (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino):
            rename_exchange(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)  # back: the new file at src again
        raise
    os.unlink(src, dir_fd=src_dir_fd)


def remove_if(key: str, path: str, dir_fd: int | None, if_version: str, between: Callable[[str], None] | None = None
              ) -> None:
    """Unlink the file ``path`` (in ``dir_fd``) only while it is version ``if_version``: it is
    renamed aside to a temp name first (one step), compared there and removed; another version
    is put back (where no file took the name meanwhile) and refused (Conflict)."""
    if between is not None:
        between(key)
    head = path.rpartition("/")[0]
    aside = f"{head}/{TMP_MARK}{uuid.uuid4().hex}" if head else f"{TMP_MARK}{uuid.uuid4().hex}"
    os.rename(path, aside, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    out = os.stat(aside, dir_fd=dir_fd, follow_symlinks=False)
    if version_of(out) == if_version:
        os.unlink(aside, dir_fd=dir_fd)
        return
    try:
        rename_noreplace(aside, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except FileExistsError:  # a newer file took the name meanwhile: the one moved aside is older
        os.unlink(aside, dir_fd=dir_fd)
    raise Conflict(key, if_version, version_of(out))


def keep_attributes(fd: int, old: os.stat_result) -> None:
    """Give a new file (the temp file of a rewrite) the mode and owner of the file it replaces."""
    with contextlib.suppress(OSError):
        os.fchown(fd, old.st_uid, old.st_gid)
    os.fchmod(fd, stat_mod.S_IMODE(old.st_mode))
