"""A prefix of an S3 bucket as a store: obstore for reads, listings and PUTs; boto3 for the rest.

Every GET (ranged, pinned to the version with ``If-Match``), HEAD, LIST (ListObjectsV2 with
delimiter ``/``, all pages) and PutObject goes through obstore (nczfs/store/s3/objstore.py): AWS
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

import dataclasses
import datetime
import hashlib
import logging
import re
import stat
from dataclasses import dataclass
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, BinaryIO, Iterator

import boto3
import botocore.exceptions
import obstore as obs
from obstore.exceptions import InvalidPathError
from boto3.s3.transfer import TransferConfig
from botocore import UNSIGNED
from botocore.config import Config

from nczfs.errors import (
    BackendError,
    InvalidArgument,
    KeyNotFound,
    NameTooLong,
    NczfsError,
    OutcomeUnknown,
    NotSupported,
    PermissionDenied,
    SourceError,
    Stale,
)
from nczfs.s3url import S3Location, parse_s3_url
from nczfs.store.base import ByteRange, DirEntry, Meta, ObjectInfo, Staged, Upload, check_key, join, parent_of
from nczfs.store.s3.objstore import ObjectStoreBackend, _first_line, obstore_client_options, plain_etag, retry_config

if TYPE_CHECKING:
    from nczfs.config import MountConfig

log = logging.getLogger(__name__)

#: CopyObject copies up to 5 GiB; larger objects need a multipart copy
MAX_SINGLE_COPY = 5 * 1024**3
#: the largest object S3 holds
MAX_OBJECT_BYTES = 5 * 1024**4
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


#: writes whose request, sent without an answer, may still be carried out by the server
WRITES = frozenset({"PutObject", "CompleteMultipartUpload", "CreateMultipartUpload"})
#: an unanswered CreateMultipartUpload may still make an upload whose id nczfs never learns:
#: uploads of its key begun from this many seconds before it (server clocks differ) are swept
SWEEP_MARGIN = 60.0
#: botocore's failures after a request went out: no answer came (a timeout, a broken connection)
UNANSWERED = (botocore.exceptions.ReadTimeoutError, botocore.exceptions.ConnectionClosedError)
#: obstore's (reqwest's) words for a request that never reached the server: it is certainly not carried out
NOT_SENT = re.compile(r"tcp connect error|ConnectError|Connection refused|dns error|failed to lookup address", re.I)
#: obstore's words for an answer: an HTTP status came back
ANSWERED = re.compile(r"status code: \d{3}|Client error with status|Server error with status", re.I)


def translate(exc: Exception, key: str, op: str) -> NczfsError:
    """One S3/botocore failure as an nczfs exception naming the key, the operation and the S3 error."""
    if isinstance(exc, NczfsError):
        return exc
    if isinstance(exc, UNANSWERED) and op in WRITES:
        return OutcomeUnknown(f"{key!r}: S3 {op} got no answer ({_message(exc)}); it may still be carried out "
                              "(outcome unknown)")
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
    opts = S3Options.of(config)
    # the profile's "s3 = addressing_style" (as the AWS CLI reads it), else path style for an
    # endpoint of its own (S3-compatible servers), and AWS's choice on AWS
    try:
        style = (session._session.get_scoped_config().get("s3") or {}).get("addressing_style")
    except botocore.exceptions.BotoCoreError as exc:  # ProfileNotFound and friends
        raise SourceError(f"{config.source.text}: {exc}") from None
    cfg = Config(
        region_name=region,
        retries={"mode": "standard", "total_max_attempts": opts.retries + 1},
        connect_timeout=opts.connect_timeout,
        read_timeout=opts.read_timeout,
        max_pool_connections=max_pool,
        tcp_keepalive=True,
        s3={"addressing_style": style or ("path" if custom or config.path_style else "auto")},
        signature_version=UNSIGNED if unsigned else None,
    )
    try:
        return session.client("s3", endpoint_url=endpoint, config=cfg)
    except (botocore.exceptions.BotoCoreError, ValueError) as exc:
        raise SourceError(f"{config.source.text}: {exc}") from None


@dataclass(frozen=True)
class S3Options:
    """What a mount's options ask of every S3 request (-o retries=, connect_timeout=,
    read_timeout=, requester_pays, sse=, sse_kms_key_id=, storage_class=)."""

    retries: int = 2
    connect_timeout: float = 5.0
    read_timeout: float = 15.0  # a stall, not a request: seconds without a byte
    requester_pays: bool = False
    sse: str | None = None
    sse_kms_key_id: str | None = None
    storage_class: str | None = None

    @classmethod
    def of(cls, config: MountConfig) -> S3Options:
        given = {k: getattr(config, k) for k in ("retries", "connect_timeout", "read_timeout", "sse", "sse_kms_key_id",
                                                  "storage_class") if getattr(config, k) is not None}
        return cls(requester_pays=config.requester_pays, **given)

    def payer(self) -> dict[str, str]:
        """boto3's argument naming the requester as the payer, if asked for."""
        return {"RequestPayer": "requester"} if self.requester_pays else {}

    def writes(self) -> dict[str, str]:
        """boto3's arguments of a request that makes an object (multipart upload, copy)."""
        out = self.payer()
        if self.storage_class:
            out["StorageClass"] = self.storage_class
        if self.sse:
            out["ServerSideEncryption"] = self.sse
        if self.sse_kms_key_id:
            out["SSEKMSKeyId"] = self.sse_kms_key_id
        return out


def open_s3(config: MountConfig) -> S3Store:
    loc = resolve_location(config)
    store = S3Store(make_client(config, loc), loc.bucket, loc.prefix, read_only=config.read_only,
                    options=S3Options.of(config), head_for_meta=config.posix_meta)
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


def obstore_s3(client: Any, bucket: str, options: S3Options) -> Any:
    """An obstore S3 store for ``bucket`` configured as the boto3 ``client`` is: its endpoint (AWS:
    virtual-hosted, unless the bucket's name has dots; another endpoint: path style, unless the
    client says virtual), region, credentials or unsigned requests, CA bundle; and as
    ``options`` ask (retries, timeouts, requester pays, server-side encryption)."""
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
    if options.requester_pays:
        kwargs["request_payer"] = True
    if options.sse:
        kwargs["server_side_encryption"] = options.sse
    if options.sse_kms_key_id:
        kwargs["sse_kms_key_id"] = options.sse_kms_key_id
    return ObstoreS3(bucket, credential_provider=credentials, client_options=obstore_client_options(
        endpoint, _ca_bundle(client), connect_timeout=options.connect_timeout, read_timeout=options.read_timeout),
        retry_config=retry_config(options.retries), **kwargs)


class S3Store(ObjectStoreBackend):
    #: SeaweedFS (and S3 gateways over a filer) list a folder for a while after its last key is
    #: deleted; rmdir and directory renames delete those folders explicitly (see forget_dir)
    emptied_dirs_may_linger = True
    #: modes, owners, times, symlinks and special files in objects' user metadata (s3fs-fuse's)
    keeps_meta = True
    max_object_size = MAX_OBJECT_BYTES

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
        options: S3Options = S3Options(),
        head_for_meta: bool = False,
    ):
        super().__init__(obstore_s3(client, bucket, options), prefix,
                         url=f"s3://{bucket}/{prefix.strip('/')}", service="S3", read_only=read_only, ops=S3_OPS,
                         multipart_threshold=multipart_threshold, part_size=part_size, max_concurrency=max_concurrency,
                         https=client.meta.endpoint_url.startswith("https://"))
        self.client = client
        self.bucket = bucket
        self.options = options
        #: PUTs go through a store making one attempt a call: each attempt's failure tells whether
        #: the request went out without an answer (its outcome unknown), which obstore's own
        #: retries would hide behind their last error; it also checks such writes (one HEAD)
        self.once = obstore_s3(client, bucket, dataclasses.replace(options, retries=0))
        self.copy_threshold = MAX_SINGLE_COPY
        #: -o posix_meta: objects found by a lookup or a listing are asked (HEAD, through boto3:
        #: obstore's HEAD gives no user metadata) for the attributes in their metadata; else only
        #: what the mount wrote itself shows them
        self.head_for_meta = head_for_meta
        #: unfinished multipart uploads (staged, or being sent), by upload id: aborted at close if still there
        self._staged: dict[str, str] = {}
        #: CreateMultipartUploads that got no answer ("?TIME" -> S3 key): swept at close
        self._unanswered: dict[str, str] = {}
        #: whether an attempt of this thread's request went out without an answer
        self._attempts = threading.local()
        #: told of every upload opened (``opened(id, s3_key)``) and finished (``done(id)``), so
        #: that those a killed daemon left open can be aborted later (runstate.UploadJournal)
        self.upload_log: Any = None
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
        if isinstance(caught_exception, UNANSWERED):
            self._count_one("unanswered")  # an attempt went out and got no answer

    def _dir_prefix(self, prefix: str) -> str:
        """The S3 prefix listing the children of ``prefix`` ("" is the mount root)."""
        full = self._dir_path(prefix)
        return f"{full}/" if full else ""

    # ------------------------------------------------------------------ keys obstore cannot name
    # S3 takes any UTF-8 in a key; obstore (object_store's paths) refuses ASCII control
    # characters, and fails a whole listing that holds one. boto3 serves those keys and listings.

    def list_other_way(self, base: str | None, delimiter: bool) -> Iterator[Any] | None:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=f"{base}/" if base else "", **({"Delimiter": "/"} if delimiter else {}),
            **self.options.payer())

        def meta(item: dict) -> dict:
            key = item["Key"]
            return {"path": key.rstrip("/"), "size": int(item["Size"]), "last_modified": item.get("LastModified"),
                    "e_tag": item.get("ETag"), "marker": key.endswith("/")}

        def listing() -> Iterator[Any]:
            try:
                if delimiter:
                    prefixes, objects = [], []
                    for page in pages:
                        self._count_one("ListObjectsV2")
                        prefixes += [cp["Prefix"].rstrip("/") for cp in page.get("CommonPrefixes", ())]
                        objects += [meta(item) for item in page.get("Contents", ())]
                    yield {"common_prefixes": prefixes, "objects": objects}
                else:
                    for page in pages:
                        self._count_one("ListObjectsV2")
                        yield [meta(item) for item in page.get("Contents", ())]
            except Exception as exc:
                raise translate(exc, base or "/", "ListObjectsV2") from None

        return listing()

    def _count_one(self, kind: str) -> None:
        if kind == "unanswered":  # an attempt of a write went out and got no answer (this thread's)
            self._attempts.unanswered = True
        with self._count_lock:
            self._counts[kind] += 1

    def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        check_key(key)
        full = self._full(key)
        if not _CONTROL.search(full) or (rng is not None and rng.end == rng.start):
            return super().get_version(key, rng, etag)
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": full, **self.options.payer()}
        if etag:
            kwargs["IfMatch"] = f'"{etag}"'
        if rng is not None and not (rng.start == 0 and rng.end is None):
            kwargs["Range"] = f"bytes={rng.start}-{'' if rng.end is None else rng.end - 1}"
        try:
            return self.client.get_object(**kwargs)["Body"].read()
        except botocore.exceptions.ClientError as exc:
            if _code(exc) == "InvalidRange":
                return self._past_the_end(key, rng)
            raise translate(exc, key, "GetObject") from None
        except Exception as exc:
            raise translate(exc, key, "GetObject") from None

    def stat(self, key: str) -> ObjectInfo:
        check_key(key)
        full = self._full(key)
        if not _CONTROL.search(full) and not self.head_for_meta:
            return super().stat(key)
        return self._head(key, full)

    def _head(self, key: str, full: str) -> ObjectInfo:
        """A HEAD through boto3: the object's info with the attributes its metadata holds."""
        try:
            resp = self.client.head_object(Bucket=self.bucket, Key=full, **self.options.payer())
        except Exception as exc:
            raise translate(exc, key, "HeadObject") from None
        meta = meta_of(resp.get("Metadata"))
        mtime = meta.mtime_ns if meta is not None and meta.mtime_ns is not None else int(resp["LastModified"].timestamp() * 1e9)
        return ObjectInfo(key, int(resp["ContentLength"]), mtime, _etag(resp.get("ETag")), meta)

    def list_dir(self, prefix: str) -> list[DirEntry]:
        entries = super().list_dir(prefix)
        if not self.head_for_meta:
            return entries
        files = [e for e in entries if not e.is_dir]

        def head(e: DirEntry) -> DirEntry | None:
            try:
                return DirEntry(e.name, False, self.stat(join(prefix, e.name)))
            except KeyNotFound:
                return None

        if files:  # -o posix_meta: a HEAD per object listed, in parallel
            with ThreadPoolExecutor(max_workers=min(8, self.max_concurrency, len(files))) as pool:
                headed = {e.name: h for e, h in zip(files, pool.map(head, files))}
            entries = [headed.get(e.name, e) if not e.is_dir else e for e in entries if e.is_dir or headed.get(e.name)]
        return entries

    def list_tree(self, prefix: str, limit: int) -> dict[str, list[DirEntry]] | None:
        if self.head_for_meta:
            return None  # listed a directory at a time, whose objects are asked for their attributes
        return super().list_tree(prefix, limit)

    def _put(self, key: str, body: Any, size: int) -> ObjectInfo:
        """One PutObject; a write whose request went out without an answer is looked for (its
        ETag: the MD5 of what was sent) before it is called of unknown outcome."""
        full = self._full(key)
        data = body if isinstance(body, (bytes, bytearray, memoryview)) else b"".join(body)
        try:
            if _CONTROL.search(full):  # a key obstore cannot name
                etag = self.client.put_object(Bucket=self.bucket, Key=full, Body=bytes(data),
                                              **self.options.writes()).get("ETag")
            else:
                etag = self._put_attempts(key, full, data)
        except Exception as exc:
            err = translate(exc, key, "PutObject")
            if isinstance(err, OutcomeUnknown):  # stored after all, if the object is what was sent
                found = self._holds(key, hashlib.md5(data, usedforsecurity=False).hexdigest())
                if found is not None:
                    return found
            raise err from None
        return ObjectInfo(key, size, time.time_ns(), _etag(etag))

    def _put_attempts(self, key: str, full: str, data: bytes | bytearray | memoryview) -> str | None:
        """obstore's PUT, ``-o retries=`` + 1 attempts, botocore's pauses between them. An attempt
        that never reached the server (refused, no route) or was answered 5xx is tried again
        as obstore would; one that went out and got no answer (a timeout, a broken connection)
        too, but the write's outcome is then unknown whatever later attempts meet."""
        unanswered, failure = False, ""
        for attempt in range(self.options.retries + 1):
            self._count("put")
            try:
                return obs.put(self.once, full, data, use_multipart=False, **self.put_arguments()).get("e_tag")
            except Exception as exc:
                text = str(exc)
                if ANSWERED.search(text) and not re.search(r"status code: 5\d\d|Server error with status", text):
                    raise self._err(exc, key, "put") from None  # refused: the answer is final
                failure = _first_line(exc)
                if not ANSWERED.search(text) and not NOT_SENT.search(text):
                    unanswered = True
                    self._count_one("unanswered")
            if attempt < self.options.retries:
                with self._count_lock:
                    self._counts["retries-considered"] += 1
                time.sleep(min(5.0, 0.05 * 2**attempt))
        if unanswered:
            raise OutcomeUnknown(f"{key!r}: S3 PutObject got no answer ({failure}); it may still be carried out "
                                 "(outcome unknown)")
        raise BackendError(f"{key!r}: S3 PutObject failed: {failure}")

    def _holds(self, key: str, etag: str) -> ObjectInfo | None:
        """After a write whose answer never came: the object's info if it is the version written
        (its ETag: the MD5 of a single PUT's body, of a multipart upload's part MD5s and their
        count), else None (another version, none, or no answer to the HEAD either). One attempt:
        the answer is wanted now, not after another round of retries."""
        if not etag:
            return None
        full = self._full(key)
        try:
            if _CONTROL.search(full):  # a key obstore cannot name
                resp = self.client.head_object(Bucket=self.bucket, Key=full, **self.options.payer())
                meta = {"size": resp["ContentLength"], "last_modified": resp["LastModified"], "e_tag": resp.get("ETag")}
            else:
                self._count("head")
                meta = obs.head(self.once, full)
        except Exception as exc:  # noqa: BLE001 - not known then either
            log.warning("%r: checking a write that got no answer failed too: %s", key, _first_line(exc))
            return None
        if plain_etag(meta.get("e_tag")) != etag:
            return None
        log.warning("%r: a write got no answer, but the object is what it sent: stored", key)
        return self._info(key, meta)

    def _delete_path(self, key: str, path: str) -> None:
        if not _CONTROL.search(path):
            return super()._delete_path(key, path)
        try:
            self.client.delete_object(Bucket=self.bucket, Key=path, **self.options.payer())
        except Exception as exc:
            err = translate(exc, key, "DeleteObject")
            if not isinstance(err, KeyNotFound):
                raise err from None

    def put_arguments(self) -> dict[str, Any]:
        """The storage class asked for (obstore sends it as ``x-amz-storage-class``)."""
        return {"attributes": {"Storage-Class": self.options.storage_class}} if self.options.storage_class else {}

    def probe(self, text: str) -> None:  # type: ignore[override]
        """Fail now, with one line, if the bucket is missing, the credentials wrong or the endpoint down."""
        try:
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=self._dir_prefix(""), MaxKeys=1, **self.options.payer())
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

    def entry(self, key: str) -> DirEntry | None:
        found = self._entry(key)
        if found is not None and not found.is_dir and self.head_for_meta:
            try:
                return DirEntry(found.name, False, self.stat(key))
            except KeyNotFound:
                return None
        return found

    def _entry(self, key: str) -> DirEntry | None:  # noqa: C901
        """Mostly one LIST: the keys from just before ``key`` on, in its directory (S3's
        start-after), say whether it is an object, a directory (which wins, as in listings) or
        nothing. Where the first keys leave that open (a directory named like ``key`` less its
        last character, full of keys), a LIST of ``key/`` and a HEAD decide."""
        check_key(key)
        full = self._full(key)
        before = _start_after(full)
        if before is None or _CONTROL.search(full):
            return super().entry(key)
        name = key.rpartition("/")[2]
        self._count("list")
        try:
            chunk = next(iter(obs.list(self.store, self._dir_path(parent_of(key)), offset=before, chunk_size=ENTRY_KEYS)), [])
        except Exception as exc:
            if isinstance(exc, (InvalidPathError, ValueError)):  # a key obstore cannot name nearby
                return super().entry(key)
            raise self._err(exc, key, "list") from None
        paths = [m["path"] for m in chunk]
        if any(p.startswith(full + "/") for p in paths):
            return DirEntry(name, True)
        if len(chunk) == ENTRY_KEYS and paths[-1] <= full + "/":
            return super().entry(key)  # not decided by the keys seen
        for meta in chunk:
            if meta["path"] == full:
                return DirEntry(name, True) if self._is_marker(meta) else DirEntry(name, False, self._info(key, meta))
        return None

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
        # noted before it is sent: a daemon killed while the request is on its way, or before it
        # notes the answer, leaves the mark, and the next mount sweeps what the server made
        mark = f"?{time.time():.6f}"
        self._log_upload("opened", mark, s3_key)
        self._attempts.unanswered = False
        try:
            upload_id = self.client.create_multipart_upload(Bucket=self.bucket, Key=s3_key, **self.options.writes())["UploadId"]
        except Exception as exc:
            err = translate(exc, key, "CreateMultipartUpload")
            self._settle_create(mark, s3_key, isinstance(err, OutcomeUnknown))
            raise err from None
        with self._count_lock:
            self._staged[upload_id] = s3_key
        self._log_upload("opened", upload_id, s3_key)
        self._settle_create(mark, s3_key, False)
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
                    Bucket=self.bucket, Key=s3_key, UploadId=upload_id, **self.options.payer(),
                    MultipartUpload={"Parts": [{"PartNumber": n, "ETag": e} for n, e in enumerate(tags, 1)]},
                ).get("ETag")
            except Exception as exc:
                err = translate(exc, key, "CompleteMultipartUpload")
                if isinstance(err, OutcomeUnknown):
                    return self._settle(key, s3_key, upload_id, [etags[n] for n in numbers], err)
                self._abort_staged(key, s3_key, upload_id)
                raise err from None
            self._finished(upload_id)
            return ObjectInfo(key, size, time.time_ns(), _etag(etag))

        return Upload(key, self.part_size, send, complete, lambda: self._abort_staged(key, s3_key, upload_id))

    def _settle(self, key: str, s3_key: str, upload_id: str, tags: list[str], err: OutcomeUnknown) -> ObjectInfo:
        """A CompleteMultipartUpload that got no answer: done, if the object's ETag is the
        upload's. If not, the upload is aborted, so that a completion the server carries out
        later should find none (the object is looked at once more: it may have been done
        meanwhile); the outcome then stays unknown: ``err`` is raised (some servers, SeaweedFS
        among them, answer an abort of an upload already completed with success, and may carry
        out a completion and an abort that arrive together in either order)."""
        try:
            digest = hashlib.md5(b"".join(bytes.fromhex(_etag(t)) for t in tags), usedforsecurity=False)
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
                            key, upload_id, _message(exc))
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
                try:
                    self.client.abort_multipart_upload(Bucket=self.bucket, Key=s3_key, UploadId=upload["UploadId"],
                                                       **self.options.payer())
                except botocore.exceptions.ClientError as exc:
                    if _code(exc) not in ("NoSuchUpload", "404"):
                        raise
                log.info("%r: aborted the upload %s that a CreateMultipartUpload without an answer made",
                         s3_key, upload["UploadId"])
        except Exception as exc:  # noqa: BLE001
            log.warning("%r: uploads a CreateMultipartUpload without an answer may have made were not swept: %s",
                        s3_key, _message(exc))
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
                self.client.abort_multipart_upload(Bucket=self.bucket, Key=s3_key, UploadId=upload_id,
                                                   **self.options.payer())
            except Exception as exc:  # noqa: BLE001
                if isinstance(exc, botocore.exceptions.ClientError) and _code(exc) in ("NoSuchUpload", "404"):
                    continue
                log.warning("%r: the multipart upload %s a killed mount left open could not be aborted: %s",
                            s3_key, upload_id, _message(exc))
                left[upload_id] = s3_key
        return left

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
            log.warning("%r: could not abort the staged upload %s: %s", key, upload_id, _message(exc))
            return
        self._log_upload("done", upload_id)

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
            if _code(exc) not in ("InvalidRequest", "EntityTooLarge"):  # above 5 GiB: a multipart copy
                raise translate(exc, key, "CopyObject (metadata)") from None
            try:
                size = self._head(key, s3_key).size
                self.client.copy(source, self.bucket, s3_key, ExtraArgs=extra,
                                 Config=TransferConfig(multipart_threshold=self.copy_threshold,
                                                       multipart_chunksize=max(self.part_size, -(-size // 9000))))
            except Exception as exc2:
                raise translate(exc2, key, "CopyObject (metadata)") from None
        except Exception as exc:
            raise translate(exc, key, "CopyObject (metadata)") from None
        return changes

    def make_node(self, key: str, meta: Meta, target: str | None = None) -> ObjectInfo:
        """A symlink (its target as the object's bytes) or a special file (no bytes), its type and
        attributes in the object's metadata, as s3fs-fuse makes them."""
        check_key(key)
        self.check_writable(key)
        body = (target or "").encode("utf-8", "surrogateescape") if stat.S_ISLNK(meta.mode or 0) else b""
        now = time.time_ns()
        meta = Meta(mode=meta.mode, uid=meta.uid, gid=meta.gid, rdev=meta.rdev,
                    mtime_ns=meta.mtime_ns or now, ctime_ns=meta.ctime_ns or now, atime_ns=meta.atime_ns or now)
        try:
            resp = self.client.put_object(Bucket=self.bucket, Key=self._full(key), Body=body, Metadata=meta_headers(meta),
                                          **self.options.writes())
        except Exception as exc:
            raise translate(exc, key, "PutObject") from None
        return ObjectInfo(key, len(body), meta.mtime_ns or now, _etag(resp.get("ETag")), meta)

    def readlink(self, key: str) -> str:
        check_key(key)
        info = self._head(key, self._full(key))
        if info.meta is None or not stat.S_ISLNK(info.meta.mode or 0):
            raise InvalidArgument(f"{key!r}: not a symlink")
        return self.get(key).decode("utf-8", "surrogateescape")

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
                resp = self.client.copy_object(Bucket=self.bucket, Key=self._full(dst), CopySource=source,
                                               **self.options.writes())
                etag = _etag(resp.get("CopyObjectResult", {}).get("ETag"))
                return ObjectInfo(dst, info.size, time.time_ns(), etag)
            cfg = TransferConfig(
                multipart_threshold=self.copy_threshold,
                multipart_chunksize=max(self.part_size, -(-info.size // 9000)),
                max_concurrency=min(8, self.max_concurrency),
            )
            self.client.copy(source, self.bucket, self._full(dst), ExtraArgs=self.options.writes() or None, Config=cfg)
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
            unanswered, self._unanswered = dict(self._unanswered), {}
        for upload_id, s3_key in staged:  # written to temp files never renamed into place
            self._abort_staged(s3_key, s3_key, upload_id)
        for mark, s3_key in unanswered.items():
            if self._sweep(mark, s3_key):
                self._log_upload("done", mark)
        super().close()
        try:
            self.client.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass


#: the characters obstore cannot put in a key (ASCII controls); S3 can
_CONTROL = re.compile("[\x01-\x1f\x7f]")
#: keys one lookup's LIST looks at (the page it fetches holds up to 1,000)
ENTRY_KEYS = 8


def _start_after(key: str) -> str | None:
    """An S3 start-after from which a listing of ``key``'s directory begins with ``key`` (or
    with keys of a directory named like ``key`` less its last character, where that character
    follows "/"); None where none can be written."""
    last = ord(key[-1])
    prev = chr(last - 1) if last > 1 else ""
    if prev == "/":  # "x0": from "x." on ("x/..." comes first: the keys of directory "x")
        prev = "."
    if not prev or 0xD800 <= ord(prev) <= 0xDFFF:
        return None
    return key[:-1] + prev + "\U0010ffff"
