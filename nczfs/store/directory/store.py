"""A directory tree on local disk (netCDF-C's ``file`` map): one file per key.

Writes go to a temporary file in the target directory and are renamed into place, so a
reader never sees a half-written object and a failed write leaves the old one intact; the
temp file takes the old file's mode and owner first. A file with more than one name (a hard
link) is rewritten in place instead, so that every name keeps showing one file.
Directories are real and persist when empty.

Writes are conditional (``checks_writes``): what a file's version is and how a rename is made
only over the version expected: :mod:`nczfs.store.fileversions`. The tree holds everything a file system
does: modes, owners and times are the files' own (``live_meta``), and symlinks, fifos, sockets,
device nodes and hard links are real ones; the final name of a key is never followed.

A key whose backing path is longer than the kernel takes (PATH_MAX) is reached one directory at
a time (``openat``: :mod:`.longpaths`), whatever the length of the root's own path.
"""

from __future__ import annotations

from dataclasses import replace
import contextlib
import errno
import os
import stat as stat_mod
import uuid
from collections.abc import Callable
from typing import BinaryIO, Iterator

from nczfs.store.capabilities import Capabilities
from nczfs.toolbox.errors import InvalidArgument, IsADirectory, KeyNotFound, NotSupported, SourceError, Stale, from_os_error
from nczfs.store.base import SyncStore, check_writable
from nczfs.store.keys import check_key, check_prefix, parent_of
from nczfs.store.directory.smallfiles import SmallFiles
from nczfs.store.fileversions import TMP_MARK, check_version, keep_attributes, remove_if, replace_if, version_of
from nczfs.store.pieces import copy_sparse
from nczfs.store.values import ByteRange, DirEntry, FsStats, Meta, ObjectInfo


def meta_of(st: os.stat_result) -> Meta:
    return Meta(mode=st.st_mode, uid=st.st_uid, gid=st.st_gid, atime_ns=st.st_atime_ns, mtime_ns=st.st_mtime_ns,
                ctime_ns=st.st_ctime_ns, nlink=st.st_nlink, rdev=st.st_rdev, ident=(st.st_dev, st.st_ino))


def _info(key: str, st: os.stat_result) -> ObjectInfo:
    return ObjectInfo(key, st.st_size, st.st_mtime_ns, version_of(st), meta_of(st))


def _entry(name: str, key: str, st: os.stat_result) -> DirEntry:
    if stat_mod.S_ISDIR(st.st_mode):
        return DirEntry(name, True, meta=meta_of(st))
    return DirEntry(name, False, _info(key, st))


class DirectoryStore(SmallFiles, SyncStore):
    #: a delete with ``if_version`` compares the file's ``lstat`` right before the unlink
    capabilities = Capabilities(stores_directories=True, live_meta=True, checks_writes=True, checks_deletes=True)
    #: a fault hook for tests: run with the key between a rename's version check and the rename
    before_replace: Callable[[str], None] | None = None
    _entry_of = staticmethod(_entry)

    def __init__(self, root: str, read_only: bool = False):
        root = os.path.abspath(root)
        if not os.path.isdir(root):
            raise SourceError(f"{root}: not a directory")
        self.root = root
        self.capabilities = replace(self.capabilities, read_only=read_only)

    def describe(self) -> str:
        return f"file://{self.root}"

    # ------------------------------------------------------------------ reads

    def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        return self.get_version(key, rng, None)

    def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        """``get``; with ``etag``, Stale if the file opened is not that version (its ``fstat``):
        what is read is then the version asked for, short of a write in place meanwhile."""
        check_key(key)
        try:
            with self._at(key) as (p, d):
                # a fifo or a device is never opened (a symlink to a file is followed, as before)
                if not stat_mod.S_ISREG(os.stat(p, dir_fd=d).st_mode):
                    raise KeyNotFound(key, "not a regular file")
                fd = os.open(p, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=d)
            with open(fd, "rb") as f:
                if etag and version_of(os.fstat(fd)) != etag:
                    raise Stale(f"{key!r}: changed (version {version_of(os.fstat(fd))}, not {etag})")
                if rng is None:
                    return f.read()
                end = rng.end
                if end is None:
                    end = os.fstat(f.fileno()).st_size
                return os.pread(f.fileno(), max(0, end - rng.start), rng.start)
        except IsADirectoryError:
            raise KeyNotFound(key, "is a directory") from None
        except NotADirectoryError:
            raise KeyNotFound(key, "a parent is a file") from None
        except OSError as exc:
            raise from_os_error(key, exc) from exc

    def stat(self, key: str) -> ObjectInfo:
        check_key(key)
        try:
            st = self._lstat(key)
        except NotADirectoryError:
            raise KeyNotFound(key, "a parent is a file") from None
        except OSError as exc:
            raise from_os_error(key, exc) from exc
        if stat_mod.S_ISDIR(st.st_mode):
            raise KeyNotFound(key, "is a directory")
        return _info(key, st)

    def list_dir(self, prefix: str) -> list[DirEntry]:
        check_prefix(prefix)
        out = []
        try:
            with self._dir(prefix) as where, os.scandir(where) as it:
                for e in it:
                    if e.name.startswith(TMP_MARK):
                        continue
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue  # vanished meanwhile
                    out.append(_entry(e.name, f"{prefix}/{e.name}" if prefix else e.name, st))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise from_os_error(prefix, exc) from exc
        out.sort(key=lambda d: d.name)
        return out

    def list_prefix(self, prefix: str) -> list[str]:
        check_prefix(prefix)
        return super().list_prefix(prefix)  # regular files only: DirEntry.is_object

    def dir_exists(self, prefix: str) -> bool:
        check_prefix(prefix)
        if not prefix:
            return True
        try:
            return stat_mod.S_ISDIR(self._lstat(prefix).st_mode)
        except OSError:
            return False

    def entry(self, key: str) -> DirEntry | None:
        check_prefix(key)  # "": the root directory itself
        try:
            st = self._lstat(key)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise from_os_error(key, exc) from exc
        return _entry(key.rpartition("/")[2], key, st)

    def readlink(self, key: str) -> str:
        check_key(key)
        try:
            with self._at(key) as (p, d):
                return os.fsdecode(os.readlink(p, dir_fd=d))
        except OSError as exc:
            if exc.errno == errno.EINVAL:
                raise InvalidArgument(f"{key!r}: not a symlink") from None
            raise from_os_error(key, exc) from exc

    # ------------------------------------------------------------------ writes

    def set(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        return self._replace(key, lambda out: out.write(data), if_version)

    def set_file(self, key: str, f: BinaryIO, size: int, if_version: str | None = None) -> ObjectInfo:
        """``size`` bytes of ``f`` from its position, copied in pieces (never all in memory);
        where ``f`` is a file with holes, they stay holes."""
        return self._replace(key, lambda out: copy_sparse(key, f, out, size), if_version)

    def _stat_or_none(self, key: str) -> os.stat_result | None:
        try:
            return self._lstat(key)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise from_os_error(key, exc) from exc

    def _replace(self, key: str, fill: Callable[[BinaryIO], object], if_version: str | None = None) -> ObjectInfo:
        """Write the object ``key`` through ``fill`` into a temp file beside it, then rename it
        into place: a reader sees the old object or the new one, never part of it. The temp file
        takes the old file's mode and owner. A file with other names is rewritten in place.
        ``if_version``: only while ``key`` is that version (checked before and at the rename)."""
        check_key(key)
        check_writable(self, key)
        old = self._stat_or_none(key)
        if old is not None and stat_mod.S_ISDIR(old.st_mode):
            raise IsADirectory(f"{key!r}: is a directory")
        check_version(key, old, if_version)
        if old is not None and stat_mod.S_ISREG(old.st_mode) and old.st_nlink > 1:
            return self._rewrite_in_place(key, fill)
        parent = parent_of(key)
        tmp_key = f"{parent}/{TMP_MARK}{uuid.uuid4().hex}" if parent else f"{TMP_MARK}{uuid.uuid4().hex}"
        written = False
        try:
            self._makedirs(parent)
            with self._at(tmp_key) as (p, d):
                fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666, dir_fd=d)
                written = True
                if old is not None and stat_mod.S_ISREG(old.st_mode):
                    try:
                        keep_attributes(fd, old)
                    except BaseException:
                        os.close(fd)
                        raise
                with open(fd, "wb") as out:
                    fill(out)
                self._install(key, p, d, if_version)
                written = False
            return _info(key, self._lstat(key))
        except BaseException as exc:
            if written:
                with contextlib.suppress(OSError), self._at(tmp_key) as (p, d):
                    os.unlink(p, dir_fd=d)
            if not isinstance(exc, OSError):
                raise
            raise from_os_error(key, exc) from exc

    def _install(self, key: str, p: str, d: int | None, if_version: str | None) -> None:
        """Rename the temp file ``p`` (in ``d``) over ``key`` (``if_version``: :func:`replace_if`)."""
        with self._at(key) as (dst, dst_fd):
            replace_if(key, lambda call: call(p, dst, src_dir_fd=d, dst_dir_fd=dst_fd),
                       lambda: self._stat_or_none(key), if_version, self.before_replace)

    def _rewrite_in_place(self, key: str, fill: Callable[[BinaryIO], object]) -> ObjectInfo:
        try:
            with self._at(key) as (p, d):
                fd = os.open(p, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=d)
            with open(fd, "wb") as out:
                fill(out)
            return _info(key, self._lstat(key))
        except OSError as exc:
            raise from_os_error(key, exc) from exc

    def truncate(self, key: str, size: int, if_version: str | None = None) -> ObjectInfo:
        """Cut or extend the file in place (extended with a hole: no zeros are written); with
        ``if_version``, only while the file opened is that version (its ``fstat``)."""
        check_key(key)
        check_writable(self, key)
        try:
            with self._at(key) as (p, d):
                fd = os.open(p, os.O_WRONLY | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=d)
            try:
                check_version(key, os.fstat(fd) if if_version is not None else None, if_version)
                os.ftruncate(fd, size)
                return _info(key, os.fstat(fd))
            finally:
                os.close(fd)
        except OSError as exc:
            raise from_os_error(key, exc) from exc

    def _remove(self, call: Callable[..., None], key: str) -> None:
        """``call`` (``os.unlink``, ``os.rmdir``) on ``key``'s backing path, once it may change."""
        check_key(key)
        check_writable(self, key)
        with self._at(key) as (p, d):
            call(p, dir_fd=d)

    def delete(self, key: str, if_version: str | None = None) -> None:
        st = self._stat_or_none(key) if if_version is not None else None
        if st is not None:
            check_version(key, st, if_version)
        try:
            self._remove(os.unlink if st is None or if_version is None else
                         lambda p, dir_fd, v=if_version: remove_if(key, p, dir_fd, v, self.before_replace), key)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            pass  # no object of that name (a parent is a file, or it is a directory)
        except OSError as exc:
            if exc.errno == errno.EPERM and self.dir_exists(key):
                return  # unlink(2) of a directory
            raise from_os_error(key, exc) from exc

    @contextlib.contextmanager
    def _moving(self, src: str, dst: str) -> Iterator[None]:
        """A rename or link of ``src`` to ``dst``: refused before anything changes if it may not
        happen; its OSError as the error it stands for, named by ``dst`` where that is taken."""
        check_key(src)
        check_key(dst)
        check_writable(self, dst)
        try:
            yield
        except OSError as exc:
            raise from_os_error(dst if exc.errno == errno.EEXIST else src, exc) from exc

    def rename(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        with self._moving(src, dst):
            try:
                st = self._lstat(src)
            except OSError:
                raise KeyNotFound(src) from None
            if stat_mod.S_ISDIR(st.st_mode):  # a directory is not an object
                raise KeyNotFound(src)
            if self.dir_exists(dst):
                raise IsADirectory(f"{dst!r}: is a directory")
            try:
                self._makedirs(parent_of(dst))
            except OSError as exc:
                raise from_os_error(dst, exc) from exc
            replace_if(dst, lambda call: self._between(call, src, dst), lambda: self._stat_or_none(dst), if_version,
                       self.before_replace)
        return _info(dst, st)  # the same file: a rename keeps its inode, mtime and size (so its version)

    def rename_dir(self, src: str, dst: str) -> None:
        with self._moving(src, dst):
            self._makedirs(parent_of(dst))
            self._between(os.rename, src, dst)

    def link(self, src: str, dst: str) -> ObjectInfo:
        with self._moving(src, dst):
            self._between(os.link, src, dst, follow_symlinks=False)
            return _info(dst, self._lstat(dst))

    def mkdir(self, prefix: str) -> None:
        check_key(prefix)
        check_writable(self, prefix)
        try:
            self._makedirs(parent_of(prefix))
            with self._at(prefix) as (p, d):
                os.mkdir(p, dir_fd=d)
        except OSError as exc:
            raise from_os_error(prefix, exc) from exc

    def rmdir(self, prefix: str) -> None:
        try:
            self._remove(os.rmdir, prefix)
        except OSError as exc:
            raise from_os_error(prefix, exc) from exc

    def make_node(self, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
        check_key(key)
        check_writable(self, key)
        mode = meta.mode or 0
        try:
            with self._at(key) as (p, d):
                if stat_mod.S_ISLNK(mode):
                    os.symlink(target or "", p, dir_fd=d)
                elif stat_mod.S_ISDIR(mode) or stat_mod.S_ISREG(mode):
                    raise InvalidArgument(f"{key!r}: not a special file type")
                else:
                    os.mknod(p, mode, meta.rdev, dir_fd=d)
                    os.chmod(p, stat_mod.S_IMODE(mode), dir_fd=d)  # the daemon's umask took bits away
                if meta.uid is not None or meta.gid is not None:
                    self._chown(key, p, d, meta.uid, meta.gid)
            return _info(key, self._lstat(key))
        except OSError as exc:
            raise from_os_error(key, exc) from exc

    def set_meta(self, key: str, changes: Meta, is_dir: bool = False) -> Meta:
        check_prefix(key) if is_dir else check_key(key)
        check_writable(self, key)
        try:
            with self._at(key) as (p, d):
                st = os.stat(p, dir_fd=d, follow_symlinks=False)
                link = stat_mod.S_ISLNK(st.st_mode)
                if changes.uid is not None or changes.gid is not None:
                    self._chown(key, p, d, changes.uid, changes.gid)
                if changes.mode is not None and not link:  # Linux has no mode of a symlink to change
                    os.chmod(p, stat_mod.S_IMODE(changes.mode), dir_fd=d)
                if changes.atime_ns is not None or changes.mtime_ns is not None:
                    a = changes.atime_ns if changes.atime_ns is not None else st.st_atime_ns
                    m = changes.mtime_ns if changes.mtime_ns is not None else st.st_mtime_ns
                    os.utime(p, ns=(a, m), dir_fd=d, follow_symlinks=False)
                return meta_of(os.stat(p, dir_fd=d, follow_symlinks=False))
        except OSError as exc:
            raise from_os_error(key, exc) from exc

    @staticmethod
    def _chown(key: str, p: str, d: int | None, uid: int | None, gid: int | None) -> None:
        try:
            os.chown(p, -1 if uid is None else uid, -1 if gid is None else gid, dir_fd=d, follow_symlinks=False)
        except PermissionError:
            # a daemon that is not root cannot give files away: the owner is kept by the mount
            raise NotSupported(f"{key!r}: the backing directory refuses a change of owner") from None

    def statfs(self) -> FsStats:
        st = os.statvfs(self.root)
        return FsStats(st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize, st.f_files, st.f_favail)

