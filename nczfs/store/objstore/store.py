"""A prefix of an S3 bucket as a store: obstore for reads, listings and PUTs; boto3 for the rest.

Every GET (ranged, pinned to the version with ``If-Match``), HEAD, LIST (ListObjectsV2 with
delimiter ``/``, all pages) and PutObject goes through obstore (:mod:`.objstore`): AWS
virtual-hosted over https, S3-compatible servers path style over http or https. boto3 stays for
what obstore does not offer: multipart uploads by upload id (:mod:`.uploads`), server-side
copies (multipart above 5 GiB), the attributes in objects' metadata (:mod:`.meta`), and keys
obstore cannot name (ASCII control characters). Both clients are made from one boto3 client
(:mod:`.client`). PutObject and writes of unknown outcome: :mod:`.puts`. No directory-marker
objects are written; keys ending in ``/`` written by other tools show as directories.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterator

import botocore.exceptions
import obstore as obs
from obstore.exceptions import InvalidPathError

from nczfs.toolbox.errors import Conflict, KeyNotFound, SourceError
from nczfs.store.objstore.s3url import S3Location
from nczfs.store.keys import check_key, join, parent_of
from nczfs.store.values import ABSENT, ByteRange, DirEntry, ObjectInfo
from nczfs.store.objstore.copies import Copies
from nczfs.store.objstore.client import make_client, obstore_s3
from nczfs.store.objstore.options import S3Options
from nczfs.store.objstore.errors import DENIED, UNANSWERED, code_of, message_of, translate_boto
from nczfs.store.objstore.meta import PosixMeta, meta_of
from nczfs.store.objstore.obprefix import UNNAMEABLE, ObjectStoreBackend, bare_etag, if_match
from nczfs.store.objstore.puts import Puts, refused_condition
from nczfs.store.objstore.uploads import MultipartUploads

log = logging.getLogger(__name__)

#: CopyObject copies up to 5 GiB; larger objects need a multipart copy
MAX_SINGLE_COPY = 5 * 1024**3
#: the largest object S3 holds
MAX_OBJECT_BYTES = 5 * 1024**4
#: the request names ``nczfs stats`` shows for obstore's requests (boto3's name themselves)
S3_OPS = {"get": "GetObject", "head": "HeadObject", "list": "ListObjectsV2", "put": "PutObject",
          "delete": "DeleteObject", "copy": "CopyObject", "multipart": "MultipartUpload"}


def open_s3(options: S3Options, loc: S3Location) -> S3Store:
    """The S3 store of the bucket and prefix at ``loc``, checked to answer (:meth:`S3Store.probe`);
    a writable one's writes are conditional where the server honours conditions (one probe)."""
    store = S3Store(make_client(options, loc), loc.bucket, loc.prefix, read_only=options.read_only,
                    options=options, head_for_meta=options.posix_meta)
    store.probe(options.source)
    if not options.read_only and options.overwrite == "checked":
        store.checks_writes = store.checks_deletes = store.probe_conditions()
    return store


class S3Store(Puts, MultipartUploads, Copies, PosixMeta, ObjectStoreBackend):
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
        self.once = obstore_s3(client, bucket, options.without_retries())
        self.copy_threshold = MAX_SINGLE_COPY
        #: -o posix_meta: objects found by a lookup or a listing are asked (HEAD, through boto3:
        #: obstore's HEAD gives no user metadata) for the attributes in their metadata; else only
        #: what the mount wrote itself shows them
        self.head_for_meta = head_for_meta
        self._meta_of_writes = {}
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
                raise translate_boto(exc, base or "/", "ListObjectsV2") from None

        return listing()

    def _count_one(self, kind: str) -> None:
        if kind == "unanswered":  # an attempt of a write went out and got no answer (this thread's)
            self._attempts.unanswered = True
        with self._count_lock:
            self._counts[kind] += 1

    def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        check_key(key)
        full = self._full(key)
        if not UNNAMEABLE.search(full) or (rng is not None and rng.end == rng.start):
            return super().get_version(key, rng, etag)
        kwargs: dict[str, Any] = {"Bucket": self.bucket, "Key": full, **self.options.payer()}
        if etag:
            kwargs["IfMatch"] = f'"{etag}"'
        if rng is not None and not (rng.start == 0 and rng.end is None):
            kwargs["Range"] = f"bytes={rng.start}-{'' if rng.end is None else rng.end - 1}"
        try:
            return self.client.get_object(**kwargs)["Body"].read()
        except botocore.exceptions.ClientError as exc:
            if code_of(exc) == "InvalidRange":
                return self._past_the_end(key, rng)
            raise translate_boto(exc, key, "GetObject") from None
        except Exception as exc:
            raise translate_boto(exc, key, "GetObject") from None

    def stat(self, key: str) -> ObjectInfo:
        check_key(key)
        full = self._full(key)
        if not UNNAMEABLE.search(full) and not self.head_for_meta:
            return super().stat(key)
        return self._head(key, full)

    def _head(self, key: str, full: str) -> ObjectInfo:
        """A HEAD through boto3: the object's info with the attributes its metadata holds."""
        try:
            resp = self.client.head_object(Bucket=self.bucket, Key=full, **self.options.payer())
        except Exception as exc:
            raise translate_boto(exc, key, "HeadObject") from None
        meta = meta_of(resp.get("Metadata"))
        mtime = meta.mtime_ns if meta is not None and meta.mtime_ns is not None else int(resp["LastModified"].timestamp() * 1e9)
        return ObjectInfo(key, int(resp["ContentLength"]), mtime, bare_etag(resp.get("ETag")), meta)

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

    def _delete_path(self, key: str, path: str) -> None:
        if not UNNAMEABLE.search(path):
            return super()._delete_path(key, path)
        try:
            self.client.delete_object(Bucket=self.bucket, Key=path, **self.options.payer())
        except Exception as exc:
            err = translate_boto(exc, key, "DeleteObject")
            if not isinstance(err, KeyNotFound):
                raise err from None

    def probe(self, text: str) -> None:  # type: ignore[override]  # the store probes with the source's text for its message
        """Fail now, with one line, if the bucket is missing, the credentials wrong or the endpoint down."""
        try:
            self.client.list_objects_v2(Bucket=self.bucket, Prefix=self._dir_prefix(""), MaxKeys=1, **self.options.payer())
        except botocore.exceptions.ClientError as exc:
            code = code_of(exc)
            if code == "NoSuchBucket":
                raise SourceError(f"{text}: bucket {self.bucket!r} does not exist") from None
            if code in DENIED:
                raise SourceError(f"{text}: S3 refused the credentials or access ({message_of(exc)})") from None
            raise SourceError(f"{text}: S3 error: {message_of(exc)}") from None
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
        if before is None or UNNAMEABLE.search(full):
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

    def delete(self, key: str, if_version: str | None = None) -> None:
        """DeleteObject; ``if_version`` (where ``checks_deletes``): with ``If-Match``, refused
        (Conflict, one HEAD for the version found) while the object is another version."""
        check_key(key)
        self.check_writable(key)
        pin = if_match(if_version) if if_version and if_version != ABSENT else None
        if pin is None:
            self._delete_path(key, self._full(key))
            return
        self._count("delete")
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._full(key), IfMatch=pin)
        except Exception as exc:
            err = translate_boto(exc, key, "delete")
            if isinstance(err, KeyNotFound):
                return  # gone already (AWS answers a missing key's If-Match 404)
            if not refused_condition(err, if_version):
                raise err from None
            try:
                found = self.stat(key).etag
            except KeyNotFound:
                return  # gone already (SeaweedFS answers a missing key's If-Match 412)
            raise Conflict(key, if_version, found) from None

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
