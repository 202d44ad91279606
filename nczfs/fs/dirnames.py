"""The names in a directory: the store's entries and the mount's own, one name found, a listing read.

A directory shows the store's entries, the directories made through the mount on a store that
cannot hold empty ones (``local_dirs``) and the files created through it and not stored yet
(pending); the last two imply their parent directories (:meth:`Listing._held_dir`). The
control file's name in the root is never listed. A listing the kernel reads in parts is the one
taken at its first part (``DirHandle.snapshot``).
"""

from __future__ import annotations

import bisect

from nczfs.toolbox.errors import KeyNotFound, NotADirectory
from nczfs.fs.attrs import Attributes
from nczfs.fs.handles import AddEntry, DirHandle, Handles
from nczfs.fs.inodes import ROOT_INO, InodeTable, Node
from nczfs.fs.localdirs import LocalDirs
from nczfs.fs.names import CONTROL_NAME
from nczfs.fs.options import FsOptions
from nczfs.store.base import Store
from nczfs.store.keys import join
from nczfs.store.values import DirEntry


class Listing:
    """Finding names and listing directories (the base of the filesystem's operations)."""

    store: Store
    opts: FsOptions
    table: InodeTable
    attrs: Attributes
    handles: Handles
    #: directories made by mkdir (or left empty by unlink/rename) on stores without directories
    local_dirs: LocalDirs

    async def _find(self, path: str) -> Node | None:
        """The node at ``path`` if it exists (locally or in the store), else None."""
        if path == "":
            return self.table[ROOT_INO]
        node = self.table.at(path)
        if node is not None and not node.is_dir and node.held:
            return node
        if node is not None and self.attrs.fresh(node):
            return node
        if self._held_dir(path):
            node = self.table.node_for(path, True)
            node.fetched = self.attrs.now()
            return node
        found = await self.store.entry(path)
        if found is None:
            return None
        node = self._node_of(path, found)
        if found.info is not None:
            self.attrs.record(node, found.info)
        else:
            self.attrs.record_meta(node, found.meta)
        node.fetched = self.attrs.now()
        return node

    def _held_dir(self, path: str) -> bool:
        """The one rule for a directory the mount holds, whatever the store shows (another
        client may remove its last key): one made or kept by the mount (``local_dirs``), or
        above such a one or a pending file (created, not stored yet: ``pending_below``)."""
        return path in self.local_dirs or self.local_dirs.holds_below(path) or path in self.table.pending_below

    def _node_of(self, path: str, e: DirEntry) -> Node:
        """The node a store's entry names: of its type, and one node for the names of one file."""
        attrs = e.attrs
        return self.table.node_for(path, e.is_dir, attrs.file_type if attrs is not None else 0,
                                   attrs.ident if attrs is not None and (attrs.nlink or 1) > 1 else None)

    async def _children(self, path: str) -> dict[str, DirEntry]:
        entries: dict[str, DirEntry] = {}
        try:
            for e in await self.store.list_dir(path):
                if e.is_dir or e.name not in entries:
                    entries[e.name] = e
        except KeyNotFound:
            pass
        start = path + "/" if path else ""
        for d in self.local_dirs:  # a kept directory implies its parents, as a key does
            if d.startswith(start):
                name = d[len(start) :].partition("/")[0]
                entries[name] = DirEntry(name, True)
        for n in self.table.under(path):  # a pending file is listed, and implies its parents
            rest = n.path[len(start) :]
            name, below, _ = rest.partition("/")
            if n.pending and not n.detached and (below or name not in entries):
                entries[name] = DirEntry(name, bool(below))
        if not path:
            entries.pop(CONTROL_NAME, None)  # the control file's name: shadowed, never listed
        return entries

    async def opendir(self, ino: int) -> int:
        node = self.table[ino]
        if not node.is_dir:
            raise NotADirectory(f"{node.path!r}: not a directory")
        return self.handles.add(DirHandle(node))

    async def readdir(self, fh: int, start_id: int, add: AddEntry) -> None:
        h = self.handles.directory(fh)
        if start_id == 0 or h.snapshot is None:
            await self._snapshot(h)
        elif h.removals != self.table.removals and h.snapshot:
            # names were unlinked or renamed through the mount since the listing was taken: go on
            # from a new one after the last name handed out, so that none of them comes back
            last = h.snapshot[min(start_id, len(h.snapshot)) - 1].name
            await self._snapshot(h)
            start_id = bisect.bisect_right([e.name for e in h.snapshot], last)
        assert h.snapshot is not None
        for i in range(start_id, len(h.snapshot)):
            e = h.snapshot[i]
            node = self._listed(h, e)
            if not add(e.name, self.attrs.of(node), i + 1):
                self.table.release(node)
                return
            node.lookups += 1

    def _listed(self, h: DirHandle, e: DirEntry) -> Node:
        """The node of an entry of ``h``'s listing, with what the listing says of it recorded:
        what it says is as old as the listing, so it does not replace what was learnt since (a
        write through the mount, a stat), and it is trusted for the TTL from then."""
        node = self._node_of(join(h.node.path, e.name), e)
        if not node.held and node.fetched <= h.taken:
            if e.info is not None:
                self.attrs.record(node, e.info)
                node.fetched = h.taken
            elif e.meta is not None:
                self.attrs.record_meta(node, e.meta)
                node.fetched = h.taken
        return node

    async def _snapshot(self, h: DirHandle) -> None:
        h.taken, h.removals = self.attrs.now(), self.table.removals
        h.snapshot = sorted((await self._children(h.node.path)).values(), key=lambda e: e.name)

    async def releasedir(self, fh: int) -> None:
        self.handles.pop(fh)
