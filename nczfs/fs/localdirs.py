"""Directories the mount holds whatever the store shows, with counts so a lookup needs no scan.

:func:`count_below` keeps, per directory path, how many of some paths (the directories kept by
the mount, the files not stored yet) lie below it at any depth: one step per level of a path
when it comes or goes, whatever their number. :class:`LocalDirs` is the set of directories made
(or left empty) through the mount on a store without directories, counted that way.
"""

from __future__ import annotations

from typing import Iterator


def count_below(counts: dict[str, int], path: str, step: int) -> None:
    """Add ``step`` to the count of every directory above ``path`` (the root left out)."""
    while "/" in path:
        path = path.rpartition("/")[0]
        n = counts.get(path, 0) + step
        if n:
            counts[path] = n
        else:
            del counts[path]


class LocalDirs:
    """A set of directory paths that also tells, without a scan, whether any lies below a path."""

    def __init__(self) -> None:
        self._dirs: set[str] = set()
        self._below: dict[str, int] = {}

    def __contains__(self, path: object) -> bool:
        return path in self._dirs

    def __iter__(self) -> Iterator[str]:
        return iter(self._dirs)

    def __len__(self) -> int:
        return len(self._dirs)

    def add(self, path: str) -> None:
        if path not in self._dirs:
            self._dirs.add(path)
            count_below(self._below, path, 1)

    def discard(self, path: str) -> None:
        if path in self._dirs:
            self._dirs.remove(path)
            count_below(self._below, path, -1)

    def holds_below(self, path: str) -> bool:
        """Is a kept directory below ``path`` (at any depth)?"""
        return path in self._below

    def move(self, src: str, dst: str) -> bool:
        """Re-key ``src`` and the kept directories below it to ``dst``; True if ``src`` was kept."""
        start = src + "/"
        moved = [d for d in self._dirs if d == src or d.startswith(start)]
        for d in moved:
            self.discard(d)
        for d in moved:
            self.add(dst + d[len(src):])
        return src in moved
