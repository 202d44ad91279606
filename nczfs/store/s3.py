"""A prefix of an S3 bucket as a store, through boto3 (blocking; lifted by ThreadedStore).

S3 error codes become nczfs exceptions here and nowhere else. Keys map to ``<prefix>/<key>``.
Reads are ranged GETs (``If-Match`` pins an open file to one version); listings are
ListObjectsV2 with delimiter ``/``, paginated; writes are one PutObject, or a multipart upload
above ``multipart_threshold`` (parts sent in parallel, a file's read part by part; aborted on
failure). No directory-marker objects are written; keys ending in ``/`` written by other tools
show as directories.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, BinaryIO

import boto3
import botocore.exceptions
from boto3.s3.transfer import TransferConfig
from botocore import UNSIGNED
from botocore.config import Config

from nczfs.errors import (
    BackendError,
    InvalidKey,
    KeyNotFound,
    NameTooLong,
    NczfsError,
    PermissionDenied,
    SourceError,
    Stale,
)
from nczfs.s3url import S3Location, parse_s3_url
from nczfs.store.s3lean import LeanS3, RangeNotSatisfiable, ranged_body
from nczfs.store.base import (
    ByteRange,
    DirEntry,
    ObjectInfo,
    Staged,
    SyncStore,
    Upload,
    check_key,
    check_prefix,
    join,
    tree_listings,
    usable_name,
)
from nczfs.threads import run_blocking

if TYPE_CHECKING:
    from nczfs.config import MountConfig

log = logging.getLogger(__name__)

MAX_KEY_BYTES = 1024
#: CopyObject copies up to 5 GiB; larger objects need a multipart copy
MAX_SINGLE_COPY = 5 * 1024**3
NOT_FOUND = {"NoSuchKey", "404", "NotFound"}
DENIED = {"AccessDenied", "403", "Forbidden", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch"}


def _code(exc: botocore.exceptions.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _message(exc: Exception) -> str:
    if isinstance(exc, botocore.exceptions.ClientError):
        err = exc.response.get("Error", {})
        return f"{err.get('Code', '?')}: {err.get('Message', '')}".rstrip(": ")
    return str(exc) or type(exc).__name__


def translate(exc: Exception, key: str, op: str) -> NczfsError:
    """One S3/botocore failure as an nczfs exception naming the key, the operation and the S3 error."""
    if isinstance(exc, NczfsError):
        return exc
    if isinstance(exc, botocore.exceptions.ClientError):
        code = _code(exc)
        if code in NOT_FOUND:
            return KeyNotFound(key)
        if code in DENIED:
            return PermissionDenied(f"{key!r}: S3 {op} refused: {_message(exc)}")
        if code == "KeyTooLongError":
            return NameTooLong(f"{key!r}: S3 {op} refused: {_message(exc)}")
        if code in ("PreconditionFailed", "412"):
            return Stale(f"{key!r}: the object changed in S3 while open")
    return BackendError(f"{key!r}: S3 {op} failed: {_message(exc)}")


def _etag(value: str | None) -> str:
    return (value or "").strip('"')


def _range_header(rng: ByteRange | None) -> str | None:
    """The ``Range`` header for ``rng`` (None: the whole object)."""
    if rng is None or (rng.start == 0 and rng.end is None):
        return None
    return f"bytes={rng.start}-{'' if rng.end is None else rng.end - 1}"


def _past_the_end(key: str, rng: ByteRange | None, info: ObjectInfo) -> bytes:
    """What a GET answered "range not satisfiable" (416) reads: nothing if the range starts at
    or past the end of the object, as HTTP means; a range inside it is an error, not an end."""
    start = rng.start if rng is not None else 0
    if start < info.size:
        raise BackendError(f"{key!r}: S3 GetObject answered 416 for bytes from {start} of an object of {info.size}")
    return b""


def _mtime_ns(value: Any) -> int:
    return int(value.timestamp() * 1e9) if value is not None else time.time_ns()


def resolve_location(config: MountConfig) -> S3Location:
    return parse_s3_url(config.source.text)


def make_client(config: MountConfig, loc: S3Location | None = None, max_pool: int = 32):
    """One boto3 S3 client for a mount: endpoint, profile, region and signing as the AWS CLI would."""
    loc = loc or resolve_location(config)
    params = config.source.params
    profile = config.profile or params.get("aws.profile") or params.get("awsprofile")
    unsigned = config.no_sign_request or profile == "no"
    try:
        session = boto3.session.Session(profile_name=None if profile in (None, "no") else profile)
    except botocore.exceptions.BotoCoreError as exc:  # ProfileNotFound and friends
        raise SourceError(f"{config.source.text}: {exc}") from None
    region = (
        config.region or loc.region or params.get("aws.region") or session.region_name or "us-east-1"
    )
    endpoint = config.endpoint_url or loc.endpoint_url
    custom = bool(endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL"))
    cfg = Config(
        region_name=region,
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=5,
        read_timeout=60,
        max_pool_connections=max_pool,
        tcp_keepalive=True,
        s3={"addressing_style": "path" if custom or config.path_style else "auto"},
        signature_version=UNSIGNED if unsigned else None,
    )
    try:
        return session.client("s3", endpoint_url=endpoint, config=cfg)
    except (botocore.exceptions.BotoCoreError, ValueError) as exc:
        raise SourceError(f"{config.source.text}: {exc}") from None


def open_s3(config: MountConfig) -> S3Store:
    loc = resolve_location(config)
    store = S3Store(make_client(config, loc), loc.bucket, loc.prefix, read_only=config.read_only)
    store.probe(config.source.text)
    return store


class S3Store(SyncStore):
    stores_directories = False
    keys_form_a_tree = False
    checks_versions = True  # GETs carry If-Match
    lists_trees = True
    #: SeaweedFS (and S3 gateways over a filer) list a folder for a while after its last key is
    #: deleted; rmdir and directory renames delete those folders explicitly (see forget_dir)
    emptied_dirs_may_linger = True

    def __init__(
        self,
        client,
        bucket: str,
        prefix: str = "",
        *,
        read_only: bool = False,
        multipart_threshold: int = 32 * 1024**2,
        part_size: int = 8 * 1024**2,
        max_concurrency: int = 16,
        lean_requests: bool = True,
    ):
        self.client = client
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.read_only = read_only
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size
        self.copy_threshold = MAX_SINGLE_COPY
        #: ThreadedStore sizes its limiter from this (the client's connection pool)
        self.max_concurrency = max_concurrency
        self._counts: Counter[str] = Counter()
        self._count_lock = threading.Lock()
        #: unfinished multipart uploads (staged, or being sent), by upload id: aborted at close if still there
        self._staged: dict[str, str] = {}
        client.meta.events.register("before-send.s3", self._count_request)
        client.meta.events.register("needs-retry.s3", self._count_retry)
        #: GETs, listings and (over http://) PUTs signed and sent without botocore where that is
        #: exact (path-style endpoints); connections for the calls in the store's slots and in as
        #: many spare ones (threads.py)
        self.lean = LeanS3(client, bucket, count=self._count_one, pool_size=2 * max_concurrency) if lean_requests and LeanS3.usable(client) else None
        #: PutObject and UploadPart sent that way too, without botocore's per-byte CPU (http:// only)
        self._lean_puts = self.lean is not None and self.lean.puts

    # ------------------------------------------------------------------ helpers

    def _count_request(self, event_name: str = "", **_: Any) -> None:
        with self._count_lock:
            self._counts[event_name.rsplit(".", 1)[-1]] += 1

    def _count_retry(self, response: Any = None, caught_exception: Any = None, **_: Any) -> None:
        # called after every attempt; a retry follows when the attempt failed (a connection
        # error or a timeout, or a 5xx) and retries are left
        if caught_exception is not None or (response is not None and (response[0] is None or response[0].status_code >= 500)):
            with self._count_lock:
                self._counts["retries-considered"] += 1

    def _count_one(self, kind: str) -> None:
        with self._count_lock:
            self._counts[kind] += 1

    def counters(self) -> dict[str, int]:
        with self._count_lock:
            return dict(self._counts)

    def _full(self, key: str) -> str:
        full = f"{self.prefix}/{key}" if self.prefix else key
        try:
            full.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidKey(key, "S3 keys are UTF-8; this name is not") from None
        if "\\" in key:  # S3 gateways over a filer (SeaweedFS) turn it into "/"
            raise InvalidKey(key, "a backslash in an S3 key is refused (not portable between S3 servers)")
        if len(full.encode("utf-8")) > MAX_KEY_BYTES:
            raise NameTooLong(f"{key!r}: S3 keys are at most {MAX_KEY_BYTES} bytes")
        return full

    def _dir_prefix(self, prefix: str) -> str:
        """The S3 prefix listing the children of ``prefix`` ("" is the mount root)."""
        full = f"{self.prefix}/{prefix}" if self.prefix and prefix else (prefix or self.prefix)
        return f"{full}/" if full else ""

    def _info(self, key: str, item: dict) -> ObjectInfo:
        return ObjectInfo(key, int(item["Size"]), _mtime_ns(item.get("LastModified")), _etag(item.get("ETag")))

    def _pages(self, s3_prefix: str, delimiter: bool, key: str, max_keys: int | None = None):
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Prefix": s3_prefix}
        if delimiter:
            kwargs["Delimiter"] = "/"
        try:
            if self.lean is not None:  # parsed without botocore (s3lean.py)
                yield from self.lean.list_pages(key or "/", s3_prefix, delimiter, max_keys)
                return
            if max_keys is not None:
                kwargs["PaginationConfig"] = {"PageSize": max_keys}
            yield from self.client.get_paginator("list_objects_v2").paginate(**kwargs)
        except Exception as exc:
            raise translate(exc, key or "/", "ListObjectsV2") from None

    def probe(self, text: str) -> None:
        """Fail now, with one line, if the bucket is missing, the credentials wrong or the endpoint down."""
        try:
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=self._dir_prefix(""), MaxKeys=1)
        except botocore.exceptions.ClientError as exc:
            code = _code(exc)
            if code == "NoSuchBucket":
                raise SourceError(f"{text}: bucket {self.bucket!r} does not exist") from None
            if code in DENIED:
                raise SourceError(f"{text}: S3 refused the credentials or access ({_message(exc)})") from None
            raise SourceError(f"{text}: S3 error: {_message(exc)}") from None
        except botocore.exceptions.NoCredentialsError:
            raise SourceError(
                f"{text}: no AWS credentials found (set a profile, AWS_ACCESS_KEY_ID, or --no-sign-request)"
            ) from None
        except botocore.exceptions.BotoCoreError as exc:  # unreachable endpoint, timeouts, bad config
            raise SourceError(f"{text}: cannot reach S3: {exc}") from None

    # ------------------------------------------------------------------ reads

    def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        return self.get_version(key, rng, None)

    def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        check_key(key)
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": self._full(key)}
        if etag:
            kwargs["IfMatch"] = f'"{etag}"'
        if rng is not None and rng.end == rng.start:  # nothing to read: only say whether the object exists
            self.stat(key)
            return b""
        if (header := _range_header(rng)) is not None:
            kwargs["Range"] = header
        try:
            if self.lean is not None:  # the same GET without botocore's per-request CPU (s3lean.py)
                return self.lean.get(key, kwargs["Key"], kwargs.get("Range"), etag)
            resp = self.client.get_object(**kwargs)
            meta = resp["ResponseMetadata"]
            headers = {b"content-range": v.encode("latin-1") for k, v in meta.get("HTTPHeaders", {}).items() if k.lower() == "content-range"}
            return ranged_body(kwargs.get("Range"), meta.get("HTTPStatusCode", 200), headers, resp["Body"].read())
        except RangeNotSatisfiable:
            return _past_the_end(key, rng, self.stat(key))
        except botocore.exceptions.ClientError as exc:
            if _code(exc) == "InvalidRange":  # a range past the end: clipped to nothing
                return _past_the_end(key, rng, self.stat(key))
            raise translate(exc, key, "GetObject") from None
        except Exception as exc:
            raise translate(exc, key, "GetObject") from None

    async def get_version_async(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes | None:
        """:meth:`get_version` from the trio thread, without a worker thread's round trip (lean
        GETs over ``http://``, s3lean.py); None where only :meth:`get_version` can do it (the caller
        then runs that in a worker thread): no lean GETs here, an empty range."""
        if self.lean is None or (rng is not None and rng.end == rng.start):
            return None
        check_key(key)
        try:
            return await self.lean.get_async(key, self._full(key), _range_header(rng), etag)
        except RangeNotSatisfiable:  # a range past the end: empty, if the object exists
            return _past_the_end(key, rng, await run_blocking(self.stat, key))

    def stat(self, key: str) -> ObjectInfo:
        check_key(key)
        try:
            resp = self.client.head_object(Bucket=self.bucket, Key=self._full(key))
        except Exception as exc:
            raise translate(exc, key, "HeadObject") from None
        if resp.get("ContentLength") is None:  # a proxy that dropped it: not a size of 0
            raise BackendError(f"{key!r}: S3 HeadObject answered without a Content-Length")
        return ObjectInfo(key, int(resp["ContentLength"]), _mtime_ns(resp.get("LastModified")), _etag(resp.get("ETag")))

    def list_dir(self, prefix: str) -> list[DirEntry]:
        check_prefix(prefix)
        s3_prefix = self._dir_prefix(prefix)
        entries: dict[str, DirEntry] = {}
        for page in self._pages(s3_prefix, True, prefix):
            for cp in page.get("CommonPrefixes", ()):
                name = cp["Prefix"][len(s3_prefix) :].rstrip("/")
                if self._usable(name, cp["Prefix"]):
                    entries[name] = DirEntry(name, True)
            for item in page.get("Contents", ()):
                name = item["Key"][len(s3_prefix) :]
                if name == "" or not self._usable(name, item["Key"]):
                    continue  # the directory's own marker object
                if name not in entries:  # an object and a directory of one name: the directory wins
                    entries[name] = DirEntry(name, False, self._info(join(prefix, name), item))
        return [entries[n] for n in sorted(entries)]

    def list_tree(self, prefix: str, limit: int) -> dict[str, list[DirEntry]] | None:
        check_prefix(prefix)
        s3_prefix = self._dir_prefix(prefix)
        page = next(self._pages(s3_prefix, False, prefix, limit))  # the first page only
        if page.get("IsTruncated"):
            return None
        below = ((item["Key"][len(s3_prefix) :], item) for item in page.get("Contents", ()))
        return tree_listings(prefix, ((rel, self._info(join(prefix, rel), item)) for rel, item in below))

    @staticmethod
    def _usable(name: str, s3_key: str) -> bool:
        if not usable_name(name):
            log.debug("S3 key %r has no file name nczfs can show; skipped", s3_key)
            return False
        return True

    def list_prefix(self, prefix: str) -> list[str]:
        check_prefix(prefix)
        s3_prefix = self._dir_prefix(prefix)
        base = self._dir_prefix("")
        out = []
        for page in self._pages(s3_prefix, False, prefix):
            for item in page.get("Contents", ()):
                full = item["Key"]
                if full.endswith("/"):
                    continue  # directory marker
                key = full[len(base) :]
                try:
                    check_key(key)
                except NczfsError:
                    log.debug("S3 key %r cannot be shown; skipped", full)
                    continue
                out.append(key)
        return sorted(out)

    def dir_exists(self, prefix: str) -> bool:
        if prefix == "":
            return True
        check_key(prefix)
        try:
            resp = self.client.list_objects_v2(Bucket=self.bucket, Prefix=self._dir_prefix(prefix), MaxKeys=1)
        except Exception as exc:
            raise translate(exc, prefix, "ListObjectsV2") from None
        return bool(resp.get("KeyCount") or resp.get("Contents") or resp.get("CommonPrefixes"))

    def entry(self, key: str) -> DirEntry | None:
        """One LIST answers most lookups: the object itself, its directory, or nothing at all."""
        check_key(key)
        full = self._full(key)
        name = key.rpartition("/")[2]
        try:
            resp = self.client.list_objects_v2(Bucket=self.bucket, Prefix=full, Delimiter="/", MaxKeys=2)
        except Exception as exc:
            raise translate(exc, key, "ListObjectsV2") from None
        is_dir = any(cp["Prefix"] == full + "/" for cp in resp.get("CommonPrefixes", ()))
        if is_dir:
            return DirEntry(name, True)
        for item in resp.get("Contents", ()):
            if item["Key"] == full:
                return DirEntry(name, False, self._info(key, item))
        if not resp.get("IsTruncated"):
            return None
        # siblings such as "0.0" sort before "0/": ask for the directory itself
        return DirEntry(name, True) if self.dir_exists(key) else None

    # ------------------------------------------------------------------ writes

    def set(self, key: str, data: bytes | bytearray | memoryview) -> ObjectInfo:
        check_key(key)
        self.check_writable(key)
        if len(data) >= self.multipart_threshold:
            view = memoryview(data)
            return self._multipart(key, len(data), lambda start, size: view[start : start + size]).commit()
        try:
            if self._lean_puts:
                etag = self.lean.put("PutObject", key, self._full(key), data)
            else:
                etag = self.client.put_object(Bucket=self.bucket, Key=self._full(key), Body=bytes(data)).get("ETag")
        except Exception as exc:
            raise translate(exc, key, "PutObject") from None
        return ObjectInfo(key, len(data), time.time_ns(), _etag(etag))

    def set_file(self, key: str, f: BinaryIO, size: int) -> ObjectInfo:
        """Store ``size`` bytes of the file object ``f`` from its position; above the multipart
        threshold its parts are read one at a time (so at most one part per sending thread is in
        memory) and sent in parallel."""
        if size < self.multipart_threshold:
            return super().set_file(key, f, size)  # one PutObject, a short file refused
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

        return self._multipart(key, size, part).commit()

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
        sends them but through the lean client where it can; returns it staged. Any failure
        aborts it: no parts are left behind."""
        upload = self.open_upload(key)
        starts = range(0, size, self.part_size)
        try:
            def send(number: int) -> None:
                start = starts[number - 1]
                upload.send(number, part(start, min(self.part_size, size - start)))  # type: ignore[arg-type]

            if len(starts) == 1:
                send(1)
            else:
                with ThreadPoolExecutor(max_workers=min(8, self.max_concurrency, len(starts))) as pool:
                    list(pool.map(send, range(1, len(starts) + 1)))
        except Exception as exc:
            upload.abort()
            raise translate(exc, key, "UploadPart") from None
        return Staged(key, lambda: upload.complete(size), upload.abort)

    def open_upload(self, key: str) -> Upload:
        """A multipart upload of ``key``, its parts sent as they come (from any thread), made the
        object by ``complete`` (CompleteMultipartUpload of the parts 1..n sent) or dropped by
        ``abort``; a failed completion aborts it. Until then it is listed for :meth:`close`."""
        check_key(key)
        self.check_writable(key)
        s3_key = self._full(key)
        try:
            if self._lean_puts:
                upload_id = self.lean.create_upload(key, s3_key)
            else:
                upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=s3_key)["UploadId"]
        except Exception as exc:
            raise translate(exc, key, "CreateMultipartUpload") from None
        with self._count_lock:
            self._staged[upload_id] = s3_key
        etags: dict[int, str] = {}

        def send(number: int, data: bytes | memoryview) -> None:
            try:
                etags[number] = self._upload_part(key, s3_key, upload_id, number, data)
            except Exception as exc:
                raise translate(exc, key, "UploadPart") from None

        def complete(size: int) -> ObjectInfo:
            numbers = sorted(etags)
            try:
                if not numbers or numbers != list(range(1, len(numbers) + 1)):
                    raise BackendError(f"{key!r}: parts {numbers} sent, not 1..n")
                tags = [etags[n] for n in numbers]
                if self._lean_puts:
                    etag = self.lean.complete_upload(key, s3_key, upload_id, tags)
                else:
                    etag = self.client.complete_multipart_upload(
                        Bucket=self.bucket, Key=s3_key, UploadId=upload_id,
                        MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(tags, 1)]},
                    ).get("ETag")
            except Exception as exc:
                self._abort_staged(key, s3_key, upload_id)
                raise translate(exc, key, "CompleteMultipartUpload") from None
            with self._count_lock:
                self._staged.pop(upload_id, None)
            return ObjectInfo(key, size, time.time_ns(), _etag(etag))

        return Upload(key, self.part_size, send, complete, lambda: self._abort_staged(key, s3_key, upload_id))

    def _upload_part(self, key: str, s3_key: str, upload_id: str, number: int, part: bytes | memoryview) -> str:
        if self._lean_puts:
            return self.lean.put("UploadPart", key, s3_key, part, {"partNumber": str(number), "uploadId": upload_id})
        return self.client.upload_part(Bucket=self.bucket, Key=s3_key, UploadId=upload_id, PartNumber=number,
                                       Body=part if isinstance(part, bytes) else bytes(part))["ETag"]

    def _abort_staged(self, key: str, s3_key: str, upload_id: str) -> None:
        with self._count_lock:
            if self._staged.pop(upload_id, None) is None:
                return  # completed or aborted already
        try:
            self.client.abort_multipart_upload(Bucket=self.bucket, Key=s3_key, UploadId=upload_id)
        except Exception as exc:  # the parts stay invisible; a bucket lifecycle rule removes them
            log.warning("%r: could not abort the staged upload %s: %s", key, upload_id, _message(exc))

    def delete(self, key: str) -> None:
        check_key(key)
        self.check_writable(key)
        self._delete_object(key, self._full(key))

    def _delete_object(self, key: str, s3_key: str) -> None:
        """DELETE ``s3_key``; one already gone is no error."""
        try:
            self.client.delete_object(Bucket=self.bucket, Key=s3_key)
        except Exception as exc:
            err = translate(exc, key, "DeleteObject")
            if not isinstance(err, KeyNotFound):
                raise err from None

    def copy(self, src: str, dst: str) -> ObjectInfo:
        check_key(src)
        check_key(dst)
        self.check_writable(dst)
        info = self.stat(src)
        source = {"Bucket": self.bucket, "Key": self._full(src)}
        try:
            if info.size <= self.copy_threshold:
                resp = self.client.copy_object(Bucket=self.bucket, Key=self._full(dst), CopySource=source)
                etag = _etag(resp.get("CopyObjectResult", {}).get("ETag"))
                return ObjectInfo(dst, info.size, time.time_ns(), etag)
            cfg = TransferConfig(
                multipart_threshold=self.copy_threshold,
                multipart_chunksize=max(self.part_size, -(-info.size // 9000)),
                max_concurrency=min(8, self.max_concurrency),
            )
            self.client.copy(source, self.bucket, self._full(dst), Config=cfg)
        except Exception as exc:
            raise translate(exc, src, f"copy to {dst!r}") from None
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
        self._delete_object(prefix, self._full(prefix) + "/")

    def close(self) -> None:
        with self._count_lock:
            staged = list(self._staged.items())
        for upload_id, s3_key in staged:  # written to temp files never renamed into place
            self._abort_staged(s3_key, s3_key, upload_id)
        if self.lean is not None:
            self.lean.close()
        try:
            self.client.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass

    def describe(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"
