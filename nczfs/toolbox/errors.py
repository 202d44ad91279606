"""The nczfs exception hierarchy and the one errno table.

Backends raise these (with the original exception chained); the FUSE adapter turns
them into errno values with :func:`to_errno` and nothing else.
"""

from __future__ import annotations

import errno as _errno


class NczfsError(Exception):
    """Base of every error nczfs raises on purpose."""

    errno = _errno.EIO


class KeyNotFound(NczfsError):
    errno = _errno.ENOENT

    def __init__(self, key: str, reason: str = "no such key"):
        super().__init__(f"{key!r}: {reason}")
        self.key = key


class ReadOnly(NczfsError):
    errno = _errno.EROFS


class Exists(NczfsError):
    errno = _errno.EEXIST


class NotADirectory(NczfsError):
    errno = _errno.ENOTDIR


class IsADirectory(NczfsError):
    errno = _errno.EISDIR


class DirectoryNotEmpty(NczfsError):
    errno = _errno.ENOTEMPTY


class InvalidKey(NczfsError):
    errno = _errno.EINVAL


class NameTooLong(NczfsError):
    errno = _errno.ENAMETOOLONG


class InvalidArgument(NczfsError):
    errno = _errno.EINVAL


class FileTooBig(NczfsError):
    """A size beyond the largest object the store holds (S3: 5 TiB) or its temp file can."""

    errno = _errno.EFBIG


class PermissionDenied(NczfsError):
    errno = _errno.EACCES


class NotSupported(NczfsError):
    errno = _errno.ENOTSUP


class NotPermitted(NczfsError):
    """EPERM: what symlink(2) and mknod(2) answer where the file system cannot hold that type."""

    errno = _errno.EPERM


class Stale(NczfsError):
    errno = _errno.ESTALE


class Conflict(Stale):
    """A conditional write refused: the object is no longer the version the writer started from
    (``expected``; :data:`~nczfs.store.values.ABSENT`: none was there), another client replaced,
    made or deleted it meanwhile (``found``: its version now, "" if none or unknown). ESTALE, as
    gcsfuse answers a close whose object generation changed."""

    def __init__(self, key: str, expected: str, found: str = "", kept: str = ""):
        was = "no object" if expected == "*" else f"version {expected}"
        now = f"version {found}" if found else "another version (or none)"
        super().__init__(f"{key!r}: not stored: the store holds {now}, not {was} this mount saw"
                         + (f"; the data written is kept as {kept!r}" if kept else ""))
        self.key, self.expected, self.found, self.kept = key, expected, found, kept


class BackendError(NczfsError):
    """The medium failed (I/O error, server error after retries)."""

    errno = _errno.EIO


class OutcomeUnknown(BackendError):
    """A write the store may or may not carry out: a request went out and no answer came back (it
    timed out, the connection broke). The store checked what it could (S3: the object's ETag)
    without learning the outcome: the object may still change to what was sent, later."""


class WriteLost(NczfsError):
    """A file one of whose writes failed (its temp file could not take it, or the store refused
    the content it would have made): it is never stored, so that the store keeps its previous
    object rather than a part of the new one."""

    def __init__(self, key: str, cause: OSError):
        super().__init__(f"{key!r}: not stored: a write to it failed ({cause.strerror or cause}); "
                         "the store keeps the object it had")
        self.errno = cause.errno or _errno.EIO


class SourceError(NczfsError):
    """SOURCE or MOUNTPOINT given to the CLI is unusable; the message is shown to the user."""

    errno = _errno.EINVAL


class BadValue(SourceError):
    """A value an option's rule refuses: the message is the reason alone (the option parser
    names the key and the value: :func:`option_error`)."""


def option_error(key: str, value: str | None, reason: str) -> SourceError:
    """The one form of a refused ``-o`` option, whichever rule refused it, at the command line
    and in the Python API alike: ``-o KEY=VALUE: reason`` (``-o KEY: reason`` where no value was
    given)."""
    return SourceError(f"-o {key if value is None else f'{key}={value}'}: {reason}")


def first_of(exc: BaseException, kinds: tuple[type[BaseException], ...]) -> BaseException | None:
    """``exc`` if it is one of ``kinds``; for a group of errors that holds only such (the parts of
    one request, run at once), the first of them; else None."""
    if isinstance(exc, kinds):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        got, rest = exc.split(kinds)
        if got is not None and rest is None:
            first: BaseException = got
            while isinstance(first, BaseExceptionGroup):
                first = first.exceptions[0]
            return first
    return None


def to_errno(exc: BaseException) -> int:
    """The errno a failed request answers with: NczfsError and OSError carry their own, else EIO."""
    if isinstance(exc, NczfsError):
        return exc.errno
    if isinstance(exc, OSError) and exc.errno:
        return exc.errno
    return _errno.EIO


#: what an OSError of a local file means for its key, where a class of its own says it
_FROM_OS = {
    _errno.ENOTDIR: (NotADirectory, "a parent is a file"),
    _errno.EISDIR: (IsADirectory, "is a directory"),
    _errno.ENOTEMPTY: (DirectoryNotEmpty, "directory not empty"),
    _errno.EEXIST: (Exists, "exists"),
}


def from_os_error(key: str, exc: OSError) -> NczfsError:
    """The error an OSError of the local file backing ``key`` stands for; PermissionDenied keeps
    EPERM apart from EACCES, and any other errno (ENOSPC, EIO ...) is kept on a BackendError."""
    if exc.errno == _errno.ENOENT:
        return KeyNotFound(key)
    if exc.errno in _FROM_OS:
        cls, what = _FROM_OS[exc.errno]
        return cls(f"{key!r}: {what}")
    if exc.errno in (_errno.EACCES, _errno.EPERM):
        err: NczfsError = PermissionDenied(f"{key!r}: {exc.strerror}")
    else:
        err = BackendError(f"{key!r}: {exc.strerror or exc}")
    err.errno = exc.errno or _errno.EIO
    return err
