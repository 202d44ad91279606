"""Multipart uploads of S3 objects by upload id, through boto3: objects above the multipart
threshold, data staged for a rename (``stage``), files sent while they are written
(``open_upload``); and what a request without an answer may have left (swept, or aborted).

Every upload is noted (``upload_log``, runstate.UploadJournal) while it is open, so that those a
killed daemon left open are aborted by the next mount (:meth:`MultipartUploads.abort_uploads`).
:class:`MultipartUploads` is a part of :class:`~nczfs.store.objstore.store.S3Store`, which checks
the keys and that it is writable before it asks.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass, replace
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, Callable

from nczfs.toolbox.errors import BackendError, OutcomeUnknown
from nczfs.store.values import ObjectInfo, Staged, Upload
from nczfs.store.objstore.errors import message_of, translate_boto, upload_gone
from nczfs.store.objstore.meta import MetaOfWrites
from nczfs.store.objstore.obprefix import bare_etag, boto_conditions
from nczfs.store.objstore.puts import Puts, refused_condition
from nczfs.store.objstore.s3bucket import S3Bucket
from nczfs.store.objstore.sizes import PartSizes

log = logging.getLogger(__name__)

#: an unanswered CreateMultipartUpload may still make an upload whose id nczfs never learns:
#: uploads of its key begun from this many seconds before it (server clocks differ) are swept
SWEEP_MARGIN = 60.0


@dataclass(frozen=True)
class _Sending:
    """A multipart upload being sent: an :class:`~nczfs.store.values.Upload` of this sync store,
    whose callables block (an Upload's are typed for the async form too)."""

    send: Callable[[int, bytes | memoryview], None]
    complete: Callable[..., ObjectInfo]
    abort: Callable[[], None]


class MultipartUploads:
    """The multipart uploads of ``s3``, cut as ``sizes`` says, with the attributes ``meta`` holds
    for the key; ``puts`` looks for a completion that got no answer and answers a refused one.
    Each upload is listed here while it is open, and noted in ``upload_log`` (given by the mount:
    ``opened(id, s3_key)``, ``done(id)``), so that those a killed daemon left open can be aborted
    later (runstate.UploadJournal); :meth:`close` aborts those still open."""

    def __init__(self, s3: S3Bucket, sizes: PartSizes, puts: Puts, meta: MetaOfWrites):
        self.s3 = s3
        self.sizes = sizes
        self.puts = puts
        self.meta = meta
        self.upload_log: Any = None
        #: unfinished multipart uploads (staged, or being sent), by upload id: aborted at close if still there
        self._staged: dict[str, str] = {}
        #: CreateMultipartUploads that got no answer ("?TIME" -> S3 key): swept at close
        self._unanswered: dict[str, str] = {}
        self._lock = threading.Lock()

    def write(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        """``data`` stored as ``key`` by one multipart upload."""
        view = memoryview(data)
        return self._multipart(key, len(data), lambda start, size: view[start : start + size]).complete(len(data), if_version)

    def write_file(self, key: str, f: BinaryIO, size: int, if_version: str | None = None) -> ObjectInfo:
        """Store ``size`` bytes of the file object ``f`` from its position by one multipart
        upload, its parts read one at a time (so at most one part per sending thread is in
        memory) and sent in parallel."""
        base, reading = f.tell(), threading.Lock()

        def part(start: int, length: int) -> bytes:
            with reading:
                f.seek(base + start)
                data = f.read(length)
            if len(data) != length:
                raise BackendError(f"{key!r}: the data to upload ends at byte {start + len(data)}, before {start + length}")
            return data

        return self._multipart(key, size, part).complete(size, if_version)

    def stage(self, key: str, data: bytes) -> Staged | None:
        """The parts of a multipart upload of ``key``, sent now, invisible until ``commit``
        (CompleteMultipartUpload: the whole object appears at once) or dropped by ``abort``."""
        if not data:
            return None  # an upload needs at least one part; an empty object is one cheap PUT anyway
        view = memoryview(data)
        sent = self._multipart(key, len(data), lambda start, size: data if size == len(data) else view[start : start + size])
        return Staged(key, lambda if_version=None: sent.complete(len(data), if_version), sent.abort)

    def _multipart(self, key: str, size: int, part: Callable[[int, int], bytes | memoryview]) -> _Sending:
        """A multipart upload of ``size`` bytes to ``key``, its parts (``part(start, length)``
        gives each: ``part_size`` bytes, the last one shorter) sent in parallel, as s3transfer
        sends them; returns it to complete or abort. Any failure
        aborts it: no parts are left behind."""
        upload = self._open(key)
        part_size = self.sizes.part_size
        starts = range(0, size, part_size)
        try:
            def send(number: int) -> None:
                start = starts[number - 1]
                upload.send(number, part(start, min(part_size, size - start)))

            if len(starts) == 1:
                send(1)
            else:
                with ThreadPoolExecutor(max_workers=min(8, self.sizes.max_concurrency, len(starts))) as pool:
                    list(pool.map(send, range(1, len(starts) + 1)))
        except Exception as exc:
            upload.abort()
            raise translate_boto(exc, key, "UploadPart") from None
        return upload

    def open_upload(self, key: str) -> Upload:
        """A multipart upload of ``key``, its parts sent as they come (from any thread), made the
        object by ``complete`` (CompleteMultipartUpload of the parts 1..n sent) or dropped by
        ``abort``; a failed completion aborts it. Until then it is listed for :meth:`close`."""
        upload = self._open(key)
        return Upload(key, self.sizes.part_size, upload.send, upload.complete, upload.abort)

    def _open(self, key: str) -> _Sending:
        """:meth:`open_upload`, its callables typed as the blocking ones they are."""
        s3_key = self.s3.full(key)
        meta, headers = self.meta.to_write(key)
        upload_id = self.create(key, s3_key, {"Metadata": headers})
        etags: dict[int, str] = {}

        def send(number: int, data: bytes | memoryview) -> None:
            try:
                etags[number] = self.upload_part(s3_key, upload_id, number, data)
            except Exception as exc:
                raise translate_boto(exc, key, "UploadPart") from None

        def complete(size: int, if_version: str | None = None) -> ObjectInfo:
            info = self.complete(key, s3_key, upload_id, etags, size, if_version)
            return replace(info, meta=meta, mtime_ns=meta.mtime_ns or info.mtime_ns) if meta is not None else info

        return _Sending(send, complete, lambda: self.abort_staged(key, s3_key, upload_id))

    def create(self, key: str, s3_key: str, extra: dict[str, Any]) -> str:
        """CreateMultipartUpload of ``s3_key`` (``extra``: its metadata) with the mount's write
        options; the upload's id, noted (journal, and to abort at close) until it is finished."""
        # noted before it is sent: a daemon killed while the request is on its way, or before it
        # notes the answer, leaves the mark, and the next mount sweeps what the server made
        mark = f"?{time.time():.6f}"
        self._log_upload("opened", mark, s3_key)
        s3 = self.s3
        s3.start_request()
        try:
            upload_id = s3.client.create_multipart_upload(Bucket=s3.bucket, Key=s3_key, **extra,
                                                          **s3.options.writes())["UploadId"]
        except Exception as exc:
            err = translate_boto(exc, key, "CreateMultipartUpload")
            self._settle_create(mark, s3_key, isinstance(err, OutcomeUnknown))
            raise err from None
        with self._lock:
            self._staged[upload_id] = s3_key
        self._log_upload("opened", upload_id, s3_key)
        self._settle_create(mark, s3_key, False)
        return upload_id

    def complete(self, key: str, s3_key: str, upload_id: str, etags: dict[int, str], size: int,
                  if_version: str | None) -> ObjectInfo:
        """CompleteMultipartUpload of the parts ``etags`` sent (``if_version``: only while the
        object is that version, or absent); a failure aborts the upload."""
        numbers = sorted(etags)
        try:
            if not numbers or numbers != list(range(1, len(numbers) + 1)):
                raise BackendError(f"{key!r}: parts {numbers} sent, not 1..n")
            tags = [etags[n] for n in numbers]
            etag = self.s3.client.complete_multipart_upload(
                Bucket=self.s3.bucket, Key=s3_key, UploadId=upload_id, **self.s3.options.payer(),
                MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(tags, 1)]},
                **boto_conditions(if_version),
            ).get("ETag")
        except Exception as exc:
            err = translate_boto(exc, key, "CompleteMultipartUpload")
            if isinstance(err, OutcomeUnknown):
                return self._settle(key, s3_key, upload_id, [etags[n] for n in numbers], err)
            self.abort_staged(key, s3_key, upload_id)
            if if_version is not None and refused_condition(err, if_version):
                return self.puts.conflict(key, if_version, "")
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
        found = self.puts.holds(key, expected)
        if found is None:
            try:
                self.s3.client.abort_multipart_upload(Bucket=self.s3.bucket, Key=s3_key, UploadId=upload_id,
                                                      **self.s3.options.payer())
            except Exception as exc:  # noqa: BLE001
                log.warning("%r: the upload %s whose completion got no answer could not be aborted either: %s",
                            key, upload_id, message_of(exc))
            else:
                self._finished(upload_id)
            found = self.puts.holds(key, expected)
            if found is None:
                raise err from None
        self._finished(upload_id)
        return found

    def _finished(self, upload_id: str) -> None:
        """An upload completed or aborted: no longer to abort, at close or after a crash."""
        with self._lock:
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
        if unknown or self.s3.was_unanswered():
            with self._lock:
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
            found = self.s3.client.list_multipart_uploads(Bucket=self.s3.bucket, Prefix=s3_key).get("Uploads", [])
            with self._lock:
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
            self.s3.client.abort_multipart_upload(Bucket=self.s3.bucket, Key=s3_key, UploadId=upload_id,
                                                  **self.s3.options.payer())
        except Exception as exc:
            if not upload_gone(exc):
                raise

    def upload_part(self, s3_key: str, upload_id: str, number: int, part: bytes | memoryview) -> str:
        """UploadPart: the part's ETag."""
        return self.s3.client.upload_part(Bucket=self.s3.bucket, Key=s3_key, UploadId=upload_id, PartNumber=number,
                                          **self.s3.options.payer(),
                                          Body=part if isinstance(part, bytes) else bytes(part))["ETag"]

    def abort_staged(self, key: str, s3_key: str, upload_id: str) -> None:
        with self._lock:
            if self._staged.pop(upload_id, None) is None:
                return  # completed or aborted already
        try:
            self.s3.client.abort_multipart_upload(Bucket=self.s3.bucket, Key=s3_key, UploadId=upload_id,
                                                  **self.s3.options.payer())
        except Exception as exc:  # the parts stay invisible: the next mount aborts them (runstate.py)
            log.warning("%r: could not abort the staged upload %s: %s", key, upload_id, message_of(exc))
            return
        self._log_upload("done", upload_id)

    def close(self) -> None:
        """Abort the uploads still open (written to temp files never renamed into place) and
        sweep what CreateMultipartUploads without an answer may have made."""
        with self._lock:
            staged = list(self._staged.items())
            unanswered, self._unanswered = dict(self._unanswered), {}
        for upload_id, s3_key in staged:
            self.abort_staged(s3_key, s3_key, upload_id)
        for mark, s3_key in unanswered.items():
            if self._sweep(mark, s3_key):
                self._log_upload("done", mark)
