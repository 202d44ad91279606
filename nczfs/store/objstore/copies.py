"""Copies and moves of S3 objects: server-side (CopyObject, a multipart copy above 5 GiB), a
directory's keys in parallel, and the markers a removed directory leaves.

:class:`Copies` is a part of :class:`~nczfs.store.objstore.store.S3Store`, which checks the keys and
that it is writable before it asks.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Protocol

from nczfs.toolbox.errors import BackendError, KeyNotFound, NczfsError
from nczfs.store.keys import check_key, join
from nczfs.store.values import DirEntry, ObjectInfo
from nczfs.store.objstore.errors import translate_boto
from nczfs.store.objstore.obprefix import bare_etag, boto_conditions
from nczfs.store.objstore.puts import Puts, refused_condition
from nczfs.store.objstore.s3bucket import S3Bucket
from nczfs.store.objstore.sizes import PartSizes
from nczfs.store.objstore.uploads import MultipartUploads

log = logging.getLogger(__name__)

#: what a multipart copy keeps of the source's HEAD (as s3transfer's does)
KEPT = ("CacheControl", "ContentDisposition", "ContentEncoding", "ContentLanguage", "ContentType", "Expires",
        "Metadata")


class Tree(Protocol):
    """What copies ask of the store they are a part of."""

    def stat(self, key: str) -> ObjectInfo: ...

    def delete(self, key: str) -> None: ...

    def list_dir(self, prefix: str) -> list[DirEntry]: ...

    def list_prefix(self, prefix: str) -> list[str]: ...


class Copies:
    """``copy``, ``rename_dir`` and ``forget_dir`` of the S3 store ``tree``: copies of ``s3``'s
    objects, above ``sizes.copy_threshold`` in parts of an upload of ``uploads``; ``puts``
    answers a refused one; ``delete_path(key, s3_key)`` deletes a directory's marker."""

    def __init__(self, s3: S3Bucket, sizes: PartSizes, uploads: MultipartUploads, puts: Puts, tree: Tree,
                 delete_path: Callable[[str, str], None]):
        self.s3 = s3
        self.sizes = sizes
        self.uploads = uploads
        self.puts = puts
        self.tree = tree
        self.delete_path = delete_path

    def copy(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        """A server-side copy; ``if_version``: only while ``dst`` is that version (CopyObject's
        If-Match / If-None-Match; above 5 GiB the multipart copy's CompleteMultipartUpload's)."""
        check_key(src)
        check_key(dst)
        info = self.tree.stat(src)
        if info.size > self.sizes.copy_threshold:
            return self._multipart_copy(src, dst, if_version)
        s3 = self.s3
        source = {"Bucket": s3.bucket, "Key": s3.full(src)}
        try:
            resp = s3.client.copy_object(Bucket=s3.bucket, Key=s3.full(dst), CopySource=source,
                                         **s3.options.writes(), **boto_conditions(if_version))
        except Exception as exc:
            err = translate_boto(exc, src, f"copy to {dst!r}")
            if if_version is not None and refused_condition(err, if_version) and not isinstance(err, KeyNotFound):
                return self.puts.conflict(dst, if_version, "")
            raise err from None
        etag = bare_etag(resp.get("CopyObjectResult", {}).get("ETag"))
        return ObjectInfo(dst, info.size, time.time_ns(), etag)

    def _multipart_copy(self, src: str, dst: str, if_version: str | None) -> ObjectInfo:
        """A copy above CopyObject's limit, as s3transfer makes one (a HEAD of the source for its
        size and the metadata kept, CreateMultipartUpload, UploadPartCopy parts in parallel), but
        finished by the multipart upload's own CompleteMultipartUpload, which carries ``if_version``
        as a write's does (a change of ``dst`` meanwhile refuses it); any failure aborts it."""
        s3 = self.s3
        s3_key, source = s3.full(dst), {"Bucket": s3.bucket, "Key": s3.full(src)}
        try:
            head = s3.client.head_object(**source, **s3.options.payer())
        except Exception as exc:
            raise translate_boto(exc, src, f"copy to {dst!r}") from None
        size = int(head["ContentLength"])
        upload_id = self.uploads.create(dst, s3_key, {k: head[k] for k in KEPT if k in head})
        part = max(self.sizes.part_size, -(-size // 9000))
        etags: dict[int, str] = {}

        def send(number: int) -> None:
            first = (number - 1) * part
            etags[number] = s3.client.upload_part_copy(
                Bucket=s3.bucket, Key=s3_key, UploadId=upload_id, PartNumber=number, CopySource=source,
                CopySourceRange=f"bytes={first}-{min(size, first + part) - 1}", **s3.options.payer(),
            )["CopyPartResult"]["ETag"]

        try:
            with ThreadPoolExecutor(max_workers=min(8, self.sizes.max_concurrency)) as pool:
                list(pool.map(send, range(1, -(-size // part) + 1)))
        except Exception as exc:
            self.uploads.abort_staged(dst, s3_key, upload_id)
            raise translate_boto(exc, src, f"UploadPartCopy to {dst!r}") from None
        return self.uploads.complete(dst, s3_key, upload_id, etags, size, if_version)

    def rename_dir(self, src: str, dst: str) -> None:
        """Copy every key (in parallel), then delete the sources that were copied.

        If some copies fail, the keys that were copied are moved and the rest stay under
        ``src``; no object is lost, and the error lists what was not moved.
        """
        check_key(src)
        check_key(dst)
        keys = self.tree.list_prefix(src)

        def move(key: str) -> str | None:
            try:
                self.copy(key, dst + key[len(src) :])
            except NczfsError as exc:
                log.error("rename of %r to %r: %s", key, dst + key[len(src) :], exc)
                return key
            self.tree.delete(key)
            return None

        with ThreadPoolExecutor(max_workers=min(8, self.sizes.max_concurrency)) as pool:
            failed = [k for k in pool.map(move, keys) if k is not None]
        if not failed:
            self.forget_dir(src)
        else:
            shown = ", ".join(repr(k) for k in failed[:5]) + (" ..." if len(failed) > 5 else "")
            raise BackendError(
                f"{src!r} -> {dst!r}: {len(failed)} of {len(keys)} objects could not be moved and stay "
                f"under {src!r}: {shown}"
            )

    def forget_dir(self, prefix: str) -> None:
        """A directory with no keys left was removed or moved: delete the markers below and at
        ``prefix/`` (other tools' markers, or folders a server kept after their last key went),
        deepest first. Costs one LIST per such folder and one DELETE (a no-op on AWS if absent)."""
        check_key(prefix)
        for entry in self.tree.list_dir(prefix):
            if entry.is_dir:
                self.forget_dir(join(prefix, entry.name))
        self._drop_marker(prefix)

    def _drop_marker(self, prefix: str) -> None:
        """Delete ``prefix/`` (a directory marker other tools write; absent markers cost one no-op DELETE)."""
        self.delete_path(prefix, self.s3.full(prefix) + "/")

