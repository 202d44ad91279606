"""A prefix of an S3 bucket as a store: obstore for reads, listings and PUTs; boto3 for the rest.

Every GET (ranged, pinned to the version with ``If-Match``), HEAD, LIST (ListObjectsV2 with
delimiter ``/``, all pages) and PutObject goes through obstore (nczfs/store/objstore.py): AWS
virtual-hosted over https, S3-compatible servers path style over http or https. boto3 stays for
what obstore does not offer: multipart uploads by upload id (parts sent while a file is written,
completed at close or at a rename; parts sent in parallel; aborted on failure) and server-side
copies (multipart above 5 GiB). Both are configured from one boto3 client, so both follow the
AWS CLI's credential chain, endpoint, region and CA bundle (``AWS_CA_BUNDLE``); obstore is given
the client's credentials and never looks for any itself (no instance-metadata lookup of its
own). S3 error codes become nczfs exceptions here (boto3's) and in objstore.py (obstore's).
No directory-marker objects are written; keys ending in ``/`` written by other tools show as
directories.
"""

from __future__ import annotations

import datetime
import logging
import os
import threading
import time
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
    KeyNotFound,
    NameTooLong,
    NczfsError,
    PermissionDenied,
    SourceError,
    Stale,
)
from nczfs.s3url import S3Location, parse_s3_url
from nczfs.store.base import ObjectInfo, Staged, Upload, check_key, join
from nczfs.store.objstore import ObjectStoreBackend, obstore_client_options, retry_config

if TYPE_CHECKING:
    from nczfs.config import MountConfig

log = logging.getLogger(__name__)

#: CopyObject copies up to 5 GiB; larger objects need a multipart copy
MAX_SINGLE_COPY = 5 * 1024**3
NOT_FOUND = {"NoSuchKey", "404", "NotFound"}
DENIED = {"AccessDenied", "403", "Forbidden", "AllAccessDisabled", "InvalidAccessKeyId", "SignatureDoesNotMatch"}
#: the request names ``nczfs stats`` shows for obstore's requests (boto3's name themselves)
S3_OPS = {"get": "GetObject", "head": "HeadObject", "list": "ListObjectsV2", "put": "PutObject",
          "delete": "DeleteObject", "copy": "CopyObject", "multipart": "MultipartUpload"}
#: credentials that botocore refreshes are handed to obstore for at most this long
CREDENTIALS_TTL = datetime.timedelta(minutes=5)


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
        s3={"addressing_style": "path" if custom else "auto"},
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


class BotoCredentials:
    """obstore's credential provider: the boto3 client's own credentials (the AWS CLI's chain,
    refreshed by botocore), so obstore never looks for credentials itself."""

    def __init__(self, client: Any):
        self._signer = client._request_signer

    def __call__(self) -> dict[str, Any]:
        creds = self._signer._credentials
        if creds is None:
            raise PermissionError("no AWS credentials found (set a profile, AWS_ACCESS_KEY_ID, or --no-sign-request)")
        frozen = creds.get_frozen_credentials()
        refreshing = getattr(creds, "refresh_needed", None) is not None
        return {"access_key_id": frozen.access_key, "secret_access_key": frozen.secret_key, "token": frozen.token,
                "expires_at": datetime.datetime.now(datetime.timezone.utc) + CREDENTIALS_TTL if refreshing else None}


def _ca_bundle(client: Any) -> str | None:
    """The CA bundle the boto3 client verifies with (``AWS_CA_BUNDLE``, the profile's ``ca_bundle``)."""
    verify = getattr(getattr(getattr(client, "_endpoint", None), "http_session", None), "_verify", None)
    if isinstance(verify, str) and os.path.isfile(verify):
        return verify
    return os.environ.get("AWS_CA_BUNDLE") or None


def obstore_s3(client: Any, bucket: str, *, retries: int | None = None, connect_timeout: float | None = None,
               read_timeout: float | None = None) -> Any:
    """An obstore S3 store for ``bucket`` configured as the boto3 ``client`` is: its endpoint (AWS:
    virtual-hosted, unless the bucket's name has dots; another endpoint: path style, unless the
    client says virtual), region, credentials or unsigned requests, CA bundle."""
    from obstore.store import S3Store as ObstoreS3

    meta = client.meta
    cfg = meta.config
    endpoint = meta.endpoint_url.rstrip("/")
    host = endpoint.split("://", 1)[-1].split("/", 1)[0].split(":", 1)[0]
    style = (cfg.s3 or {}).get("addressing_style") or "auto"
    kwargs: dict[str, Any] = {"region": meta.region_name or "us-east-1"}
    if host.endswith(".amazonaws.com") and style != "path":
        kwargs["virtual_hosted_style_request"] = "." not in bucket
        if "." in bucket or style == "virtual":
            kwargs["endpoint"] = endpoint
    else:
        kwargs["endpoint"] = endpoint
        kwargs["virtual_hosted_style_request"] = style == "virtual"
        if style == "virtual":  # obstore wants the bucket in a virtual-hosted endpoint
            scheme, rest = endpoint.split("://", 1)
            kwargs["endpoint"] = f"{scheme}://{bucket}.{rest}"
    if endpoint.startswith("https://"):
        kwargs["unsigned_payload"] = True  # as botocore signs over TLS: no SHA-256 of every body
    credentials = None
    if cfg.signature_version is UNSIGNED:
        kwargs["skip_signature"] = True
    else:
        credentials = BotoCredentials(client)
    timeouts = {k: v for k, v in (("connect_timeout", connect_timeout), ("read_timeout", read_timeout)) if v is not None}
    return ObstoreS3(bucket, credential_provider=credentials, client_options=obstore_client_options(
        endpoint, _ca_bundle(client), **timeouts), retry_config=retry_config() if retries is None else retry_config(retries),
        **kwargs)


class S3Store(ObjectStoreBackend):
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
        store: Any = None,
    ):
        super().__init__(store if store is not None else obstore_s3(client, bucket), prefix,
                         url=f"s3://{bucket}/{prefix.strip('/')}", service="S3", read_only=read_only, ops=S3_OPS,
                         multipart_threshold=multipart_threshold, part_size=part_size, max_concurrency=max_concurrency)
        self.client = client
        self.bucket = bucket
        self.copy_threshold = MAX_SINGLE_COPY
        #: unfinished multipart uploads (staged, or being sent), by upload id: aborted at close if still there
        self._staged: dict[str, str] = {}
        client.meta.events.register("before-send.s3", self._count_request)
        client.meta.events.register("needs-retry.s3", self._count_retry)

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

    def _dir_prefix(self, prefix: str) -> str:
        """The S3 prefix listing the children of ``prefix`` ("" is the mount root)."""
        full = self._dir_path(prefix)
        return f"{full}/" if full else ""

    def probe(self, text: str) -> None:  # type: ignore[override]
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

    # ------------------------------------------------------------------ writes

    def set(self, key: str, data: bytes | bytearray | memoryview) -> ObjectInfo:
        check_key(key)
        self.check_writable(key)
        if len(data) >= self.multipart_threshold:
            view = memoryview(data)
            return self._multipart(key, len(data), lambda start, size: view[start : start + size]).commit()
        return self._put(key, data, len(data))

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
        sends them; returns it staged. Any failure
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
        self._delete_path(key, self._full(key))

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
        self._delete_path(prefix, self._full(prefix) + "/")

    def close(self) -> None:
        with self._count_lock:
            staged = list(self._staged.items())
        for upload_id, s3_key in staged:  # written to temp files never renamed into place
            self._abort_staged(s3_key, s3_key, upload_id)
        try:
            self.client.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass

