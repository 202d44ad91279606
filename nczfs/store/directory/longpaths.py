"""Paths of any length below a root directory (the directory backend's files).

The kernel refuses a path of PATH_MAX (4,096 bytes with the NUL) or longer. A key whose backing
path is shorter than :data:`DIRECT_PATH_BYTES` is used whole; a longer one is reached from the
root one directory at a time (``openat``), so every key works whatever the length of the root's
own path.
"""

from __future__ import annotations

import contextlib
import os
import stat as stat_mod
from collections.abc import Callable
from typing import Any, Iterator

from nczfs.toolbox.errors import NotADirectory
from nczfs.store.keys import parent_of

#: a backing path shorter than this is used whole; a longer one is reached a directory at a
#: time (the kernel refuses paths of PATH_MAX, 4,096 bytes with the NUL, and longer)
DIRECT_PATH_BYTES = 4000
#: bytes of path opened in one step when walking a long one
WALK_STEP_BYTES = 3000

_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class LongPaths:
    """The backing paths of keys below ``root``, of any length (a base of ``DirectoryStore``)."""

    root: str

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key) if key else self.root

    def _open_dir(self, prefix: str) -> int:
        """A descriptor of the directory ``prefix``, opened a few names at a time from the root."""
        fd = os.open(self.root, _O_DIR)
        parts = prefix.split("/") if prefix else []
        i = 0
        try:
            while i < len(parts):
                step: list[str] = []
                size = 0
                while i < len(parts) and (not step or size + len(os.fsencode(parts[i])) + 1 < WALK_STEP_BYTES):
                    step.append(parts[i])
                    size += len(os.fsencode(parts[i])) + 1
                    i += 1
                new = os.open("/".join(step), _O_DIR, dir_fd=fd)
                os.close(fd)
                fd = new
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextlib.contextmanager
    def _at(self, key: str) -> Iterator[tuple[str, int | None]]:
        """``key``'s backing path for an os call as ``(path, dir_fd)``: the whole path, or, when
        that is too long for the kernel, its last name and its parent directory's descriptor."""
        full = self._path(key)
        if len(os.fsencode(full)) < DIRECT_PATH_BYTES:
            yield full, None
            return
        fd = self._open_dir(parent_of(key))
        try:
            yield key.rpartition("/")[2], fd
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _dir(self, prefix: str) -> Iterator[str | int]:
        """The directory ``prefix`` as ``os.scandir`` takes it: its path, or a descriptor."""
        if len(os.fsencode(self._path(prefix))) < DIRECT_PATH_BYTES:
            yield self._path(prefix)
            return
        fd = self._open_dir(prefix)
        try:
            yield fd
        finally:
            os.close(fd)

    def _between(self, call: Callable[..., Any], src: str, dst: str, **kwargs: Any) -> None:
        """``call`` (``os.replace``, ``os.rename``, ``os.link``) from ``src``'s backing path to ``dst``'s."""
        with self._at(src) as (s, sd), self._at(dst) as (t, td):
            call(s, t, src_dir_fd=sd, dst_dir_fd=td, **kwargs)

    def _lstat(self, key: str) -> os.stat_result:
        with self._at(key) as (p, d):
            return os.stat(p, dir_fd=d, follow_symlinks=False)

    def _makedirs(self, prefix: str) -> None:
        """Make ``prefix`` and the directories above it that are missing."""
        if not prefix:
            return
        try:
            st = self._lstat(prefix)
        except FileNotFoundError:
            self._makedirs(parent_of(prefix))
            try:
                with self._at(prefix) as (p, d):
                    os.mkdir(p, dir_fd=d)
            except FileExistsError:
                pass
            return
        if not stat_mod.S_ISDIR(st.st_mode):
            raise NotADirectory(f"{prefix!r}: a parent is a file")
