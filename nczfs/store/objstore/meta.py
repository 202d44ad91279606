"""POSIX attributes of S3 objects in their user metadata (``x-amz-meta-NAME``), as s3fs-fuse
keeps them, and the operations that write them: chmod/chown/utimens (a copy of the object onto
itself with new metadata), symlinks and special files.

:class:`PosixMeta` is a part of :class:`~nczfs.store.objstore.store.S3Store`.
"""

from __future__ import annotations

import logging
import stat
import time
from typing import Any

import botocore.exceptions
from boto3.s3.transfer import TransferConfig

from nczfs.toolbox.errors import InvalidArgument, NotPermitted, NotSupported
from nczfs.store.keys import check_key
from nczfs.store.values import Meta, ObjectInfo
from nczfs.store.objstore.errors import code_of, translate_boto
from nczfs.store.objstore.obprefix import bare_etag

log = logging.getLogger(__name__)

#: POSIX attributes in an object's user metadata (``x-amz-meta-NAME``), as s3fs-fuse keeps them:
#: numbers in decimal, times in seconds (with a fraction of nine digits where it has nanoseconds)
META_FIELDS = ("mode", "uid", "gid", "mtime", "ctime", "atime", "rdev")


def _seconds(ns: int) -> str:
    sec, frac = divmod(ns, 1_000_000_000)
    return f"{sec}.{frac:09d}" if frac else str(sec)


def _ns(text: str) -> int:
    sec, _, frac = text.strip().partition(".")
    return int(sec) * 1_000_000_000 + (int(frac[:9].ljust(9, "0")) if frac else 0)


def meta_headers(meta: Meta) -> dict[str, str]:
    """The user metadata (boto3's ``Metadata``, names without ``x-amz-meta-``) holding ``meta``."""
    out = {}
    for name, value in (("mode", meta.mode), ("uid", meta.uid), ("gid", meta.gid)):
        if value is not None:
            out[name] = str(value)
    for name, value in (("mtime", meta.mtime_ns), ("ctime", meta.ctime_ns), ("atime", meta.atime_ns)):
        if value is not None:
            out[name] = _seconds(value)
    if meta.rdev:
        out["rdev"] = str(meta.rdev)
    return out


def meta_of(metadata: dict[str, str] | None) -> Meta | None:
    """The POSIX attributes in an object's user metadata (s3fs-fuse's names); None if it has none.
    A value that is not a number is ignored (logged at DEBUG)."""
    if not metadata:
        return None
    values: dict[str, int] = {}
    for name in META_FIELDS:
        text = metadata.get(name)
        if text is None:
            continue
        try:
            values[name] = _ns(text) if name.endswith("time") else int(text)
        except ValueError:
            log.debug("x-amz-meta-%s %r is not a number; ignored", name, text)
    if not values:
        return None
    return Meta(mode=values.get("mode"), uid=values.get("uid"), gid=values.get("gid"), atime_ns=values.get("atime"),
                mtime_ns=values.get("mtime"), ctime_ns=values.get("ctime"), rdev=values.get("rdev", 0))


class PosixMeta:
    """``set_meta``, ``make_node`` and ``readlink`` of the S3 store."""

    client: Any
    bucket: str
    #: -o posix_meta (S3Store sets it): lookups read objects' metadata, so symlinks can be made
    head_for_meta: bool = False
    #: the refusal of symlinks without it was logged
    _said_symlinks_refused: bool = False
    #: the attributes the writes of a key store with its object (:meth:`write_meta`; S3Store sets it)
    _meta_of_writes: dict[str, Meta]

    def write_meta(self, key: str, meta: Meta | None) -> None:
        """The attributes the PutObject (or CreateMultipartUpload) of ``key`` sends in its user
        metadata from now on (None: none again): a new file's mode and owner go with its first
        upload, where a CopyObject after it would cost a request and the listing it drops."""
        if meta is None:
            self._meta_of_writes.pop(key, None)
        else:
            self._meta_of_writes[key] = meta

    def _meta_to_write(self, key: str) -> tuple[Meta | None, dict[str, str]]:
        """(the attributes a write of ``key`` stores, their user metadata)."""
        meta = self._meta_of_writes.get(key)
        return meta, (meta_headers(meta) if meta is not None else {})

    def set_meta(self, key: str, changes: Meta, is_dir: bool = False) -> Meta:
        """The object's user metadata replaced by ``changes`` (every attribute the mount shows:
        the object is copied onto itself, as s3fs-fuse's chmod does; its bytes do not move)."""
        if is_dir:
            raise NotSupported(f"{key!r}: nczfs writes no directory objects to S3")
        check_key(key)
        self.check_writable(key)
        s3_key = self._full(key)
        extra = {"Metadata": meta_headers(changes), "MetadataDirective": "REPLACE", **self.options.writes()}
        source = {"Bucket": self.bucket, "Key": s3_key}
        try:
            self.client.copy_object(Bucket=self.bucket, Key=s3_key, CopySource=source, **extra)
        except botocore.exceptions.ClientError as exc:
            if code_of(exc) not in ("InvalidRequest", "EntityTooLarge"):  # above 5 GiB: a multipart copy
                raise translate_boto(exc, key, "CopyObject (metadata)") from None
            try:
                size = self._head(key, s3_key).size
                self.client.copy(source, self.bucket, s3_key, ExtraArgs=extra,
                                 Config=TransferConfig(multipart_threshold=self.copy_threshold,
                                                       multipart_chunksize=max(self.part_size, -(-size // 9000))))
            except Exception as exc2:
                raise translate_boto(exc2, key, "CopyObject (metadata)") from None
        except Exception as exc:
            raise translate_boto(exc, key, "CopyObject (metadata)") from None
        return changes

    def make_node(self, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
        """A symlink (its target as the object's bytes) or a special file (no bytes), its type and
        attributes in the object's metadata, as s3fs-fuse makes them."""
        check_key(key)
        self.check_writable(key)
        if stat.S_ISLNK(meta.mode or 0) and not self.head_for_meta:
            self._refuse_symlink(key)
        body = (target or "").encode("utf-8", "surrogateescape") if stat.S_ISLNK(meta.mode or 0) else b""
        now = time.time_ns()
        meta = Meta(mode=meta.mode, uid=meta.uid, gid=meta.gid, rdev=meta.rdev,
                    mtime_ns=meta.mtime_ns or now, ctime_ns=meta.ctime_ns or now, atime_ns=meta.atime_ns or now)
        try:
            resp = self.client.put_object(Bucket=self.bucket, Key=self._full(key), Body=body, Metadata=meta_headers(meta),
                                          **self.options.writes())
        except Exception as exc:
            raise translate_boto(exc, key, "PutObject") from None
        return ObjectInfo(key, len(body), meta.mtime_ns or now, bare_etag(resp.get("ETag")), meta)

    def _refuse_symlink(self, key: str) -> None:
        """Without -o posix_meta a lookup asks no object for its metadata, the only place a
        symlink's type is: after a remount it would be a regular file holding its target. So
        it is refused (EPERM, as symlink(2) on a file system without symlinks), said in the log
        once a mount."""
        why = ("symlinks on S3 need -o posix_meta (the type is kept in the object's metadata, "
               "which only -o posix_meta reads back; without it a remount would show a regular file)")
        if not self._said_symlinks_refused:
            self._said_symlinks_refused = True
            log.warning("symlink %r refused: %s", key, why)
        raise NotPermitted(f"{key!r}: {why}")

    def readlink(self, key: str) -> str:
        check_key(key)
        info = self._head(key, self._full(key))
        if info.meta is None or not stat.S_ISLNK(info.meta.mode or 0):
            raise InvalidArgument(f"{key!r}: not a symlink")
        return self.get(key).decode("utf-8", "surrogateescape")
