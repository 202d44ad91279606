"""Small files of a local directory read together (a base of ``DirectoryStore``): the entries and
bytes of a few files in one call, so that a reader walking a directory's small files costs one
worker thread's hop per batch instead of two per file (``nczfs.cache.localahead``)."""

from __future__ import annotations

import contextlib
import os
import stat as stat_mod
from typing import Callable

from nczfs.store.directory.longpaths import LongPaths
from nczfs.store.fileversions import version_of
from nczfs.store.optional import SmallFile
from nczfs.store.values import DirEntry

_O_READ = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW


class SmallFiles(LongPaths):
    """``read_small`` of the directory backend, over its backing paths."""

    #: a file's entry from its name, key and ``lstat`` (the store's)
    _entry_of: Callable[[str, str, os.stat_result], DirEntry]

    def read_small(self, keys: list[str], limit: int) -> list[SmallFile]:
        """Each key's entry (its ``lstat``) and, for a regular file of at most ``limit`` bytes,
        its bytes, read from the file the entry names (checked by ``fstat``: a file replaced or
        written meanwhile gives no bytes). Keys missing, or failing to stat, are left out. Every
        file is opened and its reading asked for (``POSIX_FADV_WILLNEED``) before the first is
        read: on a cold disk the reads are then in flight together, not one after another."""
        opened: list[tuple[str, os.stat_result, int | None]] = []
        try:
            for key in keys:
                try:
                    with self._at(key) as (p, d):
                        st = os.stat(p, dir_fd=d, follow_symlinks=False)
                        small = stat_mod.S_ISREG(st.st_mode) and st.st_size <= limit
                        opened.append((key, st, self._opened(p, d, st.st_size) if small else None))
                except OSError:
                    continue  # gone, or unreadable: its own lookup says why
            return [(key, self._entry_of(key.rpartition("/")[2], key, st), None if fd is None else self._bytes(fd, st))
                    for key, st, fd in opened]
        finally:
            for _, _, fd in opened:
                if fd is not None:
                    os.close(fd)

    @staticmethod
    def _opened(p: str, d: int | None, size: int) -> int | None:
        try:
            fd = os.open(p, _O_READ, dir_fd=d)
        except OSError:
            return None
        if size:
            with contextlib.suppress(OSError):  # a hint: a file system may not take it
                os.posix_fadvise(fd, 0, size, os.POSIX_FADV_WILLNEED)
        return fd

    @staticmethod
    def _bytes(fd: int, st: os.stat_result) -> bytes | None:
        try:
            if version_of(os.fstat(fd)) != version_of(st):
                return None
            data = os.pread(fd, st.st_size + 1, 0)
        except OSError:
            return None
        return data if len(data) == st.st_size else None
