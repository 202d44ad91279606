"""Renames in one step that the plain ``rename`` cannot make: never replacing, or swapping two names.

Linux's ``renameat2(RENAME_NOREPLACE)`` makes a new name only while nothing has it, in one step
(ext4, xfs, btrfs, tmpfs, overlayfs); where the file system or the C library lacks it, a hard link
of the source under the new name (``link`` fails where the name exists, in one step too) and the
source's removal stand in. ``renameat2(RENAME_EXCHANGE)`` swaps two names in one step (the same
file systems); where it is missing, :func:`rename_exchange` says so and the caller falls back.
"""

from __future__ import annotations

import ctypes
import errno
import os

#: ``renameat2``'s flags: fail with EEXIST where ``new`` exists; swap ``old`` and ``new``
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2
#: ``renameat2``'s "the current directory" (``AT_FDCWD``)
_CWD = -100
#: what ``renameat2`` answers where the file system (EINVAL) or the kernel lacks the flag
_MISSING = (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP)


def _renameat2():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        call = libc.renameat2
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


_call = _renameat2()


def _renameat2_with(flag: int, src: str, dst: str, src_dir_fd: int | None, dst_dir_fd: int | None) -> bool:
    """``renameat2`` with ``flag``: True if made, False where it is missing; else its OSError."""
    if _call is None:
        return False
    done = _call(_CWD if src_dir_fd is None else src_dir_fd, os.fsencode(src),
                 _CWD if dst_dir_fd is None else dst_dir_fd, os.fsencode(dst), flag)
    if done == 0:
        return True
    err = ctypes.get_errno()
    if err in _MISSING:
        return False
    raise OSError(err, os.strerror(err), dst)


def rename_noreplace(src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None) -> None:
    """Rename ``src`` to ``dst`` only if ``dst`` does not exist (FileExistsError, nothing
    changed, if it does); paths relative to the directory descriptors, as ``os.rename`` takes them."""
    if _renameat2_with(RENAME_NOREPLACE, src, dst, src_dir_fd, dst_dir_fd):
        return
    os.link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=False)
    os.unlink(src, dir_fd=src_dir_fd)


def rename_exchange(src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None) -> bool:
    """Swap the names ``src`` and ``dst`` (both must exist: else FileNotFoundError) in one step;
    False, nothing changed, where the file system or the C library cannot."""
    return _renameat2_with(RENAME_EXCHANGE, src, dst, src_dir_fd, dst_dir_fd)
