"""The pyfuse3 adapter: decode names, call Filesystem, build pyfuse3 structures, map errors.

Every handler goes through :func:`_translate`, the one place where exceptions become
``FUSEError(errno)``: expected nczfs/OS errors are logged at DEBUG, anything else with a
traceback (and answered with EIO) so that nothing escapes and stops ``pyfuse3.main``.
"""

from __future__ import annotations

import errno
import functools
import gc
import logging
import os
import stat
from collections import Counter
from typing import Any, Awaitable, Callable, TypeVar

import pyfuse3

from nczfs.fuse import control, trio_loop
from nczfs.toolbox.errors import KeyNotFound, NczfsError, first_of, to_errno
from nczfs.fs.attrs import Attr, Caller, SetattrRequest
from nczfs.fs.filesystem import Filesystem
from nczfs.toolbox.logs import TRACE
from nczfs.store import optional

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

#: the control file (fuse/control.py): its name in the root, and its handles' numbers (the
#: filesystem's count up from 1 and never get near)
CONTROL_NAME = os.fsencode(control.NAME)
#: the attribute the mount asks for once at start (mount.py): getxattr answers it ENOSYS
XATTR_PROBE = b"user.nczfs.no-getxattr"
_CONTROL_FH0 = 1 << 62


#: operations whose medium failures the filesystem logs itself (uploads name the key there)
_LOGGED_BY_FILESYSTEM = frozenset({"flush", "fsync", "release"})


def _brief(args: tuple[Any, ...]) -> str:
    """Request arguments for --debug: numbers and short names as they are, data as its length."""
    shown = []
    for a in args:
        if isinstance(a, (int, float, str)) or (isinstance(a, bytes) and len(a) <= 64):
            shown.append(repr(a))
        elif isinstance(a, (bytes, bytearray, memoryview)):
            shown.append(f"<{len(a)} bytes>")
        else:
            shown.append(type(a).__name__)
    return "(" + ", ".join(shown) + ")"


def _own(exc: Exception) -> NczfsError | OSError | None:
    """The error a request answers with its errno: ``exc`` if it is the filesystem's or the
    system's, or the first of a group that holds only such; None for anything else (a bug:
    logged with its traceback, EIO)."""
    return first_of(exc, (NczfsError, OSError))  # type: ignore[return-value]  # one of those kinds


def _translate(fn: F) -> F:
    name = fn.__name__

    @functools.wraps(fn)
    async def wrapper(self: "Operations", *args: Any) -> Any:
        self._requests[name] += 1
        if log.isEnabledFor(TRACE):
            log.log(TRACE, "request %s%s", name, _brief(args))
        try:
            return await fn(self, *args)
        except pyfuse3.FUSEError:
            raise
        except Exception as exc:
            own = _own(exc)
            if own is None:
                log.exception("%s%r failed unexpectedly", fn.__name__, args[:2])
                raise pyfuse3.FUSEError(errno.EIO) from None
            code = to_errno(own)
            if code == errno.EIO and fn.__name__ not in _LOGGED_BY_FILESYSTEM:
                log.warning("%s failed: %s", fn.__name__, own)  # the medium failed: one line, key and cause
            else:
                log.log(TRACE, "%s%r: %s", fn.__name__, args[:2], own)
            raise pyfuse3.FUSEError(code) from None

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps F's signature


def _pid(ctx: Any) -> int:
    """The thread that sent the request (0: not said, as when called without a kernel)."""
    return getattr(ctx, "pid", 0) or 0


def _caller(ctx: Any) -> Caller:
    """Who sent the request (None fields: not said)."""
    return Caller(_pid(ctx), getattr(ctx, "uid", None), getattr(ctx, "gid", None))


def _name(raw: bytes) -> str:
    return os.fsdecode(raw)


class Operations(pyfuse3.Operations):
    supports_dot_lookup = True
    enable_writeback_cache = False
    enable_acl = False

    def __init__(self, fs: Filesystem, ttl: float, direct_io: bool = False, control_socket: str | None = None):
        super().__init__()
        self.fs = fs
        self.ttl = ttl
        #: -o direct_io: every file is opened with the kernel's direct I/O (no page cache)
        self.direct_io = direct_io
        #: open handles of the control file: fh -> the snapshot taken at open
        self._control: dict[int, bytes] = {}
        self._next_control_fh = _CONTROL_FH0
        #: the daemon's control socket (controlsock.py), named in the control file
        self.control_socket = control_socket
        #: requests that reached the daemon, by operation (the control file's fuse.* counters)
        self._requests: Counter[str] = Counter(getxattr=0)
        #: files handed to the kernel's page cache at their open, and those it refused
        self._pages: Counter[str] = Counter({"fuse.pages-stored": 0})

    def _entry(self, a: Attr) -> pyfuse3.EntryAttributes:
        e = pyfuse3.EntryAttributes()
        e.st_ino = a.ino
        e.generation = 0
        e.entry_timeout = self.ttl
        e.attr_timeout = self.ttl if a.valid_for is None else min(self.ttl, a.valid_for)
        e.st_mode = a.mode
        e.st_nlink = a.nlink
        e.st_uid = a.uid
        e.st_gid = a.gid
        e.st_rdev = a.rdev
        e.st_size = a.size
        e.st_blksize = 128 * 1024
        e.st_blocks = (a.size + 511) // 512
        e.st_atime_ns = a.atime_ns
        e.st_mtime_ns = a.mtime_ns
        e.st_ctime_ns = a.ctime_ns
        return e

    async def _control_entry(self) -> pyfuse3.EntryAttributes:
        """The control file: a read-only regular file of size 0, owned like the mount root."""
        root = await self.fs.getattr(pyfuse3.ROOT_INODE)
        return self._entry(
            Attr(ino=control.INO, mode=stat.S_IFREG | 0o444, nlink=1, uid=root.uid, gid=root.gid, size=0,
                 atime_ns=root.atime_ns, mtime_ns=root.mtime_ns, ctime_ns=root.ctime_ns)
        )

    @staticmethod
    def _is_control_name(parent_inode: int, name: bytes) -> bool:
        return parent_inode == pyfuse3.ROOT_INODE and name == CONTROL_NAME

    def _refuse_control_name(self, parent_inode: int, name: bytes) -> None:
        """Creating, removing or renaming the control file's name: EPERM (the name is reserved)."""
        if self._is_control_name(parent_inode, name):
            raise pyfuse3.FUSEError(errno.EPERM)

    @_translate
    async def lookup(self, parent_inode, name, ctx=None):
        if self._is_control_name(parent_inode, name):
            return await self._control_entry()
        try:
            return self._entry(await self.fs.lookup(parent_inode, _name(name)))
        except KeyNotFound:
            # a negative entry: the kernel answers ENOENT itself for the TTL (zarr probes many
            # missing keys); changes made through the mount update the kernel's entries anyway
            e = pyfuse3.EntryAttributes()
            e.st_ino = 0
            e.entry_timeout = self.ttl
            return e

    async def forget(self, inode_list):
        try:
            self.fs.forget([item for item in inode_list if item[0] != control.INO])
        except Exception:  # forget must never raise
            log.exception("forget failed")

    @_translate
    async def getattr(self, inode, ctx=None):
        if inode == control.INO:
            return await self._control_entry()
        return self._entry(await self.fs.getattr(inode))

    @_translate
    async def setattr(self, inode, attr, fields, fh, ctx):
        if inode == control.INO:
            raise pyfuse3.FUSEError(errno.EACCES)  # a read-only file: chmod, truncate, utime refused
        req = SetattrRequest(
            size=attr.st_size if fields.update_size else None,
            mode=attr.st_mode if fields.update_mode else None,
            uid=attr.st_uid if fields.update_uid else None,
            gid=attr.st_gid if fields.update_gid else None,
            atime_ns=attr.st_atime_ns if fields.update_atime else None,
            mtime_ns=attr.st_mtime_ns if fields.update_mtime else None,
        )
        return self._entry(await self.fs.setattr(inode, req, fh))

    @_translate
    async def opendir(self, inode, ctx):
        return await self.fs.opendir(inode)

    @_translate
    async def readdir(self, fh, start_id, token):
        def add(name: str, a: Attr, next_id: int) -> bool:
            return pyfuse3.readdir_reply(token, os.fsencode(name), self._entry(a), next_id)

        await self.fs.readdir(fh, start_id, add)

    @_translate
    async def releasedir(self, fh):
        await self.fs.releasedir(fh)

    @_translate
    async def mkdir(self, parent_inode, name, mode, ctx):
        self._refuse_control_name(parent_inode, name)
        return self._entry(await self.fs.mkdir(parent_inode, _name(name), mode, _caller(ctx)))

    @_translate
    async def mknod(self, parent_inode, name, mode, rdev, ctx):
        self._refuse_control_name(parent_inode, name)
        return self._entry(await self.fs.mknod(parent_inode, _name(name), mode, rdev, _caller(ctx)))

    @_translate
    async def symlink(self, parent_inode, name, target, ctx):
        self._refuse_control_name(parent_inode, name)
        return self._entry(await self.fs.symlink(parent_inode, _name(name), os.fsdecode(target), _caller(ctx)))

    @_translate
    async def readlink(self, inode, ctx):
        return os.fsencode(await self.fs.readlink(inode))

    @_translate
    async def rmdir(self, parent_inode, name, ctx):
        self._refuse_control_name(parent_inode, name)
        await self.fs.rmdir(parent_inode, _name(name))

    @_translate
    async def unlink(self, parent_inode, name, ctx):
        self._refuse_control_name(parent_inode, name)
        await self.fs.unlink(parent_inode, _name(name))

    @_translate
    async def rename(self, parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx):
        self._refuse_control_name(parent_inode_old, name_old)
        self._refuse_control_name(parent_inode_new, name_new)
        await self.fs.rename(parent_inode_old, _name(name_old), parent_inode_new, _name(name_new), flags)

    @_translate
    async def link(self, inode, new_parent_inode, new_name, ctx):
        if inode == control.INO:
            raise pyfuse3.FUSEError(errno.EPERM)
        self._refuse_control_name(new_parent_inode, new_name)
        return self._entry(await self.fs.link(inode, new_parent_inode, _name(new_name)))

    @_translate
    async def open(self, inode, flags, ctx):
        if inode == control.INO:
            return self._open_control(flags)
        fh = await self.fs.open(inode, flags, _pid(ctx))
        if self.direct_io:
            return pyfuse3.FileInfo(fh=fh, direct_io=True)
        return pyfuse3.FileInfo(fh=fh, keep_cache=await self._pages_stored(inode, fh) or self.fs.keeps_cache(fh))

    async def _pages_stored(self, inode: int, fh: int) -> bool:
        """Hand the kernel's page cache the file being opened, where the daemon holds it already
        or is fetching it ahead (Filesystem.pages_at_open says when that is safe): its reader's
        reads then cost no READ request. The open is answered with keep_cache, or, if the kernel
        refuses them (it forgot the inode), as before (it drops any page it took at the open)."""
        data = await self.fs.pages_at_open(fh)
        if data is None:
            return False
        try:
            pyfuse3.notify_store(inode, 0, data)
        except Exception as exc:  # noqa: BLE001 - the open goes on without them
            self._pages["fuse.pages-store-failed"] += 1
            log.debug("inode %d: pages not stored at open: %s", inode, exc)
            return False
        self.fs.pages_stored(fh)
        self._pages["fuse.pages-stored"] += 1
        return True

    @_translate
    async def create(self, parent_inode, name, mode, flags, ctx):
        self._refuse_control_name(parent_inode, name)
        fh, a = await self.fs.create(parent_inode, _name(name), mode, flags, _pid(ctx), _caller(ctx))
        return pyfuse3.FileInfo(fh=fh, keep_cache=False, direct_io=self.direct_io), self._entry(a)

    @_translate
    async def read(self, fh, off, size):
        if fh in self._control:
            return self._control[fh][off : off + size]
        return await self.fs.read(fh, off, size)

    @_translate
    async def write(self, fh, off, buf):
        if fh in self._control:  # never opened for writing
            raise pyfuse3.FUSEError(errno.EBADF)
        return await self.fs.write(fh, off, buf)

    @_translate
    async def flush(self, fh):
        if self.fs.read_only:
            # nothing is ever stored at close: ENOSYS, and the kernel sends no FLUSH to this
            # mount again (close() succeeds), one request fewer for every file a reader opens
            raise pyfuse3.FUSEError(errno.ENOSYS)
        if fh in self._control:
            return
        await self.fs.flush(fh)

    @_translate
    async def fsync(self, fh, datasync):
        if fh in self._control:
            return
        await self.fs.fsync(fh)

    @_translate
    async def release(self, fh):
        if self._control.pop(fh, None) is not None:
            return
        await self.fs.release(fh)

    @_translate
    async def fsyncdir(self, fh, datasync):
        failed = await self.fs.flush_all()
        if failed:
            raise pyfuse3.FUSEError(errno.EIO)

    @_translate
    async def statfs(self, ctx):
        st = await self.fs.statfs()
        s = pyfuse3.StatvfsData()
        s.f_bsize = s.f_frsize = 4096
        s.f_blocks = st.total_bytes // 4096
        s.f_bfree = s.f_bavail = st.free_bytes // 4096
        s.f_files = st.total_files
        s.f_ffree = s.f_favail = st.free_files
        s.f_namemax = 255
        return s

    def counters(self) -> dict[str, int]:
        """Every counter of the daemon (``nczfs stats``, the control file, ``-o metrics=``)."""
        counters = dict(optional.counters(self.fs.store))
        counters.update(self.fs.write_memory.counters())
        counters.update(self.fs.early.counters())
        counters.update(self.fs.stats)
        counters["write.bytes-pending"] = self.fs.pending_bytes()
        counters.update((f"fuse.{op}", n) for op, n in self._requests.items())
        counters.update(self._pages)
        counters.update(trio_loop.WAITS.counters())
        counters["python.gc-frozen"] = gc.get_freeze_count()
        return counters

    def _open_control(self, flags: int) -> pyfuse3.FileInfo:
        if (flags & os.O_ACCMODE) != os.O_RDONLY or flags & os.O_TRUNC:
            raise pyfuse3.FUSEError(errno.EACCES)  # a read-only file, even for root
        fh = self._next_control_fh
        self._next_control_fh += 1
        self._control[fh] = control.snapshot(self.counters(), self.control_socket)
        return pyfuse3.FileInfo(fh=fh, direct_io=True)  # size 0 must not cut the reads short

    async def getxattr(self, inode, name, ctx):
        self._requests["getxattr"] += 1
        if name == XATTR_PROBE:
            # the mount's own first request (mount.py, before it is ready): ENOSYS, after which
            # the kernel answers every getxattr of the mount itself (EOPNOTSUPP) instead of asking
            # (ls -l asked two a file: a request each, ten times the time of a warm ls -lR)
            raise pyfuse3.FUSEError(errno.ENOSYS)
        # no attribute of this name: ENODATA. Never ENOSYS here: pyfuse3 asks getxattr before a
        # setxattr with XATTR_CREATE or XATTR_REPLACE and passes the answer on, and an ENOSYS
        # answer to a setxattr makes the kernel refuse every setxattr of the mount itself
        raise pyfuse3.FUSEError(pyfuse3.ENOATTR)

    @_translate
    async def setxattr(self, inode, name, value, ctx):
        raise pyfuse3.FUSEError(errno.ENOTSUP)

    @_translate
    async def listxattr(self, inode, ctx):
        return []

    @_translate
    async def removexattr(self, inode, name, ctx):
        raise pyfuse3.FUSEError(pyfuse3.ENOATTR)
