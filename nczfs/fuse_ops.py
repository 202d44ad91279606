"""The pyfuse3 adapter: decode names, call Filesystem, build pyfuse3 structures, map errors.

Every handler goes through :func:`_translate`, the one place where exceptions become
``FUSEError(errno)``: expected nczfs/OS errors are logged at DEBUG, anything else with a
traceback (and answered with EIO) so that nothing escapes and stops ``pyfuse3.main``.
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
from typing import Any, Awaitable, Callable, TypeVar

import pyfuse3

from nczfs import config
from nczfs.errors import KeyNotFound, NczfsError, to_errno
from nczfs.filesystem import Attr, Filesystem, SetattrRequest

log = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

#: control attributes on the mount root (config.py), never listed by listxattr
XATTR_PID = config.XATTR_PID.encode()
XATTR_SYNC = config.XATTR_SYNC.encode()
XATTR_STATS = config.XATTR_STATS.encode()


#: operations whose medium failures the filesystem logs itself (uploads name the key there)
_LOGGED_BY_FILESYSTEM = frozenset({"flush", "fsync", "release", "setxattr"})


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


def _translate(fn: F) -> F:
    @functools.wraps(fn)
    async def wrapper(self: "Operations", *args: Any) -> Any:
        if log.isEnabledFor(logging.DEBUG):
            log.debug("request %s%s", fn.__name__, _brief(args))
        try:
            return await fn(self, *args)
        except pyfuse3.FUSEError:
            raise
        except (NczfsError, OSError) as exc:
            code = to_errno(exc)
            if code == errno.EIO and fn.__name__ not in _LOGGED_BY_FILESYSTEM:
                log.warning("%s failed: %s", fn.__name__, exc)  # the medium failed: one line, key and cause
            else:
                log.debug("%s%r: %s", fn.__name__, args[:2], exc)
            raise pyfuse3.FUSEError(code) from None
        except Exception:
            log.exception("%s%r failed unexpectedly", fn.__name__, args[:2])
            raise pyfuse3.FUSEError(errno.EIO) from None

    return wrapper  # type: ignore[return-value]


def _name(raw: bytes) -> str:
    return os.fsdecode(raw)


class Operations(pyfuse3.Operations):
    supports_dot_lookup = True
    enable_writeback_cache = False
    enable_acl = False

    def __init__(self, fs: Filesystem, ttl: float):
        super().__init__()
        self.fs = fs
        self.ttl = ttl

    def _entry(self, a: Attr) -> pyfuse3.EntryAttributes:
        e = pyfuse3.EntryAttributes()
        e.st_ino = a.ino
        e.generation = 0
        e.entry_timeout = self.ttl
        e.attr_timeout = self.ttl
        e.st_mode = a.mode
        e.st_nlink = a.nlink
        e.st_uid = a.uid
        e.st_gid = a.gid
        e.st_rdev = 0
        e.st_size = a.size
        e.st_blksize = 128 * 1024
        e.st_blocks = (a.size + 511) // 512
        e.st_atime_ns = a.atime_ns
        e.st_mtime_ns = a.mtime_ns
        e.st_ctime_ns = a.ctime_ns
        return e

    @_translate
    async def lookup(self, parent_inode, name, ctx=None):
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
            self.fs.forget(list(inode_list))
        except Exception:  # forget must never raise
            log.exception("forget failed")

    @_translate
    async def getattr(self, inode, ctx=None):
        return self._entry(await self.fs.getattr(inode))

    @_translate
    async def setattr(self, inode, attr, fields, fh, ctx):
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
        return self._entry(await self.fs.mkdir(parent_inode, _name(name), mode))

    @_translate
    async def rmdir(self, parent_inode, name, ctx):
        await self.fs.rmdir(parent_inode, _name(name))

    @_translate
    async def unlink(self, parent_inode, name, ctx):
        await self.fs.unlink(parent_inode, _name(name))

    @_translate
    async def rename(self, parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx):
        await self.fs.rename(parent_inode_old, _name(name_old), parent_inode_new, _name(name_new), flags)

    @_translate
    async def link(self, inode, new_parent_inode, new_name, ctx):
        return self._entry(await self.fs.link(inode, new_parent_inode, _name(new_name)))

    @_translate
    async def open(self, inode, flags, ctx):
        fh = await self.fs.open(inode, flags)
        return pyfuse3.FileInfo(fh=fh, keep_cache=self.fs.keeps_cache(fh))

    @_translate
    async def create(self, parent_inode, name, mode, flags, ctx):
        fh, a = await self.fs.create(parent_inode, _name(name), mode, flags)
        return pyfuse3.FileInfo(fh=fh, keep_cache=False), self._entry(a)

    @_translate
    async def read(self, fh, off, size):
        return await self.fs.read(fh, off, size)

    @_translate
    async def write(self, fh, off, buf):
        return await self.fs.write(fh, off, buf)

    @_translate
    async def flush(self, fh):
        await self.fs.flush(fh)

    @_translate
    async def fsync(self, fh, datasync):
        await self.fs.fsync(fh)

    @_translate
    async def release(self, fh):
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

    async def getxattr(self, inode, name, ctx):
        if inode != pyfuse3.ROOT_INODE:  # ls -l asks twice a file (ACL, SELinux label): the short way
            raise pyfuse3.FUSEError(pyfuse3.ENOATTR)
        return await self._root_xattr(name)

    @_translate
    async def _root_xattr(self, name):
        if name == XATTR_PID:
            return str(os.getpid()).encode()
        if name == XATTR_STATS:
            return json.dumps(self.fs.store.counters(), sort_keys=True).encode()
        raise pyfuse3.FUSEError(pyfuse3.ENOATTR)

    @_translate
    async def setxattr(self, inode, name, value, ctx):
        if inode == pyfuse3.ROOT_INODE and name == XATTR_SYNC:
            failed = await self.fs.flush_all()
            if failed:
                log.error("sync: not stored: %s", ", ".join(failed))
                raise pyfuse3.FUSEError(errno.EIO)
            return
        raise pyfuse3.FUSEError(errno.ENOTSUP)

    @_translate
    async def listxattr(self, inode, ctx):
        return []

    @_translate
    async def removexattr(self, inode, name, ctx):
        raise pyfuse3.FUSEError(pyfuse3.ENOATTR)
