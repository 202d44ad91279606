"""Small files of a local directory read together (a base of ``DirectoryStore``): the entries and
bytes of a few files in one call, so that a reader walking a directory's small files costs one
worker thread's hop per batch instead of two per file (``nczfs.cache.localahead``)."""

from __future__ import annotations

import os
import stat as stat_mod
from typing import Callable, Iterator

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
        written meanwhile gives no bytes). Keys missing, or failing to stat, are left out."""
        return list(self._small(keys, limit))

    def _small(self, keys: list[str], limit: int) -> Iterator[SmallFile]:
        for key in keys:
            try:
                with self._at(key) as (p, d):
                    st = os.stat(p, dir_fd=d, follow_symlinks=False)
                    data = self._bytes(p, d, st) if stat_mod.S_ISREG(st.st_mode) and st.st_size <= limit else None
            except OSError:
                continue  # gone, or unreadable: its own lookup says why
            yield key, self._entry_of(key.rpartition("/")[2], key, st), data

    @staticmethod
    def _bytes(p: str, d: int | None, st: os.stat_result) -> bytes | None:
        try:
            fd = os.open(p, _O_READ, dir_fd=d)
        except OSError:
            return None
        try:
            if version_of(os.fstat(fd)) != version_of(st):
                return None
            data = os.pread(fd, st.st_size + 1, 0)
            return data if len(data) == st.st_size else None
        finally:
            os.close(fd)
