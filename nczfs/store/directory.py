"""A directory tree on local disk (netCDF-C's ``file`` map): one file per key.

Writes go to a temporary file in the target directory and are renamed into place, so a
reader never sees a half-written object and a failed write leaves the old one intact.
Directories are real and persist when empty.
"""

from __future__ import annotations

import errno
import os
import stat as stat_mod
import uuid
from collections.abc import Callable
from typing import BinaryIO

from nczfs.errors import (
    BackendError,
    DirectoryNotEmpty,
    Exists,
    IsADirectory,
    KeyNotFound,
    NotADirectory,
    PermissionDenied,
    SourceError,
)
from nczfs.store.base import (
    ByteRange,
    DirEntry,
    FsStats,
    ObjectInfo,
    SyncStore,
    check_key,
    check_prefix,
    file_pieces,
    parent_of,
)

#: temporary files of in-flight writes; never listed
TMP_MARK = ".nczfs-tmp-"


def _info(key: str, st: os.stat_result) -> ObjectInfo:
    return ObjectInfo(key, st.st_size, st.st_mtime_ns, f"{st.st_ino:x}-{st.st_mtime_ns:x}-{st.st_size:x}")


def _translate(key: str, exc: OSError) -> Exception:
    if exc.errno in (errno.ENOENT,):
        return KeyNotFound(key)
    if exc.errno == errno.ENOTDIR:
        return NotADirectory(f"{key!r}: a parent is a file")
    if exc.errno == errno.EISDIR:
        return IsADirectory(f"{key!r}: is a directory")
    if exc.errno == errno.ENOTEMPTY:
        return DirectoryNotEmpty(f"{key!r}: directory not empty")
    if exc.errno == errno.EEXIST:
        return Exists(f"{key!r}: exists")
    if exc.errno in (errno.EACCES, errno.EPERM):
        denied = PermissionDenied(f"{key!r}: {exc.strerror}")
        denied.errno = exc.errno  # keep EPERM apart from EACCES
        return denied
    err = BackendError(f"{key!r}: {exc.strerror or exc}")
    err.errno = exc.errno or errno.EIO
    return err


class DirectoryStore(SyncStore):
    stores_directories = True

    def __init__(self, root: str, read_only: bool = False):
        root = os.path.abspath(root)
        if not os.path.isdir(root):
            raise SourceError(f"{root}: not a directory")
        self.root = root
        self.read_only = read_only

    def describe(self) -> str:
        return f"file://{self.root}"

    def _path(self, key: str) -> str:
        return os.path.join(self.root, key) if key else self.root

    def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        check_key(key)
        try:
            with open(self._path(key), "rb") as f:
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
            raise _translate(key, exc) from exc

    def stat(self, key: str) -> ObjectInfo:
        check_key(key)
        try:
            st = os.stat(self._path(key))
        except NotADirectoryError:
            raise KeyNotFound(key, "a parent is a file") from None
        except OSError as exc:
            raise _translate(key, exc) from exc
        if not stat_mod.S_ISREG(st.st_mode):
            raise KeyNotFound(key, "not a regular file")
        return _info(key, st)

    def set(self, key: str, data: bytes | bytearray | memoryview) -> ObjectInfo:
        return self._replace(key, lambda out: out.write(data))

    def set_file(self, key: str, f: BinaryIO, size: int) -> ObjectInfo:
        """``size`` bytes of ``f`` from its position, copied in pieces (never all in memory)."""
        return self._replace(key, lambda out: out.writelines(file_pieces(key, f, size)))

    def _replace(self, key: str, fill: Callable[[BinaryIO], object]) -> ObjectInfo:
        """Write the object ``key`` through ``fill`` into a temp file beside it, then rename it
        into place: a reader sees the old object or the new one, never part of it."""
        check_key(key)
        self.check_writable(key)
        path = self._path(key)
        if os.path.isdir(path):
            raise IsADirectory(f"{key!r}: is a directory")
        tmp = os.path.join(os.path.dirname(path), f"{TMP_MARK}{uuid.uuid4().hex}")
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(tmp, "wb") as out:
                fill(out)
            os.replace(tmp, path)
            return _info(key, os.stat(path))
        except BaseException as exc:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            if not isinstance(exc, OSError):
                raise
            if exc.errno == errno.EEXIST:  # makedirs met a file on the way
                raise NotADirectory(f"{key!r}: a parent is a file") from exc
            raise _translate(key, exc) from exc

    def delete(self, key: str) -> None:
        check_key(key)
        self.check_writable(key)
        try:
            os.unlink(self._path(key))
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            pass  # no object of that name (a parent is a file, or it is a directory)
        except OSError as exc:
            raise _translate(key, exc) from exc

    def list_dir(self, prefix: str) -> list[DirEntry]:
        check_prefix(prefix)
        out = []
        try:
            with os.scandir(self._path(prefix)) as it:
                for e in it:
                    if e.name.startswith(TMP_MARK):
                        continue
                    try:
                        st = e.stat()
                    except OSError:
                        continue  # dangling link or vanished
                    key = f"{prefix}/{e.name}" if prefix else e.name
                    if stat_mod.S_ISDIR(st.st_mode):
                        out.append(DirEntry(e.name, True))
                    elif stat_mod.S_ISREG(st.st_mode):
                        out.append(DirEntry(e.name, False, _info(key, st)))
        except (FileNotFoundError, NotADirectoryError):
            return []
        except OSError as exc:
            raise _translate(prefix, exc) from exc
        out.sort(key=lambda d: d.name)
        return out

    def list_prefix(self, prefix: str) -> list[str]:
        check_prefix(prefix)
        base = self._path(prefix)
        out = []
        for dirpath, dirnames, filenames in os.walk(base):
            rel = os.path.relpath(dirpath, self.root)
            for name in filenames:
                if name.startswith(TMP_MARK):
                    continue
                out.append(name if rel == "." else f"{rel}/{name}")
        return sorted(out)

    def dir_exists(self, prefix: str) -> bool:
        check_prefix(prefix)
        return os.path.isdir(self._path(prefix))

    def entry(self, key: str) -> DirEntry | None:
        check_key(key)
        try:
            st = os.stat(self._path(key))
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise _translate(key, exc) from exc
        name = key.rpartition("/")[2]
        if stat_mod.S_ISDIR(st.st_mode):
            return DirEntry(name, True)
        if stat_mod.S_ISREG(st.st_mode):
            return DirEntry(name, False, _info(key, st))
        return None

    def rename(self, src: str, dst: str) -> None:
        check_key(src)
        check_key(dst)
        self.check_writable(dst)
        if not os.path.isfile(self._path(src)):  # a directory is not an object either
            raise KeyNotFound(src)
        if os.path.isdir(self._path(dst)):
            raise IsADirectory(f"{dst!r}: is a directory")
        try:
            os.makedirs(os.path.dirname(self._path(dst)), exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise NotADirectory(f"{dst!r}: a parent is a file") from exc
        except OSError as exc:
            raise _translate(dst, exc) from exc
        try:
            os.replace(self._path(src), self._path(dst))
        except OSError as exc:
            raise _translate(src, exc) from exc

    def rename_dir(self, src: str, dst: str) -> None:
        check_key(src)
        check_key(dst)
        self.check_writable(dst)
        try:
            os.makedirs(self._path(parent_of(dst)), exist_ok=True)
            os.rename(self._path(src), self._path(dst))
        except OSError as exc:
            raise _translate(src, exc) from exc

    def mkdir(self, prefix: str) -> None:
        check_key(prefix)
        self.check_writable(prefix)
        try:
            os.makedirs(self._path(prefix))
        except OSError as exc:
            raise _translate(prefix, exc) from exc

    def rmdir(self, prefix: str) -> None:
        check_key(prefix)
        self.check_writable(prefix)
        try:
            os.rmdir(self._path(prefix))
        except OSError as exc:
            raise _translate(prefix, exc) from exc

    def statfs(self) -> FsStats:
        st = os.statvfs(self.root)
        return FsStats(st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize, st.f_files, st.f_favail)
