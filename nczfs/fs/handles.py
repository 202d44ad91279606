"""Open files and directories by handle number: what each descriptor the kernel holds is.

A file handle is a :class:`ReadHandle` (opened read-only: its close stores nothing) or a
:class:`WriteHandle` (opened for writing: its writer's close stores the file). Both read the
object version they are pinned to. A :class:`DirHandle` holds the listing the kernel reads
in parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, ClassVar, Iterator

from nczfs.toolbox.errors import InvalidArgument
from nczfs.fs.attrs import Attr
from nczfs.fs.inodes import Node
from nczfs.store.values import DirEntry


@dataclass
class FileHandle:
    node: Node
    #: the object version this handle reads ("" = whatever is current)
    etag: str = ""
    #: bytes of the stored object were read through this handle, or the kernel may hand out its
    #: pages of that version through it (keep_cache): its version is fixed
    served: bool = False
    #: the kernel may keep its cached pages: the object is the version it was at the last open
    keep_cache: bool = False
    #: the kernel holds no pages of the file but of this handle's version (its first open since
    #: the kernel took the inode, or keep_cache): it may be given the file's pages at the open
    pages_ours: bool = False
    #: the process (thread) that opened it, as the kernel said (0: unknown)
    opener: int = 0
    writable: ClassVar[bool] = False

    @staticmethod
    def of(writable: bool) -> type[FileHandle]:
        return WriteHandle if writable else ReadHandle


class ReadHandle(FileHandle):
    """Opened read-only."""

    writable = False


class WriteHandle(FileHandle):
    """Opened for writing (and maybe reading)."""

    writable = True


@dataclass
class DirHandle:
    node: Node
    #: the directory's entries by name, taken at the first readdir; the offsets given to the
    #: kernel are positions in it
    snapshot: list[DirEntry] | None = None
    #: when it was taken (monotonic seconds) and the inode table's removal count then
    taken: float = 0.0
    removals: int = 0


#: ``add(name, attr, next_id) -> bool``: False once the kernel's buffer is full
AddEntry = Callable[[str, Attr, int], bool]


class Handles:
    """The handles of a mount by number (numbers count up from 1 and are never reused)."""

    def __init__(self) -> None:
        self._by_fh: dict[int, FileHandle | DirHandle] = {}
        self._next = 1

    def add(self, handle: FileHandle | DirHandle) -> int:
        fh = self._next
        self._next += 1
        self._by_fh[fh] = handle
        return fh

    def get(self, fh: int) -> FileHandle | DirHandle | None:
        return self._by_fh.get(fh)

    def pop(self, fh: int) -> FileHandle | DirHandle | None:
        return self._by_fh.pop(fh, None)

    def file(self, fh: int) -> FileHandle:
        h = self._by_fh.get(fh)
        if not isinstance(h, FileHandle):
            raise InvalidArgument(f"bad file handle {fh}")
        return h

    def directory(self, fh: int) -> DirHandle:
        h = self._by_fh.get(fh)
        if not isinstance(h, DirHandle):
            raise InvalidArgument(f"bad directory handle {fh}")
        return h

    def on(self, node: Node) -> Iterator[FileHandle]:
        """The open file handles of ``node``."""
        return (h for h in self._by_fh.values() if isinstance(h, FileHandle) and h.node is node)

    def repin(self, node: Node) -> None:
        """The mount itself replaced a node's object: its open handles read the new version."""
        for h in self.on(node):
            h.etag = node.etag
