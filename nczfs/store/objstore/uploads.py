"""Multipart uploads of S3 objects by upload id, through boto3: objects above the multipart
threshold, data staged for a rename (``stage``), files sent while they are written
(``open_upload``); and what a request without an answer may have left (swept, or aborted).

Every upload is noted (``upload_log``, runstate.UploadJournal) while it is open, so that those a
killed daemon left open are aborted by the next mount (:meth:`MultipartUploads.abort_uploads`).
:class:`MultipartUploads` is a part of :class:`~nczfs.store.objstore.store.S3Store`.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import replace
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, Callable

from nczfs.toolbox.errors import BackendError, OutcomeUnknown
from nczfs.store.keys import check_key
from nczfs.store.values import ObjectInfo, Staged, Upload
from nczfs.store.objstore.errors import message_of, translate_boto, upload_gone
from nczfs.store.objstore.obprefix import bare_etag, boto_conditions
from nczfs.store.objstore.puts import refused_condition

log = logging.getLogger(__name__)

#: an unanswered CreateMultipartUpload may still make an upload whose id nczfs never learns:
#: uploads of its key begun from this many seconds before it (server clocks differ) are swept
SWEEP_MARGIN = 60.0


class MultipartUploads:
    """``set``/``set_file`` above the multipart threshold, ``stage`` and ``open_upload`` of the S3 store."""

    client: Any
    bucket: str

    def set(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        check_key(key)
        self.check_writable(key)
        if len(data) >= self.multipart_threshold:
            view = memoryview(data)
            return self._multipart(key, len(data), lambda start, size: view[start : start + size]).commit(if_version)
        return self._put(key, data, len(data), if_version)

    def set_file(self, key: str, f: BinaryIO, size: int, if_version: str | None = None) -> ObjectInfo:
        """Store ``size`` bytes of the file object ``f`` from its position; above the multipart
        threshold its parts are read one at a time (so at most one part per sending thread is in
        memory) and sent in parallel."""
        if size < self.multipart_threshold:
            return super().set_file(key, f, size, if_version)  # one PutObject, a short file refused
        check_key(key)
        self.check_writable(key)
        base, reading = f.tell(), threading.Lock()

        def part(start: int, length: int) -> bytes:
            with reading:
                f.seek(base + start)
                data = f.read(length)
            if len(data) != length:
                raise BackendError(f"{key!r}: the data to upload ends at byte {start + len(data)}, before {start + length}")
            return data

        return self._multipart(key, size, part).commit(if_version)

    def stage(self, key: str, data: bytes) -> Staged | None:
        """The parts of a multipart upload of ``key``, sent now, invisible until ``commit``
        (CompleteMultipartUpload: the whole object appears at once) or dropped by ``abort``."""
        check_key(key)
        self.check_writable(key)
        if not data:
            return None  # an upload needs at least one part; an empty object is one cheap PUT anyway
        view = memoryview(data)
        return self._multipart(key, len(data), lambda start, size: data if size == len(data) else view[start : start + size])

    def _multipart(self, key: str, size: int, part: Callable[[int, int], bytes | memoryview]) -> Staged:
        """A multipart upload of ``size`` bytes to ``key``, its parts (``part(start, length)``
        gives each: ``part_size`` bytes, the last one shorter) sent in parallel, as s3transfer
        sends them; returns it staged. Any failure
        aborts it: no parts are left behind."""
        upload = self.open_upload(key)
        starts = range(0, size, self.part_size)
        try:
            def send(number: int) -> None:
                start = starts[number - 1]
                upload.send(number, part(start, min(self.part_size, size - start)))  # type: ignore[arg-type]  # bytes-like: a view of the file's part

            if len(starts) == 1:
                send(1)
            else:
                with ThreadPoolExecutor(max_workers=min(8, self.max_concurrency, len(starts))) as pool:
                    list(pool.map(send, range(1, len(starts) + 1)))
        except Exception as exc:
            upload.abort()
            raise translate_boto(exc, key, "UploadPart") from None
        return Staged(key, lambda if_version=None: upload.complete(size, if_version), upload.abort)

    def open_upload(self, key: str) -> Upload:
        """A multipart upload of ``key``, its parts sent as they come (from any thread), made the
        object by ``complete`` (CompleteMultipartUpload of the parts 1..n sent) or dropped by
        ``abort``; a failed completion aborts it. Until then it is listed for :meth:`close`."""
        check_key(key)
        self.check_writable(key)
        s3_key = self._full(key)
        meta, headers = self._meta_to_write(key)
        upload_id = self._create_upload(key, s3_key, {"Metadata": headers})
        etags: dict[int, str] = {}

        def send(number: int, data: bytes | memoryview) -> None:
            try:
                etags[number] = self._upload_part(key, s3_key, upload_id, number, data)
            except Exception as exc:
                raise translate_boto(exc, key, "UploadPart") from None

        def complete(size: int, if_version: str | None = None) -> ObjectInfo:
            info = self._complete(key, s3_key, upload_id, etags, size, if_version)
            return replace(info, meta=meta, mtime_ns=meta.mtime_ns or info.mtime_ns) if meta is not None else info

        return Upload(key, self.part_size, send, complete, lambda: self._abort_staged(key, s3_key, upload_id))

    def _create_upload(self, key: str, s3_key: str, extra: dict[str, Any]) -> str:
        """CreateMultipartUpload of ``s3_key`` (``extra``: its metadata) with the mount's write
        options; the upload's id, noted (journal, and to abort at close) until it is finished."""
        # noted before it is sent: a daemon killed while the request is on its way, or before it
        # notes the answer, leaves the mark, and the next mount sweeps what the server made
        mark = f"?{time.time():.6f}"
        self._log_upload("opened", mark, s3_key)
        self._attempts.unanswered = False
        try:
            upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=s3_key, **extra,
                                                            **self.options.writes())["UploadId"]
        except Exception as exc:
            err = translate_boto(exc, key, "CreateMultipartUpload")
            self._settle_create(mark, s3_key, isinstance(err, OutcomeUnknown))
            raise err from None
        with self._count_lock:
            self._staged[upload_id] = s3_key
        self._log_upload("opened", upload_id, s3_key)
        self._settle_create(mark, s3_key, False)
        return upload_id

    def _complete(self, key: str, s3_key: str, upload_id: str, etags: dict[int, str], size: int,
                  if_version: str | None) -> ObjectInfo:
        """CompleteMultipartUpload of the parts ``etags`` sent (``if_version``: only while the
        object is that version, or absent); a failure aborts the upload."""
        numbers = sorted(etags)
        try:
            if not numbers or numbers != list(range(1, len(numbers) + 1)):
                raise BackendError(f"{key!r}: parts {numbers} sent, not 1..n")
            tags = [etags[n] for n in numbers]
            etag = self.client.complete_multipart_upload(
                Bucket=self.bucket, Key=s3_key, UploadId=upload_id, **self.options.payer(),
                MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(tags, 1)]},
                **boto_conditions(if_version),
            ).get("ETag")
        except Exception as exc:
            err = translate_boto(exc, key, "CompleteMultipartUpload")
            if isinstance(err, OutcomeUnknown):
                return self._settle(key, s3_key, upload_id, [etags[n] for n in numbers], err)
            self._abort_staged(key, s3_key, upload_id)
            if if_version is not None and refused_condition(err, if_version):
                return self.conflict(key, if_version, "")
            raise err from None
        self._finished(upload_id)
        return ObjectInfo(key, size, time.time_ns(), bare_etag(etag))

    def _settle(self, key: str, s3_key: str, upload_id: str, tags: list[str], err: OutcomeUnknown) -> ObjectInfo:
        """A CompleteMultipartUpload that got no answer: done, if the object's ETag is the
        upload's. If not, the upload is aborted, so that a completion the server carries out
        later should find none (the object is looked at once more: it may have been done
        meanwhile); the outcome then stays unknown: ``err`` is raised (some servers, SeaweedFS
        among them, answer an abort of an upload already completed with success, and may carry
        out a completion and an abort that arrive together in either order)."""
        try:
            digest = hashlib.md5(b"".join(bytes.fromhex(bare_etag(t)) for t in tags), usedforsecurity=False)
            expected = f"{digest.hexdigest()}-{len(tags)}"
        except ValueError:  # parts' ETags that are no MD5s: the object cannot be recognised
            expected = ""
        found = self._holds(key, expected)
        if found is None:
            try:
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=s3_key, UploadId=upload_id,
                                                   **self.options.payer())
            except Exception as exc:  # noqa: BLE001
                log.warning("%r: the upload %s whose completion got no answer could not be aborted either: %s",
                            key, upload_id, message_of(exc))
            else:
                self._finished(upload_id)
            found = self._holds(key, expected)
            if found is None:
                raise err from None
        self._finished(upload_id)
        return found

    def _finished(self, upload_id: str) -> None:
        """An upload completed or aborted: no longer to abort, at close or after a crash."""
        with self._count_lock:
            if self._staged.pop(upload_id, None) is None:
                return
        self._log_upload("done", upload_id)

    def _log_upload(self, what: str, *args: str) -> None:
        if self.upload_log is None:
            return
        try:
            getattr(self.upload_log, what)(*args)
        except OSError as exc:  # the journal only helps clean up after a crash
            log.warning("multipart upload %s not recorded as %s: %s", args[0], what, exc)

    def _settle_create(self, mark: str, s3_key: str, unknown: bool) -> None:
        """A CreateMultipartUpload noted as ``mark`` (``?TIME``) is over. If an attempt of it got
        no answer (or its outcome is unknown), the server may still make an upload under an id
        never told: the mark stays, swept (:meth:`_sweep`) at close, or by the next mount through
        the journal if this daemon dies first; else it is done."""
        if unknown or self._attempts.unanswered:
            with self._count_lock:
                self._unanswered[mark] = s3_key
        else:
            self._log_upload("done", mark)

    def _sweep(self, unanswered: str, s3_key: str) -> bool:
        """Abort the uploads of ``s3_key`` that a CreateMultipartUpload without an answer, sent at
        the time ``unanswered`` (``?TIME``) names, may have made: those begun since (less
        SWEEP_MARGIN) that this store is not sending. (Another client's upload of that very key
        begun since would be aborted too: its completion then fails, and its object is unchanged.)
        False if the server could not be asked."""
        since = float(unanswered[1:]) - SWEEP_MARGIN
        try:
            found = self.client.list_multipart_uploads(Bucket=self.bucket, Prefix=s3_key).get("Uploads", [])
            with self._count_lock:
                ours = set(self._staged)
            for upload in found:
                initiated = upload.get("Initiated")
                if upload.get("Key") != s3_key or upload.get("UploadId") in ours:
                    continue
                if initiated is not None and initiated.timestamp() < since:
                    continue
                self._abort(s3_key, upload["UploadId"])
                log.info("%r: aborted the upload %s that a CreateMultipartUpload without an answer made",
                         s3_key, upload["UploadId"])
        except Exception as exc:  # noqa: BLE001
            log.warning("%r: uploads a CreateMultipartUpload without an answer may have made were not swept: %s",
                        s3_key, message_of(exc))
            return False
        return True

    @property
    def scope(self) -> str:
        """Where this store's objects live: the endpoint, the bucket and the prefix."""
        return f"{self.client.meta.endpoint_url}/{self.bucket}/{self.prefix}"

    def abort_uploads(self, uploads: dict[str, str]) -> dict[str, str]:
        """Abort the multipart uploads ``uploads`` (upload id -> S3 key under this prefix) that
        a daemon killed while sending them left open; one already gone is no error; an id
        ``?TIME`` is a CreateMultipartUpload that got no answer (:meth:`_sweep`). Returns those
        that could not be aborted (upload id -> key)."""
        left = {}
        for upload_id, s3_key in uploads.items():
            if upload_id.startswith("?"):
                if not self._sweep(upload_id, s3_key):
                    left[upload_id] = s3_key
                continue
            try:
                self._abort(s3_key, upload_id)
            except Exception as exc:  # noqa: BLE001
                log.warning("%r: the multipart upload %s a killed mount left open could not be aborted: %s",
                            s3_key, upload_id, message_of(exc))
                left[upload_id] = s3_key
        return left

    def _abort(self, s3_key: str, upload_id: str) -> None:
        """AbortMultipartUpload; an upload already gone (completed or aborted) is no error."""
        try:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=s3_key, UploadId=upload_id, **self.options.payer())
        except Exception as exc:
            if not upload_gone(exc):
                raise

    def _upload_part(self, key: str, s3_key: str, upload_id: str, number: int, part: bytes | memoryview) -> str:
        return self.client.upload_part(Bucket=self.bucket, Key=s3_key, UploadId=upload_id, PartNumber=number,
                                       **self.options.payer(),
                                       Body=part if isinstance(part, bytes) else bytes(part))["ETag"]

    def _abort_staged(self, key: str, s3_key: str, upload_id: str) -> None:
        with self._count_lock:
            if self._staged.pop(upload_id, None) is None:
                return  # completed or aborted already
        try:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=s3_key, UploadId=upload_id, **self.options.payer())
        except Exception as exc:  # the parts stay invisible: the next mount aborts them (runstate.py)
            log.warning("%r: could not abort the staged upload %s: %s", key, upload_id, message_of(exc))
            return
        self._log_upload("done", upload_id)
