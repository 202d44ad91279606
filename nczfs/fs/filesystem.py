"""Filesystem logic over a Store: every FUSE operation, with plain dataclasses in and out.

Nothing here imports pyfuse3; ``fuse_ops.Operations`` is a thin adapter. Errors are nczfs
exceptions and reach the kernel through ``errors.to_errno``.

State kept in memory for the mount's life (the store keeps only objects and, for some
backends, directories): files being written (``Node.content``) until they are uploaded at
flush/fsync/close, files created but not uploaded yet (``Node.pending``), directories made
with mkdir on stores that cannot hold empty ones (``local_dirs``), and chmod/chown/utimens
results (``InodeTable.overrides``).
"""

from __future__ import annotations

import bisect
import errno
import logging
import os
import re
import stat
import tempfile
import time
from dataclasses import dataclass, replace
from typing import Callable

import trio

from nczfs import control
from nczfs.errors import (
    DirectoryNotEmpty,
    Exists,
    FileTooBig,
    InvalidArgument,
    IsADirectory,
    KeyNotFound,
    NczfsError,
    NotADirectory,
    OutcomeUnknown,
    NotSupported,
    ReadOnly,
    Stale,
    WriteLost,
)
from nczfs.cache import default_cache_size
from nczfs.fs.early_upload import EarlyUploads
from nczfs.fs.content import Content, WriteMemory
from nczfs.locks import Lock
from nczfs.fs.inodes import ROOT_INO, InodeTable, Node, Overrides
from nczfs.store.base import ByteRange, DirEntry, FsStats, Meta, ObjectInfo, Staged, Stages, Store, check_key, join, parent_of
from nczfs.threads import run_blocking

log = logging.getLogger(__name__)

RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2



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
_SETTABLE = ("mode", "uid", "gid", "atime_ns", "mtime_ns")
_NO_META = Meta()


@dataclass
class SetattrRequest(Overrides):
    """Fields a setattr call changes (None: unchanged): the overridable ones, and the size."""

    size: int | None = None


@dataclass
class FsOptions:
    uid: int = 0
    gid: int = 0
    #: permission bits of objects and directories are 0o666/0o777 less this (-o umask=)
    umask: int = 0o022
    read_only: bool = False
    metadata_ttl: float = 1.0
    #: bytes of pending writes one file keeps in memory before it moves to a temp file (None:
    #: a quarter of write_memory, at least MIN_SPILL_THRESHOLD)
    spill_threshold: int | None = None
    spill_dir: str | None = None
    #: bytes of pending writes all files together keep in memory; past it, a growing file spills
    #: to a temp file (None: as the read cache's default, an eighth of RAM between 64 MiB and 1 GiB)
    write_memory: int | None = None


@dataclass
class _Handle:
    node: Node
    writable: bool
    #: the object version this handle reads ("" = whatever is current)
    etag: str = ""
    #: bytes of the stored object were read through this handle, or the kernel may hand out its
    #: pages of that version through it (keep_cache): its version is fixed
    served: bool = False
    #: the kernel may keep its cached pages: the object is the version it was at the last open
    keep_cache: bool = False
    #: the process (thread) that opened it, as the kernel said (0: unknown)
    opener: int = 0


#: files stored at once when every pending write is (unmount, ``nczfs sync``)
FLUSH_PARALLEL = 8

#: names clients write and then rename onto the real name: zarr-python's ``<key>.<uuid>.partial``
#: and rsync's ``.<name>.XXXXXX``. Their upload waits for the rename (one PUT under the final key)
TEMP_NAME = re.compile(r"(\.partial$)|(^\.[^/]+\.[A-Za-z0-9]{6}$)")


def is_temp_name(path: str) -> bool:
    return TEMP_NAME.search(path.rpartition("/")[2]) is not None


#: temp names that tell the final one: zarr-python's ``<name>.<uuid4 hex>.partial``, rsync's ``.<name>.XXXXXX``
FINAL_NAME = re.compile(r"(?:(.+)\.[0-9a-f]{32}\.partial)|(?:\.(.+)\.[A-Za-z0-9]{6})")


#: a file's pending writes stay in memory up to a quarter of the mount's write memory, and at
#: least this much, unless the write memory is used up first (lab, 128 MiB in 1 MiB writes:
#: 0.06 s of daemon CPU in memory, 0.15-0.7 s with the second half in a temp file)
MIN_SPILL_THRESHOLD = 64 * 1024 * 1024

#: content in memory larger than this is uploaded through a reader over the pieces written
#: (``set_file``: S3 reads it part by part), not joined into one copy first
UPLOAD_BY_READER_BYTES = 32 * 1024 * 1024


#: a closed file grown by truncate past this size is grown in a temp file (with a hole), not in memory
GROW_IN_MEMORY = 1024 * 1024


#: smaller temp files are not staged: staging costs two more requests (S3: create and complete a
#: multipart upload), which pays only when sending the data takes longer than they do
STAGE_MIN_BYTES = 1024 * 1024


def _stages(staged: tuple[int, Staged], content: Content, key: str) -> bool:
    """Is ``staged`` (content version, upload) the current ``content`` on its way to ``key``?"""
    return staged[0] == content.version and staged[1].key == key


#: files the store checks (metadata) are checked at each write up to this size; larger ones at close
CHECKED_BYTES = 16 * 1024 * 1024


async def _written(content: Content, offset: int, data: bytes) -> bytes:
    """What ``content`` would hold after writing ``data`` at ``offset``."""
    old = await content.getvalue()
    pad = bytes(max(0, offset - len(old)))
    return old[:offset] + pad + bytes(data) + old[offset + len(data):]


def final_name(path: str) -> str | None:
    """The key a temp file will be renamed to, where its name says (else None)."""
    parent, _, name = path.rpartition("/")
    m = FINAL_NAME.fullmatch(name)
    if m is None:
        return None
    return join(parent, m[1] or m[2])


@dataclass
class _DirHandle:
    node: Node
    #: the directory's entries by name, taken at the first readdir; the offsets given to the
    #: kernel are positions in it
    snapshot: list[DirEntry] | None = None
    #: when it was taken (monotonic seconds) and the inode table's removal count then
    taken: float = 0.0
    removals: int = 0


#: ``add(name, attr, next_id) -> bool``: False once the kernel's buffer is full
AddEntry = Callable[[str, Attr, int], bool]


class Filesystem:
    def __init__(self, store: Store, options: FsOptions | None = None):
        self.store = store
        self.opts = options or FsOptions()
        self.table = InodeTable()
        #: directories made by mkdir (or left empty by unlink/rename) on stores without directories
        self.local_dirs: set[str] = set()
        self._handles: dict[int, _Handle | _DirHandle] = {}
        self._next_fh = 1
        self._locks: dict[int, Lock] = {}
        #: the object version each inode had when it was last opened (keep_cache)
        self._opened_etag: dict[int, str] = {}
        #: closed temp files whose data is already sent under their final key (S3: the parts of
        #: a multipart upload), by inode: (content version sent, the staged write)
        self._staged: dict[int, tuple[int, Staged]] = {}
        #: big files sent in parts while they are being written
        self.early = EarlyUploads(store)
        self._started_ns = time.time_ns()
        limit = self.opts.write_memory
        self.write_memory = WriteMemory(default_cache_size() if limit is None else limit)
        threshold = self.opts.spill_threshold
        self.spill_threshold = max(MIN_SPILL_THRESHOLD, self.write_memory.limit // 4) if threshold is None else threshold
        self.file_mode = 0o666 & ~self.opts.umask
        self.dir_mode = 0o777 & ~self.opts.umask
        #: the user the daemon runs as: what it creates shows as ``-o uid=``/``gid=``
        self._daemon_uid, self._daemon_gid = os.getuid(), os.getgid()
        #: ``(opener, ino, openers) -> bool``: is a close of a description opened by thread
        #: ``opener`` another process's (holders.py)? None: cannot tell, every close stores
        self.someone_elses_close: Callable[[int, int, list[int]], bool] | None = None
        #: ``(ino)``: the kernel's attributes of that file (its size) are out of date (fuse_ops.py)
        self.attrs_changed: Callable[[int], None] | None = None
        self.stats = {"write.closes-not-storing": 0}

    # ------------------------------------------------------------------ helpers

    @property
    def read_only(self) -> bool:
        """Mounted read-only, or over a store that cannot be written."""
        return self.opts.read_only or self.store.read_only

    def _writable(self, what: str) -> None:
        if self.read_only:
            raise ReadOnly(f"{what!r}: mounted read-only")
        if self.store.read_only_key(what):
            raise ReadOnly(f"{what!r}: a read-only file")

    def _now(self) -> float:
        return time.monotonic()

    def _fresh(self, node: Node) -> bool:
        return node.fetched >= 0 and self._now() - node.fetched < self.opts.metadata_ttl

    def _record(self, node: Node, info: ObjectInfo) -> None:
        """What the store just said of a node's object; trusted for ``metadata_ttl``."""
        kept = self._kept_mtime(node, info)
        node.size, node.mtime_ns, node.fetched = info.size, info.mtime_ns if kept is None else kept, self._now()
        node.etag = info.etag
        self._record_meta(node, info.meta)

    def _kept_mtime(self, node: Node, info: ObjectInfo) -> int | None:
        """For an answer without attributes (an S3 listing, HEAD or PUT): the mtime the store
        keeps for that version, known from before (S3's LastModified has whole seconds only);
        a new version (an upload replaced S3's metadata) has none until one is written."""
        if info.meta is not None or node.meta is None or node.meta.mtime_ns is None:
            return None
        if info.etag == node.etag:
            return node.meta.mtime_ns
        node.meta = replace(node.meta, mtime_ns=None)
        return None

    def _record_meta(self, node: Node, meta: Meta | None) -> None:
        """The attributes the store keeps for a node (None: it said none; what is known stays)."""
        if meta is None:
            return
        node.meta = meta
        if meta.mtime_ns is not None and node.content is None:
            node.mtime_ns = meta.mtime_ns
        if meta.file_type and not node.is_dir:
            node.ftype = meta.file_type
        self.table.identify(node, meta.ident)

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
        self.store.check_new_key(path)
        return path

    def _owner(self, who: Caller | None, parent: Node) -> tuple[int, int, bool]:
        """(uid, gid) of an entry ``who`` makes in ``parent``, and whether ``parent`` has its
        set-group-ID bit (the new entry takes its group, a new directory the bit too). The
        user who mounted creates as ``-o uid=``/``gid=``; another user (``allow_other``) as
        themselves."""
        uid = self.opts.uid if who is None or who.uid is None or who.uid == self._daemon_uid else who.uid
        gid = self.opts.gid if who is None or who.gid is None or who.gid == self._daemon_gid else who.gid
        parent_attr = self.attr(parent)
        sgid = bool(parent_attr.mode & stat.S_ISGID)
        if sgid:
            gid = parent_attr.gid
        return uid, gid, sgid

    def _initial_attrs(self, path: str, ftype: int, mode: int, uid: int, gid: int, *, applied: bool = False) -> None:
        """A new entry's mode (0 included) and owner, and its times: kept as overrides where the
        store does not show them itself (``applied``: a live store holds them already), only
        when they differ from the mount's defaults (then written to a store that keeps them)."""
        now = time.time_ns()
        self.table.overrides.pop(path, None)
        if applied:
            return
        live = self.store.live_meta
        default = self.dir_mode if ftype == stat.S_IFDIR else (0o777 if ftype == stat.S_IFLNK else self.file_mode)
        ov = Overrides()
        if ftype == stat.S_IFDIR:  # a file's times are its node's own until its first store
            ov.mtime_ns = ov.atime_ns = ov.ctime_ns = now
        if live or stat.S_IMODE(mode) != default:
            ov.mode = stat.S_IMODE(mode)
        if live or uid != self.opts.uid:
            ov.uid = uid
        if live or gid != self.opts.gid:
            ov.gid = gid
        if ov != Overrides():  # most new files have none: nothing kept per file
            self.table.overrides[path] = ov

    def _dir_changed(self, parent: Node) -> None:
        """An entry was made, removed or renamed in ``parent``: its mtime and ctime are now (a
        live store's directory has them already: it is asked again)."""
        if self.store.live_meta:
            parent.fetched = -1.0
            return
        now = time.time_ns()
        ov = self.table.overrides.setdefault(parent.path, Overrides())
        ov.mtime_ns = ov.ctime_ns = now

    def _ctime_changed(self, node: Node) -> None:
        """A change of ``node`` itself (link, rename): its ctime is now."""
        if self.store.live_meta:
            node.fetched = -1.0
            return
        node.ctime_ns = time.time_ns()

    async def _refresh(self, node: Node) -> None:
        """Ask a live store for a node's attributes again (after a change of them in it)."""
        if not self.store.live_meta or node.detached or node.pending:
            return
        try:
            found = await self.store.entry(node.path)
        except KeyNotFound:
            return
        if found is None or found.is_dir != node.is_dir:
            return
        if found.info is not None:
            self._record(node, found.info)
        else:
            self._record_meta(node, found.meta)
        node.fetched = self._now()

    def _other_names(self, node: Node) -> list[str]:
        """The names of ``node`` but its path (hard links the mount keeps over a store without)."""
        if self.store.live_meta:
            return []
        return sorted(p for p in node.names if p != node.path and self.table.at(p) is node)

    def _unname(self, node: Node, path: str) -> None:
        """``path`` no longer names ``node``; the attributes set through the mount follow it to
        the name it keeps."""
        old = node.path
        self.table.unname(node, path)
        if node.path != old and not node.detached:
            ov = self.table.overrides.pop(old, None)
            if ov is not None:
                self.table.overrides[node.path] = ov
        if len(node.names) <= 1 and not self.store.live_meta:
            node.keep = node.ftype not in (stat.S_IFREG, stat.S_IFDIR) and node.meta is not None and node.keep

    def _has_own_attrs(self, node: Node) -> bool:
        """Does ``node`` show a mode, owner or type other than the mount's defaults?"""
        a = self.attr(node)
        default = self.dir_mode if node.is_dir else (0o777 if node.ftype == stat.S_IFLNK else self.file_mode)
        return (stat.S_IMODE(a.mode) != default or a.uid != self.opts.uid or a.gid != self.opts.gid
                or node.ftype not in (stat.S_IFREG, stat.S_IFDIR))

    def _wanted_meta(self, node: Node) -> Meta:
        """Every attribute the mount shows for ``node``, for a store that keeps them (all are
        sent at once: S3 replaces the whole set)."""
        a = self.attr(node)
        return Meta(mode=a.mode, uid=a.uid, gid=a.gid, atime_ns=a.atime_ns, mtime_ns=a.mtime_ns, ctime_ns=a.ctime_ns,
                    rdev=a.rdev)

    async def _save_meta(self, node: Node) -> None:
        """After an object was stored: the attributes set through the mount (its mode, owner,
        times) reach the store too, where it keeps them (a live store: only those it was not
        given yet, and the mount forgets them; S3, whose PUT drops them: every time its mode,
        owner or type is not the mount's default; times alone are written by ``utime`` of a
        stored file, not again after each upload, which would cost rsync a COPY per file)."""
        ov = self.table.overrides.get(node.path)
        if ov is None or node.detached or all(getattr(ov, f) is None for f in _SETTABLE):
            return
        if not self.store.live_meta and not self._has_own_attrs(node):
            return
        try:
            if self.store.live_meta:
                changes = Meta(**{f: getattr(ov, f) for f in _SETTABLE})
                self._record_meta(node, await self.store.set_meta(node.path, changes, node.is_dir))
                del self.table.overrides[node.path]
            elif self.store.keeps_meta:
                wanted = self._wanted_meta(node)
                for name in (node.path, *self._other_names(node)):
                    self._record_meta(node, await self.store.set_meta(name, wanted, node.is_dir))
        except NotSupported as exc:
            log.debug("%r: attributes kept by the mount only: %s", node.path, exc)

    def _lock(self, node: Node) -> Lock:
        lock = self._locks.get(node.ino)
        if lock is None:
            lock = self._locks[node.ino] = Lock()
        return lock

    def _new_fh(self, handle: _Handle | _DirHandle) -> int:
        fh = self._next_fh
        self._next_fh += 1
        self._handles[fh] = handle
        return fh

    def _handle(self, fh: int) -> _Handle:
        h = self._handles.get(fh)
        if not isinstance(h, _Handle):
            raise InvalidArgument(f"bad file handle {fh}")
        return h

    def _keep_parent(self, path: str) -> None:
        """On stores without directories, a directory emptied through the mount stays (as POSIX)."""
        parent = parent_of(path)
        if parent and not self.store.stores_directories:
            self.local_dirs.add(parent)

    async def _find(self, path: str) -> Node | None:
        """The node at ``path`` if it exists (locally or in the store), else None."""
        if path == "":
            return self.table[ROOT_INO]
        node = self.table.at(path)
        if node is not None and not node.is_dir and (node.pending or node.content is not None):
            return node
        if node is not None and self._fresh(node):
            return node
        if path in self.local_dirs or any(d.startswith(path + "/") for d in self.local_dirs):
            node = self.table.node_for(path, True)
            node.fetched = self._now()
            return node
        found = await self.store.entry(path)
        if found is None:
            return None
        node = self._node_of(path, found)
        if found.info is not None:
            self._record(node, found.info)
        else:
            self._record_meta(node, found.meta)
        node.fetched = self._now()
        return node

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
        for n in self.table.under(path):
            rest = n.path[len(start) :]
            if n.pending and not n.detached and "/" not in rest and rest not in entries:
                entries[rest] = DirEntry(rest, False)
        if not path:
            entries.pop(control.NAME, None)  # the control file's name: shadowed, never listed
        return entries

    def attr(self, node: Node) -> Attr:
        """What ``stat`` shows: what was set through the mount this mount's life (overrides),
        over what the store keeps (node.meta), over the mount's defaults."""
        ov = self.table.overrides.get(node.path) if not node.detached else None
        ov = ov or Overrides()
        m = node.meta or _NO_META
        valid_for = None
        if node.is_dir:
            default, size, nlink = self.dir_mode, 0, m.nlink or 2
            mtime = m.mtime_ns if m.mtime_ns is not None else self._started_ns
        else:
            default = 0o777 if node.ftype == stat.S_IFLNK else self.file_mode
            size = node.content.size if node.content is not None else node.size
            mtime, nlink = node.mtime_ns, 0 if node.detached else (m.nlink or len(node.names))
            if node.content is None and not node.pending and node.fetched >= 0:
                valid_for = max(0.0, self.opts.metadata_ttl - (self._now() - node.fetched))
            elif node.content is None and not node.pending:
                valid_for = 0.0  # listed without its size (a web server's Zarr): the kernel asks getattr
        perm = ov.mode if ov.mode is not None else (stat.S_IMODE(m.mode) if m.mode is not None else default)
        if not node.is_dir and self.store.read_only_key(node.path):
            perm &= ~0o222
        if ov.mtime_ns is not None:
            mtime = ov.mtime_ns
        ctime = max((t for t in (ov.ctime_ns, node.ctime_ns, m.ctime_ns) if t is not None), default=None)
        return Attr(
            ino=node.ino,
            mode=node.ftype | perm,
            nlink=nlink,
            uid=ov.uid if ov.uid is not None else (m.uid if m.uid is not None else self.opts.uid),
            gid=ov.gid if ov.gid is not None else (m.gid if m.gid is not None else self.opts.gid),
            size=size,
            atime_ns=ov.atime_ns if ov.atime_ns is not None else (m.atime_ns if m.atime_ns is not None else mtime),
            mtime_ns=mtime,
            ctime_ns=mtime if ctime is None else max(ctime, mtime),
            valid_for=valid_for,
            rdev=m.rdev,
        )

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
        return self.attr(node)

    async def getattr(self, ino: int) -> Attr:
        node = self.table[ino]
        if node.is_dir and self.store.live_meta and not node.detached and not self._fresh(node):
            await self._refresh(node)
        if node.is_dir or node.detached or node.pending or node.content is not None or self._fresh(node):
            return self.attr(node)
        try:
            info = await self.store.stat(node.path)
        except KeyNotFound:
            if node.fetched < 0:  # named by a listing, never found: missing, not gone
                raise
            raise Stale(f"{node.path!r}: gone from the store") from None
        self._record(node, info)
        return self.attr(node)

    def forget(self, items: list[tuple[int, int]]) -> None:
        for ino, n in items:
            self.table.forget(ino, n)
            if ino not in self.table.by_ino:
                self._locks.pop(ino, None)
                self._opened_etag.pop(ino, None)

    # ------------------------------------------------------------------ attributes

    async def setattr(self, ino: int, req: SetattrRequest, fh: int | None = None) -> Attr:
        node = self.table[ino]
        if any(v is not None for v in vars(req).values()):
            self._writable(node.path)
        if req.size is not None:
            if node.is_dir:
                raise IsADirectory(f"{node.path!r}: is a directory")
            await self._truncate(node, req.size)
        changed = {f: getattr(req, f) for f in _SETTABLE if getattr(req, f) is not None}
        if changed:
            if "mode" in changed:
                changed["mode"] = stat.S_IMODE(changed["mode"])
            await self._set_attrs(node, changed)
        return self.attr(node)

    async def _set_attrs(self, node: Node, changed: dict[str, int]) -> None:
        """chmod, chown, utimens: the store keeps them where it can (a live store alone: its own
        attributes show; S3 and zip: in the object's metadata, and the mount remembers them), else
        the mount does for its life. The ctime is now."""
        stored = not node.pending and not node.detached
        if stored and self.store.live_meta:
            try:
                self._record_meta(node, await self.store.set_meta(node.path, Meta(**changed), node.is_dir))
                node.fetched = self._now()
                return
            except NotSupported as exc:
                log.debug("%r: attributes kept by the mount only: %s", node.path, exc)
        ov = self.table.overrides.setdefault(node.path, Overrides())
        for name, value in changed.items():
            setattr(ov, name, value)
        ov.ctime_ns = time.time_ns()
        if stored and not self.store.live_meta and self.store.keeps_meta:
            try:
                wanted = self._wanted_meta(node)
                for name in (node.path, *self._other_names(node)):
                    self._record_meta(node, await self.store.set_meta(name, wanted, node.is_dir))
            except NotSupported as exc:
                log.debug("%r: attributes kept by the mount only: %s", node.path, exc)

    async def _truncate(self, node: Node, size: int) -> None:
        if size < 0:
            raise InvalidArgument(f"{node.path!r}: negative size")
        limit = self.store.max_object_size
        if limit is not None and size > limit:
            raise FileTooBig(f"{node.path!r}: {size} bytes is more than the {limit} bytes an object can hold")
        self.early.drop(node.ino)
        if node.open_count > 0 or node.content is not None:
            if node.content is None and size == 0:
                node.content = self._make_content(b"", dirty=True)
            content = await self._content(node)
            try:
                await content.truncate(size)
            except OSError as exc:
                if exc.errno == errno.EFBIG:  # the size refused: nothing changed
                    raise FileTooBig(f"{node.path!r}: {size} bytes is more than a temp file can hold") from None
                self._log_lost_write(node.path, exc)
                raise
            self._touched(node)
            return
        # not open: change the object in the store right away; in place where it can (a local
        # file: extended with a hole), else rewritten whole, grown through a sparse temp file
        try:
            info = await self.store.truncate(node.path, size)
        except NotSupported:
            info = await self._rewrite_truncated(node, size)
        self._record(node, info)
        self._clear_mtime(node)
        await self._save_meta(node)

    async def _rewrite_truncated(self, node: Node, size: int) -> ObjectInfo:
        """A stored object cut or extended to ``size`` and stored again: what is kept of it is
        read into a file buffer, which a big size sends to a temp file with a hole for the rest
        (nothing but the old bytes is ever held in memory), and stored from there."""
        old = b"" if size == 0 else await self.store.get(node.path, ByteRange(0, size))
        # past what it holds now, the content goes to a temp file, where the rest is a hole
        content = Content(old, dirty=True, spill_threshold=min(self.spill_threshold, max(len(old), GROW_IN_MEMORY)),
                          spill_dir=self.opts.spill_dir, memory=self.write_memory)
        try:
            try:
                await content.truncate(size)
            except OSError as exc:
                if exc.errno == errno.EFBIG:
                    raise FileTooBig(f"{node.path!r}: {size} bytes is more than a temp file can hold") from None
                raise
            return await self._store_content(content, node.path)
        finally:
            content.close()

    def _touched(self, node: Node) -> None:
        node.mtime_ns = time.time_ns()
        self._clear_mtime(node)

    def _clear_mtime(self, node: Node) -> None:
        ov = self.table.overrides.get(node.path)
        if ov is not None:
            ov.mtime_ns = None

    # ------------------------------------------------------------------ directories

    async def opendir(self, ino: int) -> int:
        node = self.table[ino]
        if not node.is_dir:
            raise NotADirectory(f"{node.path!r}: not a directory")
        return self._new_fh(_DirHandle(node))

    async def readdir(self, fh: int, start_id: int, add: AddEntry) -> None:
        h = self._handles.get(fh)
        if not isinstance(h, _DirHandle):
            raise InvalidArgument(f"bad directory handle {fh}")
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
            node = self._node_of(join(h.node.path, e.name), e)
            # what the listing says is as old as the listing: it does not replace what was learnt
            # since (a write through the mount, a stat), and it is trusted for the TTL from then
            if node.content is None and not node.pending and node.fetched <= h.taken:
                if e.info is not None:
                    self._record(node, e.info)
                    node.fetched = h.taken
                elif e.meta is not None:
                    self._record_meta(node, e.meta)
                    node.fetched = h.taken
            if not add(e.name, self.attr(node), i + 1):
                self.table.release(node)
                return
            node.lookups += 1

    async def _snapshot(self, h: _DirHandle) -> None:
        h.taken, h.removals = self._now(), self.table.removals
        h.snapshot = sorted((await self._children(h.node.path)).values(), key=lambda e: e.name)

    async def releasedir(self, fh: int) -> None:
        self._handles.pop(fh, None)

    async def _new_entry(self, parent_ino: int, name: str, who: Caller | None) -> tuple[Node, str, int, int, bool]:
        """(parent, path, uid, gid, the parent's setgid bit) of an entry about to be made;
        EROFS, EEXIST, ENAMETOOLONG first."""
        parent = self.table[parent_ino]
        path = self._new_path(parent, name)
        self._writable(path)
        if await self._find(path) is not None:
            raise Exists(f"{path!r}: exists")
        return parent, path, *self._owner(who, parent)

    async def mkdir(self, parent_ino: int, name: str, mode: int, who: Caller | None = None) -> Attr:
        parent, path, uid, gid, sgid = await self._new_entry(parent_ino, name, who)
        mode = stat.S_IMODE(mode) | (stat.S_ISGID if sgid else 0)
        if self.store.stores_directories:
            await self.store.mkdir(path)
        else:
            self.local_dirs.add(path)
        node = self.table.node_for(path, True)
        node.fetched = self._now()
        applied = False
        if self.store.live_meta:
            try:
                self._record_meta(node, await self.store.set_meta(path, Meta(mode=stat.S_IFDIR | mode, uid=uid, gid=gid), True))
                applied = True
            except NotSupported as exc:
                log.debug("%r: attributes kept by the mount only: %s", path, exc)
        self._initial_attrs(path, stat.S_IFDIR, mode, uid, gid, applied=applied)
        if not applied and self.store.stores_directories:
            await self._save_meta(node)  # zip: in the directory's entry
        self._dir_changed(parent)
        node.lookups += 1
        return self.attr(node)

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
            info = await self.store.make_node(path, Meta(mode=mode, uid=uid, gid=gid, rdev=rdev), target)
            applied = self.store.live_meta
        node = self.table.node_for(path, False, ftype)
        node.detached = node.pending = False
        self._record(node, info)
        if info.meta is None or not info.meta.file_type:
            # the store said nothing of the type it holds (S3 answers lookups with listings):
            # the mount remembers it for its life
            node.meta = Meta(mode=mode, uid=uid, gid=gid, rdev=rdev)
            node.keep = True
        if target is not None:
            node.target = target
        self._initial_attrs(path, ftype, mode, uid, gid, applied=applied)
        await self._save_meta(node)
        self._dir_changed(parent)
        node.lookups += 1
        return self.attr(node)

    async def readlink(self, ino: int) -> str:
        node = self.table[ino]
        if node.ftype != stat.S_IFLNK:
            raise InvalidArgument(f"{node.path!r}: not a symlink")
        if node.target is None:
            node.target = await self.store.readlink(node.path)
        return node.target

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
        if self.store.stores_directories:
            await self.store.rmdir(path)
        else:
            await self.store.forget_dir(path)
        self.local_dirs.discard(path)
        self._keep_parent(path)
        self.table.overrides.pop(path, None)
        self.table.detach(node)
        self._dir_changed(self.table[parent_ino])

    # ------------------------------------------------------------------ files

    def _make_content(self, data: bytes, dirty: bool) -> Content:
        return Content(data, dirty=dirty, spill_threshold=self.spill_threshold, spill_dir=self.opts.spill_dir,
                       memory=self.write_memory)

    async def _content(self, node: Node) -> Content:
        """The node's writable content, loading the object on first use (O_RDWR rewrites)."""
        if node.content is None:
            data = b"" if node.pending else await self.store.get(node.path)
            if node.content is None:
                node.content = self._make_content(data, dirty=False)
                await node.content.fit()
        return node.content

    async def _keep_open_content(self, node: Node) -> None:
        """Before a file's object is deleted or replaced: open descriptors keep its bytes (POSIX)."""
        if node.open_count > 0 and not node.is_dir:
            await self._content(node)

    async def open(self, ino: int, flags: int, pid: int = 0) -> int:
        node = self.table[ino]
        if node.is_dir:
            raise IsADirectory(f"{node.path!r}: is a directory")
        writable = (flags & os.O_ACCMODE) != os.O_RDONLY
        if writable or flags & os.O_TRUNC:
            self._writable(node.path)
        if not node.pending and node.content is None and not node.detached:
            if not self._fresh(node):
                await self.getattr(ino)  # fail now if the object vanished
        node.open_count += 1
        stored = not node.pending and node.content is None and not node.detached and bool(node.etag)
        reading = stored and not (writable or flags & os.O_TRUNC)
        keep = reading and self._opened_etag.get(ino) == node.etag
        # the kernel's pages of a file opened for writing may hold bytes that are never stored
        # (a refused upload): the next open does not keep them
        self._opened_etag[ino] = node.etag if reading else ""
        # with keep_cache the kernel may hand out its pages of this version through the new
        # descriptor at once: it is pinned to that version as if it had read them
        fh = self._new_fh(_Handle(node, writable, "" if node.pending else node.etag, keep_cache=keep, served=keep,
                                  opener=pid))
        if flags & os.O_TRUNC:  # libfuse asks for atomic O_TRUNC: the kernel sends no setattr
            try:
                await self._truncate(node, 0)
            except BaseException:
                await self.release(fh)
                raise
        return fh

    def keeps_cache(self, fh: int) -> bool:
        """Whether the kernel may keep the pages it cached for this file (unchanged since the last open)."""
        h = self._handles.get(fh)
        return isinstance(h, _Handle) and h.keep_cache

    async def create(self, parent_ino: int, name: str, mode: int, flags: int, pid: int = 0,
                     who: Caller | None = None) -> tuple[int, Attr]:
        parent = self.table[parent_ino]
        path = self._new_path(parent, name)
        self._writable(path)
        existing = await self._find(path)
        if existing is not None:
            if flags & os.O_EXCL:
                raise Exists(f"{path!r}: exists")
            if existing.is_dir:
                raise IsADirectory(f"{path!r}: is a directory")
            fh = await self.open(existing.ino, flags, pid)  # open() handles O_TRUNC
            existing.lookups += 1
            return fh, self.attr(existing)
        node = self.table.node_for(path, False, stat.S_IFREG)
        node.pending = True
        node.detached = False
        node.meta = None
        node.content = self._make_content(b"", dirty=True)
        node.size, node.mtime_ns, node.fetched = 0, time.time_ns(), self._now()
        uid, gid, _ = self._owner(who, parent)
        self._initial_attrs(path, stat.S_IFREG, mode, uid, gid)
        self._dir_changed(parent)
        node.lookups += 1
        node.open_count += 1
        return self._new_fh(_Handle(node, True, opener=pid)), self.attr(node)

    async def read(self, fh: int, offset: int, size: int) -> bytes:
        h = self._handle(fh)
        node = h.node
        if node.content is not None:
            return await node.content.read(offset, size)
        if node.pending or size == 0:
            return b""
        asked = size
        if h.etag and h.etag == node.etag:  # the version read is the one whose size is known
            if offset >= node.size:
                return b""
            # a read across the end (direct I/O passes the reader's sizes on) asks for no bytes
            # past it: a block past the end would cost a GET and a HEAD
            size = min(size, node.size - offset)
        # pinned to the version seen at open: a remote rewrite gives ESTALE, never a mix of two
        if h.etag and node.etag and h.etag != node.etag:  # a newer version is known
            if h.served:
                # not the old version's bytes either: they would enter the kernel's pages of
                # the file, which every descriptor shares
                raise Stale(f"{node.path!r}: the object changed in the store while open")
            h.etag = node.etag
            self._switched_version(node)
        rng = ByteRange(offset, offset + size)
        try:
            data = await self.store.get_version(node.path, rng, h.etag or None)
        except Stale:
            if h.served:
                raise
            # nothing read through this handle yet: it may as well read the current version
            self._record(node, await self.store.stat(node.path))
            h.etag = node.etag
            self._switched_version(node)
            size = min(asked, node.size - offset)  # of the new version
            data = await self.store.get_version(node.path, ByteRange(offset, offset + size), h.etag or None) if size > 0 else b""
        h.served = True
        if h.etag != node.etag:  # the version changed meanwhile: the next open drops the kernel's pages
            self._opened_etag.pop(node.ino, None)
        return data

    def _switched_version(self, node: Node) -> None:
        """A descriptor that had read nothing yet moved to the object's current version: the
        kernel may still hold the old version's size, and reads no further than that."""
        if self.attrs_changed is not None:
            self.attrs_changed(node.ino)

    async def write(self, fh: int, offset: int, data: bytes) -> int:
        h = self._handle(fh)
        if not h.writable:
            raise InvalidArgument(f"{h.node.path!r}: not open for writing")
        node = h.node
        content = await self._content(node)
        if self.store.checks_content(node.path) and max(content.size, offset + len(data)) <= CHECKED_BYTES:
            try:
                await self.store.check_content(node.path, await _written(content, offset, data))
            except NczfsError as exc:
                # refused content: the file is not stored at close either (the store keeps its object)
                content.write_error = content.write_error or OSError(exc.errno, str(exc))
                raise
        self.early.writing(node.ino, offset, len(data))
        try:
            await content.write(offset, data)
        except OSError as exc:
            self._log_lost_write(node.path, exc)
            raise
        self._touched(node)
        if self.early.watches(node.ino, content) and not node.detached:
            key = final_name(node.path) if self._deferred(node) else node.path  # a temp file's: its final name
            if key is not None:
                self.early.wrote(node.ino, key, content)
        return len(data)

    def _log_lost_write(self, key: str, exc: OSError) -> None:
        log.error("write to %r failed: %s (temp files go to %s); the file will not be stored until truncated to "
                  "nothing", key, exc.strerror or exc, self.opts.spill_dir or tempfile.gettempdir())

    async def _upload(self, node: Node) -> None:
        """Send a node's pending content to the store as one object; errors propagate."""
        async with self._lock(node):
            content = node.content
            if content is None or not content.dirty or node.detached:
                return
            version = content.version
            try:
                if content.write_error is not None:
                    raise WriteLost(node.path, content.write_error)
                info = await self.early.finish(node.ino, node.path, content)
                if info is None:
                    info = await self._store_content(content, node.path)
                for other in self._other_names(node):  # a hard link kept by the mount: a copy per name
                    await self.store.copy(node.path, other)
            except Exception as exc:
                content.failed_version, content.failure = version, exc
                log.error("write of %r failed: %s", node.path, str(exc) or repr(exc))
                raise
            content.uploaded_version = version
            node.pending = False
            self._kept_mtime(node, info)
            node.size, node.fetched, node.etag = info.size, self._now(), info.etag
            self._record_meta(node, info.meta)
            self._repin(node)
            if node.mtime_ns < info.mtime_ns:
                node.mtime_ns = info.mtime_ns
            await self._save_meta(node)

    async def _store_content(self, content: Content, key: str) -> ObjectInfo:
        """Store ``content`` as the object ``key``: from memory, or read part by part from its spill
        file or (large) its pieces in memory (S3: a multipart upload)."""
        if content.spilled or content.size > UPLOAD_BY_READER_BYTES:
            f, size = await content.open_reader()
            with f:
                return await self.store.set_file(key, f, size)
        return await self.store.set(key, await content.getvalue())

    async def _store_as(self, node: Node, key: str) -> None:
        """Upload a closed, never-stored file under ``key`` (its rename target), or complete the
        upload its close staged there; errors fail the rename."""
        async with self._lock(node):
            content = node.content
            assert content is not None
            staged = self._staged.pop(node.ino, None)
            try:
                if content.write_error is not None:
                    if staged is not None:
                        await self._abort(staged[1])
                    raise WriteLost(node.path, content.write_error)
                if staged is not None and _stages(staged, content, key):
                    info = await staged[1].commit()  # type: ignore[misc]
                else:
                    if staged is not None:
                        await self._abort(staged[1])
                    info = await self._store_content(content, key)
            except Exception as exc:
                log.error("write of %r (renamed from %r) failed: %s", key, node.path, str(exc) or repr(exc))
                raise
            node.pending = False
            node.size, node.mtime_ns, node.etag, node.fetched = info.size, max(node.mtime_ns, info.mtime_ns), info.etag, self._now()
            self._record_meta(node, info.meta)
            content.close()
            node.content = None

    def _repin(self, node: Node) -> None:
        """The mount itself replaced a node's object: its open handles read the new version."""
        for h in self._handles.values():
            if isinstance(h, _Handle) and h.node is node:
                h.etag = node.etag

    def _deferred(self, node: Node) -> bool:
        """A never-stored temp file (zarr's ``.partial``) waits for its rename to be uploaded once
        (from memory, or streamed from its spill file)."""
        return node.pending and node.content is not None and is_temp_name(node.path)

    async def flush(self, fh: int) -> None:
        h = self._handle(fh)
        node = h.node
        if node.content is None or not node.content.dirty or node.detached:
            return
        if not await self._closer_is_the_writer(h):
            self.stats["write.closes-not-storing"] += 1
            return
        content = node.content
        if content.failed_version == content.version and isinstance(content.failure, OutcomeUnknown):
            # unchanged since its last upload (an fsync's) got no answer at all: the same answer
            # at once, not another round of the store's attempts against a store that just
            # answered none of them (S3 against a stopped server: minutes)
            raise content.failure
        if not self._deferred(node):
            await self._upload(node)
        else:
            await self._stage(node)

    async def _closer_is_the_writer(self, h: _Handle) -> bool:
        """May this close (FLUSH) be the writer's, which stores the file? Not if the descriptor
        was opened read-only (a reader's close does not store another's half-written data), nor
        if the process that opened it still holds it (holders.py): the close is of a copy a
        child inherited (fork, exec) or of a duplicate; the opener's own close stores the file,
        and the last close of all (release) does if the opener never closes it."""
        if not h.writable:
            return False
        if not h.opener or self.someone_elses_close is None:
            return True
        openers = [o.opener for o in self._handles.values() if isinstance(o, _Handle) and o.node is h.node]
        return not await run_blocking(self.someone_elses_close, h.opener, h.node.ino, openers)

    async def _stage(self, node: Node) -> None:
        """A closed temp file whose name tells its final one (zarr's ``.partial``): its data is
        sent now, invisibly (S3: multipart parts), so that the rename only has to complete the
        upload (renames in one directory run one at a time in the kernel; uploads at close do
        not). Best effort: if the store cannot, the rename uploads the data as before."""
        final = final_name(node.path)
        if final is None:
            return
        async with self._lock(node):
            content = node.content
            if content is None or node.detached or not self._deferred(node) or content.write_error is not None:
                return
            early = await self.early.stage(node.ino, final, content)  # sent while it was written
            if early is not None:
                old = self._staged.pop(node.ino, None)
                if old is not None:
                    await self._abort(old[1])
                self._staged[node.ino] = (content.version, early)
                return
            if content.size < STAGE_MIN_BYTES:
                return
            if content.spilled:  # not read back into memory: the rename streams it from its file
                return
            old = self._staged.pop(node.ino, None)
            if old is not None:
                if _stages(old, content, final):
                    self._staged[node.ino] = old
                    return
                await self._abort(old[1])
            try:
                staged = await self.store.stage(final, await content.getvalue()) if isinstance(self.store, Stages) else None
            except Exception as exc:  # noqa: BLE001 - the rename stores it, and reports what fails then
                log.debug("%r: not staged under %r: %s", node.path, final, exc)
                return
            if staged is not None:
                self._staged[node.ino] = (content.version, staged)

    async def _abort(self, staged: Staged) -> None:
        try:
            await staged.abort()  # type: ignore[misc]
        except Exception as exc:  # noqa: BLE001 - invisible parts; the store's close aborts what is left
            log.warning("%r: staged upload not aborted: %s", staged.key, exc)

    async def fsync(self, fh: int) -> None:
        await self._upload(self._handle(fh).node)
        await self.store.sync()

    async def release(self, fh: int) -> None:
        h = self._handles.pop(fh, None)
        if not isinstance(h, _Handle):
            return
        node = h.node
        node.open_count -= 1
        failed = False
        content = node.content
        # a reader's release leaves a writer's file to the writer (or to the last release of all)
        if (content is not None and content.dirty and not node.detached and not self._deferred(node)
                and (h.writable or node.open_count == 0)):
            # the close() before this release already tried and reported a failure: retrying
            # here could store data its writer was told was not stored, at a random later time
            if content.failed_version == content.version:
                failed = True
            else:
                try:
                    await self._upload(node)
                except Exception:
                    failed = True
            if failed and isinstance(content.failure, OutcomeUnknown):
                log.error("%r: data written through the mount may or may not have been stored: the store never "
                          "answered its upload (outcome unknown; the object may still change to it)", node.path)
            elif failed:
                log.error("%r: data written through the mount was not stored and is lost", node.path)
        if node.open_count == 0 and node.content is not None and not (self._deferred(node) and not node.detached):
            self.early.drop(node.ino)
            node.content.close()
            node.content = None
            node.fetched = -1.0
            if failed and node.pending:
                node.pending = False
                self.table.detach(node)
        self.table.release(node)

    async def unlink(self, parent_ino: int, name: str) -> None:
        path, node = await self._existing_child(parent_ino, name)
        if node.is_dir:
            raise IsADirectory(f"{path!r}: is a directory")
        self._dir_changed(self.table[parent_ino])
        if not node.pending and any(p != path and self.table.at(p) is node for p in node.names):
            await self.store.delete(path)  # one name of a file with others (a hard link)
            self._unname(node, path)
            await self._refresh(node)  # its link count and ctime
            self._ctime_changed(node)
            return
        await self._keep_open_content(node)
        self.early.drop(node.ino)
        if not node.pending:
            await self.store.delete(path)
        staged = self._staged.pop(node.ino, None)
        if staged is not None:
            await self._abort(staged[1])
        self._keep_parent(path)
        self.table.overrides.pop(path, None)
        self.table.detach(node)

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
            await self._upload(node)
        self._dir_changed(parent)
        if self.store.live_meta and not node.pending and not node.detached:
            try:
                info = await self.store.link(node.path, path)
            except NotSupported:
                pass
            else:
                self.table.add_name(node, path)
                self._record(node, info)
                node.lookups += 1
                return self.attr(node)
        # the store keeps a copy under the new name; the mount keeps both names one file (one
        # inode, a link count of 2, every change through either name made to both copies) for its life
        if node.content is not None:
            await self.store.set(path, await node.content.getvalue())
        elif node.ftype == stat.S_IFREG:
            await self.store.copy(node.path, path)
        else:
            target = await self.readlink(node.ino) if node.ftype == stat.S_IFLNK else None
            await self.store.make_node(path, self._wanted_meta(node), target)
        self.table.add_name(node, path)
        node.keep = True
        self._ctime_changed(node)
        if self.store.keeps_meta and not self.store.live_meta:
            await self.store.set_meta(path, self._wanted_meta(node))
        node.lookups += 1
        return self.attr(node)

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
            if dst_path.startswith(src_path + "/"):
                raise InvalidArgument(f"{src_path!r}: cannot move a directory into itself")
            if dst is not None:
                if not dst.is_dir:
                    raise NotADirectory(f"{dst_path!r}: not a directory")
                if await self._children(dst_path):
                    raise DirectoryNotEmpty(f"{dst_path!r}: directory not empty")
                if self.store.stores_directories:
                    await self.store.rmdir(dst_path)
                self.local_dirs.discard(dst_path)
                self.table.detach(dst)
            if self.store.stores_directories or await self.store.list_prefix(src_path):
                await self.store.rename_dir(src_path, dst_path)
            else:
                await self.store.forget_dir(src_path)  # S3: folders a server keeps when emptied
            start = src_path + "/"
            moved = {d for d in self.local_dirs if d == src_path or d.startswith(start)}
            self.local_dirs -= moved
            self.local_dirs |= {dst_path + d[len(src_path) :] for d in moved}
            if not self.store.stores_directories and src_path not in moved:
                self.local_dirs.add(dst_path)  # keep the directory even if it holds only pending files
        else:
            if dst is not None and dst.is_dir:
                raise IsADirectory(f"{dst_path!r}: is a directory")
            if dst is not None:
                await self._keep_open_content(dst)
                self.early.drop(dst.ino)
            self.early.drop(src.ino)  # its parts went to the old key
            if src.pending:
                if self._deferred(src) and src.open_count == 0 and not is_temp_name(dst_path):
                    await self._store_as(src, dst_path)  # the temp file's one upload, under its final key
                    stored_now = True
                elif dst is not None and not dst.pending:
                    await self.store.delete(dst_path)
            else:
                await self.store.rename(src_path, dst_path)
            if dst is not None:
                self._unname(dst, dst_path)
                await self._refresh(dst)  # another name of it stays: its link count and ctime
                self._ctime_changed(dst)
        self.table.overrides.pop(dst_path, None)
        self.table.move(src_path, dst_path, subtree=src.is_dir)
        self._keep_parent(src_path)
        if not (src.is_dir or src.pending or stored_now):
            src.fetched = -1.0
        self._dir_changed(self.table[old_parent])
        self._dir_changed(self.table[new_parent])
        self._ctime_changed(src)
        if stored_now:
            await self._save_meta(src)

    # ------------------------------------------------------------------ whole mount

    async def statfs(self) -> FsStats:
        st = await self.store.statfs()
        if st is None:
            big = 1 << 50
            st = FsStats(big, big, 1 << 32, 1 << 32)
        return st

    def pending_bytes(self) -> int:
        """Bytes of files written and not yet stored (``write.bytes-pending``)."""
        return sum(n.content.size for n in self.table.by_ino.values()
                   if n.content is not None and n.content.dirty and not n.detached)

    async def flush_all(self, retry_failed: bool = True) -> list[str]:
        """Upload every file with pending writes, :data:`FLUSH_PARALLEL` at once (a stalled store
        costs one round of retries, not one a file); returns the keys that could not be stored.
        ``retry_failed=False``: a file whose upload failed with its present content is reported
        without being tried again (a shutdown's second flush, after the signal's)."""
        pending = [n for n in self.table.by_ino.values() if n.content is not None and n.content.dirty and not n.detached]
        stored: set[int] = set()
        limit = trio.CapacityLimiter(FLUSH_PARALLEL)

        async def store(node: Node) -> None:
            async with limit:
                try:
                    await self._upload(node)
                except Exception:
                    return
                stored.add(node.ino)

        async with trio.open_nursery() as nursery:
            for node in pending:
                assert node.content is not None
                if retry_failed or node.content.failed_version != node.content.version:
                    nursery.start_soon(store, node)
        failed = [n.path for n in pending if n.ino not in stored]
        try:
            await self.store.sync()
        except Exception as exc:
            log.error("%s: %s", self.store.describe(), str(exc) or repr(exc))
            failed.append(self.store.describe())
        return failed
