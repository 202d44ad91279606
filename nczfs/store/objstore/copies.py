"""Copies and moves of S3 objects: server-side (CopyObject, a multipart copy above 5 GiB), a
directory's keys in parallel, and the markers a removed directory leaves.

:class:`Copies` is a part of :class:`~nczfs.store.objstore.store.S3Store`.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from boto3.s3.transfer import TransferConfig

from nczfs.toolbox.errors import BackendError, KeyNotFound, NczfsError
from nczfs.store.keys import check_key, join
from nczfs.store.values import ObjectInfo
from nczfs.store.objstore.errors import translate_boto
from nczfs.store.objstore.obprefix import bare_etag, boto_conditions
from nczfs.store.objstore.puts import refused_condition

log = logging.getLogger(__name__)


class Copies:
    """``copy``, ``rename_dir`` and ``forget_dir`` of the S3 store."""

    client: Any
    bucket: str

    def copy(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        """A server-side copy; ``if_version``: only while ``dst`` is that version (CopyObject's
        If-Match / If-None-Match; a multipart copy above 5 GiB is not conditioned)."""
        check_key(src)
        check_key(dst)
        self.check_writable(dst)
        info = self.stat(src)
        source = {"Bucket": self.bucket, "Key": self._full(src)}
        try:
            if info.size <= self.copy_threshold:
                resp = self.client.copy_object(Bucket=self.bucket, Key=self._full(dst), CopySource=source,
                                               **self.options.writes(), **boto_conditions(if_version))
                etag = bare_etag(resp.get("CopyObjectResult", {}).get("ETag"))
                return ObjectInfo(dst, info.size, time.time_ns(), etag)
            cfg = TransferConfig(
                multipart_threshold=self.copy_threshold,
                multipart_chunksize=max(self.part_size, -(-info.size // 9000)),
                max_concurrency=min(8, self.max_concurrency),
            )
            self.client.copy(source, self.bucket, self._full(dst), ExtraArgs=self.options.writes() or None, Config=cfg)
        except Exception as exc:
            err = translate_boto(exc, src, f"copy to {dst!r}")
            if if_version is not None and refused_condition(err, if_version) and not isinstance(err, KeyNotFound):
                return self.conflict(dst, if_version, "")
            raise err from None
        return self.stat(dst)

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

