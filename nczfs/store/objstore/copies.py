"""Copies and moves of S3 objects: server-side (CopyObject, a multipart copy above 5 GiB), a
directory's keys in parallel, and the markers a removed directory leaves.

:class:`Copies` is a part of :class:`~nczfs.store.objstore.store.S3Store`.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from nczfs.toolbox.errors import BackendError, KeyNotFound, NczfsError
from nczfs.store.keys import check_key, join
from nczfs.store.values import ObjectInfo
from nczfs.store.objstore.errors import translate_boto
from nczfs.store.objstore.obprefix import bare_etag, boto_conditions
from nczfs.store.objstore.puts import refused_condition

log = logging.getLogger(__name__)

#: what a multipart copy keeps of the source's HEAD (as s3transfer's does)
KEPT = ("CacheControl", "ContentDisposition", "ContentEncoding", "ContentLanguage", "ContentType", "Expires",
        "Metadata")


class Copies:
    """``copy``, ``rename_dir`` and ``forget_dir`` of the S3 store."""

    client: Any
    bucket: str

    def copy(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        """A server-side copy; ``if_version``: only while ``dst`` is that version (CopyObject's
        If-Match / If-None-Match; above 5 GiB the multipart copy's CompleteMultipartUpload's)."""
        check_key(src)
        check_key(dst)
        self.check_writable(dst)
        info = self.stat(src)
        if info.size > self.copy_threshold:
            return self._multipart_copy(src, dst, if_version)
        source = {"Bucket": self.bucket, "Key": self._full(src)}
        try:
            resp = self.client.copy_object(Bucket=self.bucket, Key=self._full(dst), CopySource=source,
                                           **self.options.writes(), **boto_conditions(if_version))
        except Exception as exc:
            err = translate_boto(exc, src, f"copy to {dst!r}")
            if if_version is not None and refused_condition(err, if_version) and not isinstance(err, KeyNotFound):
                return self.conflict(dst, if_version, "")
            raise err from None
        etag = bare_etag(resp.get("CopyObjectResult", {}).get("ETag"))
        return ObjectInfo(dst, info.size, time.time_ns(), etag)

    def _multipart_copy(self, src: str, dst: str, if_version: str | None) -> ObjectInfo:
        """A copy above CopyObject's limit, as s3transfer makes one (a HEAD of the source for its
        size and the metadata kept, CreateMultipartUpload, UploadPartCopy parts in parallel), but
        finished by the multipart upload's own CompleteMultipartUpload, which carries ``if_version``
        as a write's does (a change of ``dst`` meanwhile refuses it); any failure aborts it."""
        s3_key, source = self._full(dst), {"Bucket": self.bucket, "Key": self._full(src)}
        try:
            head = self.client.head_object(**source, **self.options.payer())
        except Exception as exc:
            raise translate_boto(exc, src, f"copy to {dst!r}") from None
        size = int(head["ContentLength"])
        upload_id = self._create_upload(dst, s3_key, {k: head[k] for k in KEPT if k in head})
        part = max(self.part_size, -(-size // 9000))
        etags: dict[int, str] = {}

        def send(number: int) -> None:
            first = (number - 1) * part
            etags[number] = self.client.upload_part_copy(
                Bucket=self.bucket, Key=s3_key, UploadId=upload_id, PartNumber=number, CopySource=source,
                CopySourceRange=f"bytes={first}-{min(size, first + part) - 1}", **self.options.payer(),
            )["CopyPartResult"]["ETag"]

        try:
            with ThreadPoolExecutor(max_workers=min(8, self.max_concurrency)) as pool:
                list(pool.map(send, range(1, -(-size // part) + 1)))
        except Exception as exc:
            self._abort_staged(dst, s3_key, upload_id)
            raise translate_boto(exc, src, f"UploadPartCopy to {dst!r}") from None
        return self._complete(dst, s3_key, upload_id, etags, size, if_version)

    def rename_dir(self, src: str, dst: str) -> None:
        """Copy every key (in parallel), then delete the sources that were copied.

        If some copies fail, the keys that were copied are moved and the rest stay under
        ``src``; no object is lost, and the error lists what was not moved.
        """
        check_key(src)
        check_key(dst)
        self.check_writable(dst)
        keys = self.list_prefix(src)

        def move(key: str) -> str | None:
            try:
                self.copy(key, dst + key[len(src) :])
            except NczfsError as exc:
                log.error("rename of %r to %r: %s", key, dst + key[len(src) :], exc)
                return key
            self.delete(key)
            return None

        with ThreadPoolExecutor(max_workers=min(8, self.max_concurrency)) as pool:
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
        self.check_writable(prefix)
        for entry in self.list_dir(prefix):
            if entry.is_dir:
                self.forget_dir(join(prefix, entry.name))
        self._drop_marker(prefix)

    def _drop_marker(self, prefix: str) -> None:
        """Delete ``prefix/`` (a directory marker other tools write; absent markers cost one no-op DELETE)."""
        self._delete_path(prefix, self._full(prefix) + "/")

