"""The names of the tree: lookup, getattr, mkdir, mknod, symlink, rmdir, unlink, link, rename.

What the store cannot hold is kept by the mount for its life: directories made on a store
without them (``local_dirs``: an unlink or rename that empties one keeps it, as POSIX does),
the several names of one file where the store keeps a copy per name (hard links), the
attributes the store does not show (attrs.py). A file being written is renamed before its
upload (a temp file's rename commits what its close staged: staging.py).
"""

from __future__ import annotations

import logging
import stat

from nczfs.toolbox.errors import (
    Conflict,
    DirectoryNotEmpty,
    Exists,
    InvalidArgument,
    IsADirectory,
    KeyNotFound,
    NotADirectory,
    NotSupported,
    ReadOnly,
    Stale,
)
from nczfs.fs.attrs import Attr, Caller
from nczfs.fs.inodes import Node
from nczfs.fs.dirnames import Listing
from nczfs.fs.names import is_temp_name
from nczfs.fs.writeback import WriteBack
from nczfs.store import optional
from nczfs.store.capabilities import read_only_key
from nczfs.store.keys import check_key, join, parent_of
from nczfs.store.values import ABSENT, Meta

log = logging.getLogger(__name__)

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


class Namespace(Listing):
    """The operations on names (the base of :class:`~nczfs.fs.filesystem.Filesystem`)."""

    writeback: WriteBack
    #: the object version each inode had when it was last opened (keep_cache)
    _opened_etag: dict[int, str]

    @property
    def read_only(self) -> bool:
        """Mounted read-only, or over a store that cannot be written."""
        return self.opts.read_only or self.store.capabilities.read_only

    def _writable(self, what: str) -> None:
        if self.read_only:
            raise ReadOnly(f"{what!r}: mounted read-only")
        if read_only_key(self.store, what):
            raise ReadOnly(f"{what!r}: a read-only file")

    def _child_path(self, parent: Node, name: str) -> str:
        if not parent.is_dir:
            raise NotADirectory(f"{parent.path!r}: not a directory")
        path = join(parent.path, name)
        check_key(path)
        return path

    def _new_path(self, parent: Node, name: str) -> str:
        """The path of an entry about to be made: refused now if the store could not name it
        (S3: a key over 1,024 bytes), not at its first upload."""
        path = self._child_path(parent, name)
        optional.check_new_key(self.store, path)
        return path

    def _name_left(self, parent: Node, path: str) -> None:
        """``path`` left its directory ``parent`` (rmdir, unlink, rename): the directory's times
        change, and on stores without directories it stays though it may hold nothing now (as
        POSIX). (Files not stored yet imply their directories by themselves: :meth:`_held_dir`.)"""
        self.attrs.dir_changed(parent)
        if parent.path and not self.store.capabilities.stores_directories:
            self.local_dirs.add(parent.path)

    def attr(self, node: Node) -> Attr:
        return self.attrs.of(node)

    # ------------------------------------------------------------------ lookups

    async def lookup(self, parent_ino: int, name: str) -> Attr:
        parent = self.table[parent_ino]
        if name == ".":
            node: Node | None = parent
        elif name == "..":
            node = self.table.at(parent_of(parent.path)) or await self._find(parent_of(parent.path))
        else:
            node = await self._find(self._child_path(parent, name))
        if node is None:
            raise KeyNotFound(join(parent.path, name))
        node.lookups += 1
        return self.attrs.of(node)

    async def getattr(self, ino: int) -> Attr:
        node = self.table[ino]
        if node.is_dir and self.store.capabilities.live_meta and not node.detached and not self.attrs.fresh(node):
            await self.attrs.refresh(node)
        if node.is_dir or node.detached or node.held or self.attrs.fresh(node):
            return self.attrs.of(node)
        try:
            info = await self.store.stat(node.path)
        except KeyNotFound:
            if node.fetched < 0:  # named by a listing, never found: missing, not gone
                raise
            raise Stale(f"{node.path!r}: gone from the store") from None
        self.attrs.record(node, info)
        return self.attrs.of(node)

    def forget(self, items: list[tuple[int, int]]) -> None:
        for ino, n in items:
            self.table.forget(ino, n)
            if ino not in self.table.by_ino:
                self.writeback.forget(ino)
                self._opened_etag.pop(ino, None)

    # ------------------------------------------------------------------ new entries

    async def _new_entry(self, parent_ino: int, name: str, who: Caller | None) -> tuple[Node, str, int, int, bool]:
        """(parent, path, uid, gid, the parent's setgid bit) of an entry about to be made;
        EROFS, EEXIST, ENAMETOOLONG first."""
        parent = self.table[parent_ino]
        path = self._new_path(parent, name)
        self._writable(path)
        if await self._find(path) is not None:
            raise Exists(f"{path!r}: exists")
        return parent, path, *self.attrs.owner(who, parent)

    async def mkdir(self, parent_ino: int, name: str, mode: int, who: Caller | None = None) -> Attr:
        parent, path, uid, gid, sgid = await self._new_entry(parent_ino, name, who)
        mode = stat.S_IMODE(mode) | (stat.S_ISGID if sgid else 0)
        if self.store.capabilities.stores_directories:
            await optional.mkdir(self.store, path)
        else:
            self.local_dirs.add(path)
        node = self.table.node_for(path, True)
        node.fetched = self.attrs.now()
        applied = False
        if self.store.capabilities.live_meta:
            try:
                meta = Meta(mode=stat.S_IFDIR | mode, uid=uid, gid=gid)
                self.attrs.record_meta(node, await optional.set_meta(self.store, path, meta, True))
                applied = True
            except NotSupported as exc:
                log.debug("%r: attributes kept by the mount only: %s", path, exc)
        self.attrs.initial(path, stat.S_IFDIR, mode, uid, gid, applied=applied)
        if not applied and self.store.capabilities.stores_directories:
            await self.attrs.save(node)  # zip: in the directory's entry
        self.attrs.dir_changed(parent)
        node.lookups += 1
        return self.attrs.of(node)

    async def mknod(self, parent_ino: int, name: str, mode: int, rdev: int = 0, who: Caller | None = None) -> Attr:
        """A special file (fifo, socket, character or block device) or an empty regular file."""
        ftype = stat.S_IFMT(mode) or stat.S_IFREG
        if ftype == stat.S_IFDIR:
            raise InvalidArgument(f"{name!r}: mknod of a directory")
        return await self._make_node(parent_ino, name, ftype | stat.S_IMODE(mode), rdev, None, who)

    async def symlink(self, parent_ino: int, name: str, target: str, who: Caller | None = None) -> Attr:
        return await self._make_node(parent_ino, name, stat.S_IFLNK | 0o777, 0, target, who)

    async def _make_node(self, parent_ino: int, name: str, mode: int, rdev: int, target: str | None,
                         who: Caller | None) -> Attr:
        parent, path, uid, gid, _ = await self._new_entry(parent_ino, name, who)
        ftype = stat.S_IFMT(mode)
        if ftype == stat.S_IFREG:
            info = await self.store.set(path, b"")
            applied = False
        else:
            info = await optional.make_node(self.store, path, Meta(mode=mode, uid=uid, gid=gid, rdev=rdev), target)
            applied = self.store.capabilities.live_meta
        node = self.table.node_for(path, False, ftype)
        node.detached = False
        self.table.set_pending(node, False)
        self.attrs.record(node, info)
        if info.meta is None or not info.meta.file_type:
            # the store said nothing of the type it holds (S3 answers lookups with listings):
            # the mount remembers it for its life
            node.meta = Meta(mode=mode, uid=uid, gid=gid, rdev=rdev)
            node.keep = True
        if target is not None:
            node.target = target
        self.attrs.initial(path, ftype, mode, uid, gid, applied=applied)
        await self.attrs.save(node)
        self.attrs.dir_changed(parent)
        node.lookups += 1
        return self.attrs.of(node)

    async def readlink(self, ino: int) -> str:
        node = self.table[ino]
        if node.ftype != stat.S_IFLNK:
            raise InvalidArgument(f"{node.path!r}: not a symlink")
        if node.target is None:
            node.target = await optional.readlink(self.store, node.path)
        return node.target

    # ------------------------------------------------------------------ removals

    async def _existing_child(self, parent_ino: int, name: str) -> tuple[str, Node]:
        """Path and node of an existing entry that is about to be changed (EROFS, ENOENT first)."""
        path = self._child_path(self.table[parent_ino], name)
        self._writable(path)
        node = await self._find(path)
        if node is None:
            raise KeyNotFound(path)
        return path, node

    async def rmdir(self, parent_ino: int, name: str) -> None:
        path, node = await self._existing_child(parent_ino, name)
        if not node.is_dir:
            raise NotADirectory(f"{path!r}: not a directory")
        if await self._children(path):
            raise DirectoryNotEmpty(f"{path!r}: directory not empty")
        if self.store.capabilities.stores_directories:
            await optional.rmdir(self.store, path)
        else:
            await optional.forget_dir(self.store, path)
        self.local_dirs.discard(path)
        self._name_left(self.table[parent_ino], path)
        self.table.overrides.pop(path, None)
        self.table.detach(node)

    async def unlink(self, parent_ino: int, name: str) -> None:
        path, node = await self._existing_child(parent_ino, name)
        if node.is_dir:
            raise IsADirectory(f"{path!r}: is a directory")
        self._name_left(self.table[parent_ino], path)
        if not node.pending and any(p != path and self.table.at(p) is node for p in node.names):
            await self.store.delete(path)  # one name of a file with others (a hard link)
            self.attrs.unname(node, path)
            await self.attrs.refresh(node)  # its link count and ctime
            self.attrs.ctime_changed(node)
            return
        await self.writeback.keep_open_content(node)
        self.writeback.early.drop(node.ino)
        if not node.pending:
            await self.writeback.conflicts.delete(path, node.seen or node.etag)
        await self.writeback.drop_staged(node.ino)
        self.table.overrides.pop(path, None)
        self.table.detach(node)

    # ------------------------------------------------------------------ links

    async def link(self, ino: int, new_parent_ino: int, new_name: str) -> Attr:
        """A hard link where the store has them (a local directory); elsewhere a copy: a file of
        its own under the new name, with the same content and attributes."""
        node = self.table[ino]
        parent = self.table[new_parent_ino]
        path = self._new_path(parent, new_name)
        self._writable(path)
        if node.is_dir:
            raise InvalidArgument(f"{node.path!r}: cannot link a directory")
        if await self._find(path) is not None:
            raise Exists(f"{path!r}: exists")
        if node.content is not None:
            await self.writeback.upload(node)
        self.attrs.dir_changed(parent)
        if self.store.capabilities.live_meta and node.in_store:
            try:
                info = await optional.link(self.store, node.path, path)
            except NotSupported:
                pass
            else:
                self.table.add_name(node, path)
                self.attrs.record(node, info)
                node.lookups += 1
                return self.attrs.of(node)
        await self._copy_as_link(node, path)
        node.lookups += 1
        return self.attrs.of(node)

    async def _copy_as_link(self, node: Node, path: str) -> None:
        """The store keeps a copy under the new name; the mount keeps both names one file (one
        inode, a link count of 2, every change through either name made to both copies) for its life."""
        if node.content is not None:
            await self.store.set(path, await node.content.getvalue())
        elif node.ftype == stat.S_IFREG:
            await self.store.copy(node.path, path)
        else:
            target = await self.readlink(node.ino) if node.ftype == stat.S_IFLNK else None
            await optional.make_node(self.store, path, self.attrs.wanted_meta(node), target)
        self.table.add_name(node, path)
        node.keep = True
        self.attrs.ctime_changed(node)
        if optional.offers(self.store, optional.KeepsMeta) and not self.store.capabilities.live_meta:
            await optional.set_meta(self.store, path, self.attrs.wanted_meta(node))

    # ------------------------------------------------------------------ rename

    async def rename(self, old_parent: int, old_name: str, new_parent: int, new_name: str, flags: int = 0) -> None:
        src_path = self._child_path(self.table[old_parent], old_name)
        dst_path = self._new_path(self.table[new_parent], new_name)
        self._writable(src_path)
        self._writable(dst_path)
        if flags & RENAME_EXCHANGE:
            raise InvalidArgument(f"{src_path!r}: RENAME_EXCHANGE is not supported")
        src = await self._find(src_path)
        if src is None:
            raise KeyNotFound(src_path)
        if src_path == dst_path:
            return
        dst = await self._find(dst_path)
        if dst is src:
            return  # two names of one file (hard links): rename(2) does nothing
        if dst is not None and flags & RENAME_NOREPLACE:
            raise Exists(f"{dst_path!r}: exists")
        stored_now = False
        if src.is_dir:
            await self._rename_dir(src_path, dst_path, dst)
        else:
            stored_now = await self._rename_file(src, src_path, dst_path, dst)
        log.debug("renamed %r to %r", src_path, dst_path)
        self.table.overrides.pop(dst_path, None)
        self.table.move(src_path, dst_path, subtree=src.is_dir)
        self._name_left(self.table[old_parent], src_path)
        if not (src.is_dir or src.pending or stored_now):
            src.fetched, src.seen = -1.0, ""
        self.attrs.dir_changed(self.table[new_parent])
        self.attrs.ctime_changed(src)
        if stored_now:
            await self.attrs.save(src)

    async def _rename_dir(self, src_path: str, dst_path: str, dst: Node | None) -> None:
        """Move a directory's keys in the store (an empty one replaces ``dst``), and its local dirs."""
        if dst_path.startswith(src_path + "/"):
            raise InvalidArgument(f"{src_path!r}: cannot move a directory into itself")
        if dst is not None:
            await self._replace_dir(dst_path, dst)
        if self.store.capabilities.stores_directories or await self.store.list_prefix(src_path):
            await optional.rename_dir(self.store, src_path, dst_path)
        else:
            await optional.forget_dir(self.store, src_path)  # S3: folders a server keeps when emptied
        kept = self.local_dirs.move(src_path, dst_path)
        if not self.store.capabilities.stores_directories and not kept:
            self.local_dirs.add(dst_path)  # keep it even if it holds no key (an S3 folder forgotten)

    async def _replace_dir(self, dst_path: str, dst: Node) -> None:
        """An empty directory a renamed one replaces is removed."""
        if not dst.is_dir:
            raise NotADirectory(f"{dst_path!r}: not a directory")
        if await self._children(dst_path):
            raise DirectoryNotEmpty(f"{dst_path!r}: directory not empty")
        if self.store.capabilities.stores_directories:
            await optional.rmdir(self.store, dst_path)
        self.local_dirs.discard(dst_path)
        self.table.detach(dst)

    async def _rename_file(self, src: Node, src_path: str, dst_path: str, dst: Node | None) -> bool:
        """Move a file's object (a pending one's: nothing yet, or a temp file's one upload under
        its final key: then True) over ``dst``, whose open descriptors keep its bytes."""
        if dst is not None and dst.is_dir:
            raise IsADirectory(f"{dst_path!r}: is a directory")
        if dst is not None:
            await self.writeback.keep_open_content(dst)
            self.writeback.early.drop(dst.ino)
        self.writeback.early.drop(src.ino)  # its parts went to the old key
        stored_now = False
        # replaced only while it is the version this mount saw there, or still absent
        conflicts = self.writeback.conflicts
        condition = conflicts.checked(ABSENT if dst is None or dst.pending else dst.seen or dst.etag) or None
        if not src.pending:
            try:
                moved = await self.store.rename(src_path, dst_path, if_version=condition)
            except Conflict as exc:
                raise conflicts.refused_rename(src_path, exc) from None
            self.attrs.moved(src, moved)
        elif self.writeback.deferred(src) and src.open_count == 0 and not is_temp_name(dst_path):
            await self.writeback.store_as(src, dst_path, condition)  # the temp file's one upload, under its final key
            stored_now = True
        elif dst is not None and not dst.pending:
            await self.store.delete(dst_path)  # src is stored at its close (it implies its directory till then)
        if dst is not None:
            self.attrs.unname(dst, dst_path)
            await self.attrs.refresh(dst)  # another name of it stays: its link count and ctime
            self.attrs.ctime_changed(dst)
        return stored_now
