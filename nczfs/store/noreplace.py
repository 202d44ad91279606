"""A rename that never replaces: the new name is made only while nothing has it.

Linux's ``renameat2(RENAME_NOREPLACE)`` does it in one step (ext4, xfs, btrfs, tmpfs, overlayfs);
where the file system or the C library lacks it, a hard link of the source under the new name
(``link`` fails where the name exists, in one step too) and the source's removal stand in.
"""

from __future__ import annotations

import ctypes
import errno
import os

#: ``renameat2``'s flag: fail with EEXIST where ``new`` exists
RENAME_NOREPLACE = 1
#: ``renameat2``'s "the current directory" (``AT_FDCWD``)
_CWD = -100


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


def rename_noreplace(src: str, dst: str, *, src_dir_fd: int | None = None, dst_dir_fd: int | None = None) -> None:
    """Rename ``src`` to ``dst`` only if ``dst`` does not exist (FileExistsError, nothing
    changed, if it does); paths relative to the directory descriptors, as ``os.rename`` takes them."""
    if _call is not None:
        done = _call(_CWD if src_dir_fd is None else src_dir_fd, os.fsencode(src),
                     _CWD if dst_dir_fd is None else dst_dir_fd, os.fsencode(dst), RENAME_NOREPLACE)
        if done == 0:
            return
        err = ctypes.get_errno()
        if err not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):  # EINVAL: the file system has no such flag
            raise OSError(err, os.strerror(err), dst)
    os.link(src, dst, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd, follow_symlinks=False)
    os.unlink(src, dir_fd=src_dir_fd)
