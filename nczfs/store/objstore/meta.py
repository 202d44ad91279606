"""POSIX attributes of S3 objects in their user metadata (``x-amz-meta-NAME``), as s3fs-fuse
keeps them, and the operations that write them: chmod/chown/utimens (a copy of the object onto
itself with new metadata), symlinks and special files.

:class:`PosixMeta` and :class:`MetaOfWrites` are parts of :class:`~nczfs.store.objstore.store.S3Store`.
"""

from __future__ import annotations

import logging
import stat
import time
from typing import Callable

import botocore.exceptions
from boto3.s3.transfer import TransferConfig

from nczfs.toolbox.errors import InvalidArgument, NotPermitted
from nczfs.store.values import Meta, ObjectInfo
from nczfs.store.objstore.errors import code_of, translate_boto
from nczfs.store.objstore.obprefix import bare_etag
from nczfs.store.objstore.s3bucket import S3Bucket
from nczfs.store.objstore.sizes import PartSizes

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


class MetaOfWrites:
    """The attributes the writes of each key store with its object (the store's ``write_meta``)."""

    def __init__(self) -> None:
        self._by_key: dict[str, Meta] = {}

    def note(self, key: str, meta: Meta | None) -> None:
        """The attributes the PutObject (or CreateMultipartUpload) of ``key`` sends in its user
        metadata from now on (None: none again): a new file's mode and owner go with its first
        upload, where a CopyObject after it would cost a request and the listing it drops."""
        if meta is None:
            self._by_key.pop(key, None)
        else:
            self._by_key[key] = meta

    def to_write(self, key: str) -> tuple[Meta | None, dict[str, str]]:
        """(the attributes a write of ``key`` stores, their user metadata)."""
        meta = self._by_key.get(key)
        return meta, (meta_headers(meta) if meta is not None else {})


class PosixMeta:
    """The attributes of the objects of ``s3`` (HEADs), and ``set_meta``, ``make_node`` and
    ``readlink`` of the S3 store (whose ``get`` reads a symlink's target); the store checks the
    keys and that it is writable before it asks. ``head_for_meta`` (-o posix_meta): lookups read
    objects' metadata, so symlinks can be made."""

    def __init__(self, s3: S3Bucket, sizes: PartSizes, get: Callable[[str], bytes], head_for_meta: bool):
        self.s3 = s3
        self.sizes = sizes
        self.get = get
        self.head_for_meta = head_for_meta
        #: the refusal of symlinks without -o posix_meta was logged
        self._said_symlinks_refused = False

    def head(self, key: str, full: str) -> ObjectInfo:
        """A HEAD of S3 key ``full`` through boto3: the object's info with the attributes its
        metadata holds (obstore's HEAD gives no user metadata)."""
        s3 = self.s3
        try:
            resp = s3.client.head_object(Bucket=s3.bucket, Key=full, **s3.options.payer())
        except Exception as exc:
            raise translate_boto(exc, key, "HeadObject") from None
        meta = meta_of(resp.get("Metadata"))
        mtime = meta.mtime_ns if meta is not None and meta.mtime_ns is not None else int(resp["LastModified"].timestamp() * 1e9)
        return ObjectInfo(key, int(resp["ContentLength"]), mtime, bare_etag(resp.get("ETag")), meta)

    def set_meta(self, key: str, changes: Meta) -> Meta:
        """The object's user metadata replaced by ``changes`` (every attribute the mount shows:
        the object is copied onto itself, as s3fs-fuse's chmod does; its bytes do not move)."""
        s3 = self.s3
        s3_key = s3.full(key)
        extra = {"Metadata": meta_headers(changes), "MetadataDirective": "REPLACE", **s3.options.writes()}
        source = {"Bucket": s3.bucket, "Key": s3_key}
        try:
            s3.client.copy_object(Bucket=s3.bucket, Key=s3_key, CopySource=source, **extra)
        except botocore.exceptions.ClientError as exc:
            if code_of(exc) not in ("InvalidRequest", "EntityTooLarge"):  # above 5 GiB: a multipart copy
                raise translate_boto(exc, key, "CopyObject (metadata)") from None
            try:
                size = self.head(key, s3_key).size
                s3.client.copy(source, s3.bucket, s3_key, ExtraArgs=extra,
                               Config=TransferConfig(multipart_threshold=self.sizes.copy_threshold,
                                                     multipart_chunksize=max(self.sizes.part_size, -(-size // 9000))))
            except Exception as exc2:
                raise translate_boto(exc2, key, "CopyObject (metadata)") from None
        except Exception as exc:
            raise translate_boto(exc, key, "CopyObject (metadata)") from None
        return changes

    def make_node(self, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
        """A symlink (its target as the object's bytes) or a special file (no bytes), its type and
        attributes in the object's metadata, as s3fs-fuse makes them."""
        if stat.S_ISLNK(meta.mode or 0) and not self.head_for_meta:
            self._refuse_symlink(key)
        body = (target or "").encode("utf-8", "surrogateescape") if stat.S_ISLNK(meta.mode or 0) else b""
        now = time.time_ns()
        meta = Meta(mode=meta.mode, uid=meta.uid, gid=meta.gid, rdev=meta.rdev,
                    mtime_ns=meta.mtime_ns or now, ctime_ns=meta.ctime_ns or now, atime_ns=meta.atime_ns or now)
        s3 = self.s3
        try:
            resp = s3.client.put_object(Bucket=s3.bucket, Key=s3.full(key), Body=body, Metadata=meta_headers(meta),
                                        **s3.options.writes())
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
        info = self.head(key, self.s3.full(key))
        if info.meta is None or not stat.S_ISLNK(info.meta.mode or 0):
            raise InvalidArgument(f"{key!r}: not a symlink")
        return self.get(key).decode("utf-8", "surrogateescape")
