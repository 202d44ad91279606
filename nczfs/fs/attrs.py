"""What ``stat`` shows of a file and how it changes: the store's facts, the mount's overrides, defaults.

A node's attributes are, in order: what was set through the mount this mount's life
(``InodeTable.overrides``: chmod, chown, utimens, and the times changes give), what the store
keeps (``Node.meta``), the mount's defaults (``-o uid=,gid=,umask=``). What the store said of a
node is trusted for ``metadata_ttl`` seconds (``fresh``). Where the store keeps attributes
(``KeepsMeta``; ``live_meta``: its own show, a local directory's), those set through the mount
are written to it.
"""

from __future__ import annotations

import logging
import os
import stat
import time
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Iterator

from nczfs.toolbox.errors import KeyNotFound, NotSupported
from nczfs.fs.inodes import InodeTable, Node
from nczfs.fs.options import FsOptions
from nczfs.store.base import Store
from nczfs.store.capabilities import read_only_key
from nczfs.store.values import ABSENT, Meta, ObjectInfo
from nczfs.store import optional

log = logging.getLogger(__name__)


@dataclass
class Attr:
    ino: int
    mode: int
    nlink: int
    uid: int
    gid: int
    size: int
    atime_ns: int
    mtime_ns: int
    ctime_ns: int
    #: seconds these facts stay as fresh as the daemon's own (None: the metadata TTL): the kernel
    #: keeps them no longer, or it would read a version the daemon has moved on from up to the
    #: size of the one before
    valid_for: float | None = None
    #: the device a character or block special file stands for
    rdev: int = 0


@dataclass(frozen=True)
class Caller:
    """Who sent a request, as the kernel says: new entries belong to this user."""

    pid: int = 0
    uid: int | None = None
    gid: int | None = None


#: attribute fields that setattr changes and the store keeps (ctime follows every change)
SETTABLE = ("mode", "uid", "gid", "atime_ns", "mtime_ns")
_NO_META = Meta()


@dataclass(frozen=True)
class SetattrRequest(Meta):
    """Fields a setattr call changes (None: unchanged): the settable attributes, and the size."""

    size: int | None = None


def _meta(fields: dict[str, int]) -> Meta:
    """The attributes ``fields`` names: the settable ones and the ctime (ints all)."""
    return Meta(mode=fields.get("mode"), uid=fields.get("uid"), gid=fields.get("gid"), atime_ns=fields.get("atime_ns"),
                mtime_ns=fields.get("mtime_ns"), ctime_ns=fields.get("ctime_ns"))


class Attributes:
    """The attributes of the nodes of one mount's inode table."""

    def __init__(self, store: Store, table: InodeTable, opts: FsOptions):
        self.store = store
        self.table = table
        self.opts = opts
        self.started_ns = time.time_ns()
        self.file_mode = 0o666 & ~opts.umask
        self.dir_mode = 0o777 & ~opts.umask
        #: the user the daemon runs as: what it creates shows as ``-o uid=``/``gid=``
        self._daemon_uid, self._daemon_gid = os.getuid(), os.getgid()

    def now(self) -> float:
        return time.monotonic()

    def fresh(self, node: Node) -> bool:
        return node.fetched >= 0 and self.now() - node.fetched < self.opts.metadata_ttl

    def default_mode(self, is_dir: bool, ftype: int) -> int:
        return self.dir_mode if is_dir else (0o777 if ftype == stat.S_IFLNK else self.file_mode)

    # ------------------------------------------------------------------ what the store said

    def record(self, node: Node, info: ObjectInfo) -> None:
        """What the store just said of a node's object; trusted for ``metadata_ttl``."""
        kept = self.kept_mtime(node, info)
        node.size, node.mtime_ns, node.fetched = info.size, info.mtime_ns if kept is None else kept, self.now()
        node.etag = info.etag
        self.record_meta(node, info.meta)

    def kept_mtime(self, node: Node, info: ObjectInfo) -> int | None:
        """For an answer without attributes (an S3 listing, HEAD or PUT): the mtime the store
        keeps for that version, known from before (S3's LastModified has whole seconds only);
        a new version (an upload replaced S3's metadata) has none until one is written."""
        if info.meta is not None or node.meta is None or node.meta.mtime_ns is None:
            return None
        if info.etag == node.etag:
            return node.meta.mtime_ns
        node.meta = replace(node.meta, mtime_ns=None)
        return None

    def record_meta(self, node: Node, meta: Meta | None) -> None:
        """The attributes the store keeps for a node (None: it said none; what is known stays)."""
        if meta is None:
            return
        node.meta = meta
        if meta.mtime_ns is not None and node.content is None:
            node.mtime_ns = meta.mtime_ns
        if meta.file_type and not node.is_dir:
            node.ftype = meta.file_type
        self.table.identify(node, meta.ident)

    def stored(self, node: Node, info: ObjectInfo) -> None:
        """The mount itself just stored the node's content as ``info``."""
        self.table.set_pending(node, False)
        node.size, node.fetched, node.etag = info.size, self.now(), info.etag
        node.seen = info.etag
        self.record_meta(node, info.meta)

    async def refresh(self, node: Node) -> None:
        """Ask a live store for a node's attributes again (after a change of them in it)."""
        if not self.store.capabilities.live_meta or not node.in_store:
            return
        try:
            found = await self.store.entry(node.path)
        except KeyNotFound:
            return
        if found is None or found.is_dir != node.is_dir:
            return
        if found.info is not None:
            self.record(node, found.info)
        else:
            self.record_meta(node, found.meta)
        node.fetched = self.now()

    # ------------------------------------------------------------------ what stat shows

    def of(self, node: Node) -> Attr:
        """What ``stat`` shows: what was set through the mount this mount's life (overrides),
        over what the store keeps (node.meta), over the mount's defaults."""
        ov = (self.table.overrides.get(node.path) if not node.detached else None) or _NO_META
        m = node.meta or _NO_META
        if node.is_dir:
            size, nlink, valid_for = 0, m.nlink or 2, None
            mtime = m.mtime_ns if m.mtime_ns is not None else self.started_ns
        else:
            size, nlink, valid_for = self._file_facts(node, m)
            mtime = node.mtime_ns
        # (asked for every lookup and listed name: conditions, not calls)
        if ov.mode is not None:
            perm = ov.mode
        else:
            perm = stat.S_IMODE(m.mode) if m.mode is not None else self.default_mode(node.is_dir, node.ftype)
        if not node.is_dir and read_only_key(self.store, node.path):
            perm &= ~0o222
        if ov.mtime_ns is not None:
            mtime = ov.mtime_ns
        ctime = mtime  # the latest of the changes known, and never before the mtime
        for t in (ov.ctime_ns, node.ctime_ns, m.ctime_ns):
            if t is not None and t > ctime:
                ctime = t
        return Attr(
            ino=node.ino,
            mode=node.ftype | perm,
            nlink=nlink,
            uid=ov.uid if ov.uid is not None else m.uid if m.uid is not None else self.opts.uid,
            gid=ov.gid if ov.gid is not None else m.gid if m.gid is not None else self.opts.gid,
            size=size,
            atime_ns=ov.atime_ns if ov.atime_ns is not None else m.atime_ns if m.atime_ns is not None else mtime,
            mtime_ns=mtime,
            ctime_ns=ctime,
            valid_for=valid_for,
            rdev=m.rdev,
        )

    def _file_facts(self, node: Node, m: Meta) -> tuple[int, int, float | None]:
        """(size, link count, seconds the kernel may keep them) of a file that is no directory."""
        size = node.content.size if node.content is not None else node.size
        nlink = 0 if node.detached else (m.nlink or len(node.names))
        if node.held:
            return size, nlink, None
        if node.fetched < 0:
            return size, nlink, 0.0  # listed without its size (a web server's Zarr): the kernel asks getattr
        return size, nlink, max(0.0, self.opts.metadata_ttl - (self.now() - node.fetched))

    def has_own(self, node: Node) -> bool:
        """Does ``node`` show a mode, owner or type other than the mount's defaults?"""
        a = self.of(node)
        return (stat.S_IMODE(a.mode) != self.default_mode(node.is_dir, node.ftype) or a.uid != self.opts.uid
                or a.gid != self.opts.gid or node.ftype not in (stat.S_IFREG, stat.S_IFDIR))

    def wanted_meta(self, node: Node) -> Meta:
        """Every attribute the mount shows for ``node``, for a store that keeps them (all are
        sent at once: S3 replaces the whole set)."""
        a = self.of(node)
        return Meta(mode=a.mode, uid=a.uid, gid=a.gid, atime_ns=a.atime_ns, mtime_ns=a.mtime_ns, ctime_ns=a.ctime_ns,
                    rdev=a.rdev)

    # ------------------------------------------------------------------ new entries, changes

    def owner(self, who: Caller | None, parent: Node) -> tuple[int, int, bool]:
        """(uid, gid) of an entry ``who`` makes in ``parent``, and whether ``parent`` has its
        set-group-ID bit (the new entry takes its group, a new directory the bit too). The
        user who mounted creates as ``-o uid=``/``gid=``; another user (``allow_other``) as
        themselves."""
        uid = self.opts.uid if who is None or who.uid is None or who.uid == self._daemon_uid else who.uid
        gid = self.opts.gid if who is None or who.gid is None or who.gid == self._daemon_gid else who.gid
        parent_attr = self.of(parent)
        sgid = bool(parent_attr.mode & stat.S_ISGID)
        if sgid:
            gid = parent_attr.gid
        return uid, gid, sgid

    def initial(self, path: str, ftype: int, mode: int, uid: int, gid: int, *, applied: bool = False) -> None:
        """A new entry's mode (0 included) and owner, and its times: kept as overrides where the
        store does not show them itself (``applied``: a live store holds them already), only
        when they differ from the mount's defaults (then written to a store that keeps them)."""
        now = time.time_ns()
        self.table.overrides.pop(path, None)
        if applied:
            return
        live = self.store.capabilities.live_meta
        kept: dict[str, int] = {}
        if ftype == stat.S_IFDIR:  # a file's times are its node's own until its first store
            kept.update(mtime_ns=now, atime_ns=now, ctime_ns=now)
        if live or stat.S_IMODE(mode) != self.default_mode(ftype == stat.S_IFDIR, ftype):
            kept["mode"] = stat.S_IMODE(mode)
        if live or uid != self.opts.uid:
            kept["uid"] = uid
        if live or gid != self.opts.gid:
            kept["gid"] = gid
        if kept:  # most new files have none: nothing kept per file
            self.table.overrides[path] = _meta(kept)

    def dir_changed(self, parent: Node) -> None:
        """An entry was made, removed or renamed in ``parent``: its mtime and ctime are now (a
        live store's directory has them already: it is asked again)."""
        if self.store.capabilities.live_meta:
            parent.fetched = -1.0
            return
        now = time.time_ns()
        self._override(parent.path, {"mtime_ns": now, "ctime_ns": now})

    def ctime_changed(self, node: Node) -> None:
        """A change of ``node`` itself (link, rename): its ctime is now."""
        if self.store.capabilities.live_meta:
            node.fetched = -1.0
            return
        node.ctime_ns = time.time_ns()

    def touched(self, node: Node) -> None:
        """The content changed through the mount: its mtime is now."""
        node.mtime_ns = time.time_ns()
        self.clear_mtime(node)

    def clear_mtime(self, node: Node) -> None:
        ov = self.table.overrides.get(node.path)
        if ov is not None:
            self.table.overrides[node.path] = replace(ov, mtime_ns=None)

    def _override(self, path: str, changes: dict[str, int]) -> None:
        """The mount shows ``changes`` for ``path`` over what the store keeps, for its life."""
        self.table.overrides[path] = self.table.overrides.get(path, _NO_META).merged(_meta(changes))

    def other_names(self, node: Node) -> list[str]:
        """The names of ``node`` but its path (hard links the mount keeps over a store without)."""
        if self.store.capabilities.live_meta:
            return []
        return sorted(p for p in node.names if p != node.path and self.table.at(p) is node)

    def unname(self, node: Node, path: str) -> None:
        """``path`` no longer names ``node``; the attributes set through the mount follow it to
        the name it keeps."""
        old = node.path
        self.table.unname(node, path)
        if node.path != old and not node.detached:
            ov = self.table.overrides.pop(old, None)
            if ov is not None:
                self.table.overrides[node.path] = ov
        if len(node.names) <= 1 and not self.store.capabilities.live_meta:
            node.keep = node.ftype not in (stat.S_IFREG, stat.S_IFDIR) and node.meta is not None and node.keep

    # ------------------------------------------------------------------ written to the store

    async def set(self, node: Node, changed: dict[str, int]) -> None:
        """chmod, chown, utimens: the store keeps them where it can (a live store alone: its own
        attributes show; S3 and zip: in the object's metadata, and the mount remembers them), else
        the mount does for its life. The ctime is now."""
        stored = node.in_store
        if stored and self.store.capabilities.live_meta:
            try:
                await self._set_live(node, _meta(changed))
                node.fetched = self.now()
                return
            except NotSupported as exc:
                log.debug("%r: attributes kept by the mount only: %s", node.path, exc)
        self._override(node.path, {**changed, "ctime_ns": time.time_ns()})
        if stored and not self.store.capabilities.live_meta and optional.offers(self.store, optional.KeepsMeta):
            await self._send_wanted(node)

    @contextmanager
    def sent_with_upload(self, node: Node) -> Iterator[None]:
        """While ``node`` is uploaded: a store that keeps attributes in the object (S3) sends
        those the mount shows with it, when its mode, owner or type is not the mount's default
        (a file created 0600: no CopyObject after the PutObject; an object rewritten keeps them)."""
        sent = None
        if optional.offers(self.store, optional.KeepsMeta) and not self.store.capabilities.live_meta and not node.detached and self.has_own(node):
            sent = self.wanted_meta(node)
            optional.write_meta(self.store, node.path, sent)
        try:
            yield
        finally:
            if sent is not None:
                optional.write_meta(self.store, node.path, None)

    async def save(self, node: Node, stored: Meta | None = None) -> None:
        """After an object was stored (with the attributes ``stored``, where the store kept some
        with it): the attributes set through the mount (its mode, owner, times) reach the store
        too, where it keeps them (a live store: only those it was not given yet, and the mount
        forgets them; S3, whose PUT drops those it is not sent: every time its mode, owner or
        type is not the mount's default and the upload did not carry them; times alone are
        written by ``utime`` of a stored file, not again after each upload, which would cost
        rsync a COPY per file)."""
        ov = self.table.overrides.get(node.path)
        if ov is None or node.detached or all(getattr(ov, f) is None for f in SETTABLE):
            return
        if stored is not None and not self.store.capabilities.live_meta and stored == self.wanted_meta(node):
            return
        if not self.store.capabilities.live_meta and not self.has_own(node):
            return
        if self.store.capabilities.live_meta:
            try:
                await self._set_live(node, Meta(**{f: getattr(ov, f) for f in SETTABLE}))
                del self.table.overrides[node.path]
            except NotSupported as exc:
                log.debug("%r: attributes kept by the mount only: %s", node.path, exc)
        elif optional.offers(self.store, optional.KeepsMeta):
            await self._send_wanted(node)

    async def _set_live(self, node: Node, changes: Meta) -> None:
        """``changes`` to a live store's own attributes of ``node``. Where a file's mtime is part
        of its version (a local directory that checks writes), the mount's own ``utime`` makes a
        new version: what this mount's writes and renames replace moves with it (one ``stat``)."""
        old = node.etag
        self.record_meta(node, await optional.set_meta(self.store, node.path, changes, node.is_dir))
        if not (self.store.capabilities.checks_writes and old and changes.mtime_ns is not None and not node.is_dir):
            return
        self.record(node, info := await self.store.stat(node.path))
        if node.seen == old:
            node.seen = info.etag
        if node.content is not None and node.content.base == old:
            node.content.base = info.etag

    def moved(self, node: Node, info: ObjectInfo) -> None:
        """``node``'s object was renamed (``info``: the moved object's, as the rename answered)
        while a descriptor holds its content: where the store made the moved object a new
        version (a copy: GCS, Azure, memory), the content's next write replaces that one, not
        the version it was opened at."""
        content = node.content
        if not (self.store.capabilities.checks_writes and content is not None and content.base and content.base != ABSENT):
            return
        content.base = info.etag or None

    async def _send_wanted(self, node: Node) -> None:
        """Every attribute the mount shows for ``node`` to each of its names in the store."""
        try:
            wanted = self.wanted_meta(node)
            for name in (node.path, *self.other_names(node)):
                self.record_meta(node, await optional.set_meta(self.store, name, wanted, node.is_dir))
        except NotSupported as exc:
            log.debug("%r: attributes kept by the mount only: %s", node.path, exc)
