"""A prefix of an object store (S3, Google Cloud Storage, Azure Blob, a web server) through obstore.

obstore (Python bindings of Apache Arrow's Rust ``object_store``) signs, sends, retries and
times out every request; this module maps the store interface onto it and its errors onto
nczfs's. Keys map to ``<prefix>/<key>``. Reads are ranged GETs pinned to a version with
``If-Match`` where the store gives strong ETags; listings use the ``/`` delimiter; writes are
one PUT, or above ``multipart_threshold`` a multipart upload (S3), a block list (Azure) or a
resumable upload (GCS), parts sent in parallel; aborted on failure. No directory markers are
written; keys ending in ``/`` written by other tools show as directories.

Every call runs in ThreadedStore's worker threads through obstore's blocking API (which
releases the GIL while Rust works): measured, that costs less CPU per GET than obstore's async
API on one asyncio loop thread bridged to trio (docs/PERFORMANCE.md, "One object-store client").
Timeouts and retries: :mod:`.transport`; errors: :mod:`.errors`.
"""

from __future__ import annotations

from dataclasses import replace
import datetime
import logging
import re
import threading
import time
from typing import TYPE_CHECKING, Any, BinaryIO, Iterator

import obstore as obs

from nczfs.store.capabilities import SHORT_TTL, Capabilities
from nczfs.store.aiobridge import AsyncioBridge
from nczfs.toolbox.errors import BackendError, KeyNotFound, NczfsError, OutcomeUnknown, Stale
from nczfs.store.base import SyncStore, check_writable, rename_each
from nczfs.store.keys import check_key
from nczfs.store.pieces import file_pieces
from nczfs.store.values import ABSENT, ByteRange, DirEntry, ObjectInfo
from nczfs.store.objstore.bursts import Ask, get_many
from nczfs.store.objstore.counting import RequestCounts
from nczfs.store.objstore.errors import first_line, other_version, unanswered, unsatisfiable
from nczfs.store.objstore.listing import Listed, Listings
from nczfs.store.objstore.paths import ObjectPaths
from nczfs.store.objstore.sizes import PartSizes

if TYPE_CHECKING:
    from obstore import GetOptions

log = logging.getLogger(__name__)

#: the characters obstore cannot put in a key (ASCII controls); S3 can (boto3 serves those keys)
UNNAMEABLE = re.compile("[\x01-\x1f\x7f]")
#: bodies at least this long are handed out as a view of obstore's buffer, not copied
KEEP_BUFFER = 1024 * 1024
#: ranged GETs of at least this many bytes go through obstore's async API on one asyncio loop
#: thread, which gathers a large body with less of the daemon's CPU than a worker thread does
#: (docs/PERFORMANCE.md: issue #33 for https, issue 46 for http)
ASYNC_GET_FROM = 1024 * 1024

#: names of the requests in ``nczfs stats``, by kind (S3 names its own: store.py)
GENERIC_OPS = {"get": "GET", "head": "HEAD", "list": "LIST", "put": "PUT", "delete": "DELETE", "copy": "COPY",
               "multipart": "MultipartUpload"}


def plain_etag(value: str | None) -> str:
    """An ETag as nczfs keeps it: without the quotes HTTP puts around it."""
    return (value or "").strip('"') if not (value or "").startswith("W/") else (value or "")


def bare_etag(value: str | None) -> str:
    """An ETag as boto3 gives it (S3's API), without its quotes."""
    return (value or "").strip('"')


def if_match(etag: str | None) -> str | None:
    """The ``If-Match`` value pinning version ``etag`` (None: it cannot be pinned: a weak ETag, or none)."""
    if not etag or etag.startswith("W/"):
        return None
    return f'"{etag}"'


def put_mode(if_version: str | None) -> Any:
    """obstore's ``mode`` of a PUT made only while the object is version ``if_version`` (an ETag:
    If-Match), or absent (ABSENT: If-None-Match: *); None: any (overwrite)."""
    if if_version is None or (if_version != ABSENT and if_match(if_version) is None):
        return "overwrite"
    return "create" if if_version == ABSENT else {"e_tag": if_match(if_version)}


def boto_conditions(if_version: str | None) -> dict[str, str]:
    """boto3's arguments of a write made only while the object is ``if_version`` (as :func:`put_mode`)."""
    if if_version is None:
        return {}
    if if_version == ABSENT:
        return {"IfNoneMatch": "*"}
    pin = if_match(if_version)
    return {"IfMatch": pin} if pin is not None else {}


def mtime_ns(value: datetime.datetime | None) -> int:
    return int(value.timestamp() * 1e9) if value is not None else time.time_ns()


def info_of(key: str, meta: Listed) -> ObjectInfo:
    """The info of ``key`` in an obstore HEAD's, PUT's or listing's ``meta``."""
    return ObjectInfo(key, int(meta["size"]), mtime_ns(meta.get("last_modified")), plain_etag(meta.get("e_tag")))


class ObjectStoreBackend(SyncStore):
    """``prefix`` of an obstore store (its bucket or container chosen when it was made): its
    ``paths``, its request counts (``requests``), how its writes are cut (``sizes``) and its
    ``listings``, each a part it holds."""

    # GETs carry If-Match; other clients write to a bucket while it is mounted: a short default TTL
    capabilities = Capabilities(keys_form_a_tree=False, checks_versions=True, remote=True, metadata_ttl=SHORT_TTL)
    rename_dir = rename_each  # a directory moved key by key (S3Store: Copies.rename_dir)

    def __init__(
        self,
        store: Any,
        prefix: str = "",
        *,
        url: str,
        service: str,
        read_only: bool = False,
        ops: dict[str, str] = GENERIC_OPS,
        multipart_threshold: int = 32 * 1024**2,
        part_size: int = 8 * 1024**2,
        max_concurrency: int = 16,
    ):
        self.store = store
        #: ranged GETs from this many bytes go through the asyncio loop of :meth:`get_version_async`
        self.async_get_from = ASYNC_GET_FROM
        self._bridge: AsyncioBridge | None = None
        self._bridge_lock = threading.Lock()
        self.url = url
        self.service = service
        self.capabilities = replace(self.capabilities, read_only=read_only, max_concurrency=max_concurrency)
        self.paths = ObjectPaths(prefix, service)
        self.requests = RequestCounts(service, ops)
        self.sizes = PartSizes(multipart_threshold, part_size, max_concurrency)
        self.listings = Listings(store, self.paths, self.requests, info=self._info, stat=self.stat,
                                 other_way=self.list_other_way)

    @property
    def prefix(self) -> str:
        return self.paths.prefix

    # ------------------------------------------------------------------ helpers

    def _count(self, kind: str, n: int = 1) -> None:
        self.requests.count(kind, n)

    def counters(self) -> dict[str, int]:
        return self.requests.snapshot()

    def _full(self, key: str) -> str:
        return self.paths.full(key)

    def check_new_key(self, key: str) -> None:
        check_key(key)
        self._full(key)

    def _err(self, exc: BaseException, key: str, kind: str) -> NczfsError:
        return self.requests.error(exc, key, kind)

    def _info(self, key: str, meta: Listed) -> ObjectInfo:
        return info_of(key, meta)

    # ------------------------------------------------------------------ listings (:mod:`.listing`)

    def list_other_way(self, base: str | None, delimiter: bool) -> Iterator[Any] | None:
        """A listing of ``base`` where obstore cannot give one (a key it cannot name: a control
        character): with the delimiter one page ``{"common_prefixes", "objects"}``, without
        chunks of objects, shaped as obstore's (a marker ``d/`` as ``d``, marked ``"marker"``).
        None: this store has no other way (the listing fails, naming the key)."""
        return None

    def list_dir(self, prefix: str) -> list[DirEntry]:
        return self.listings.list_dir(prefix)

    def list_tree(self, prefix: str, limit: int) -> dict[str, list[DirEntry]] | None:
        return self.listings.list_tree(prefix, limit)

    def list_prefix(self, prefix: str) -> list[str]:
        return self.listings.list_prefix(prefix)

    def dir_exists(self, prefix: str) -> bool:
        return self.listings.dir_exists(prefix)

    def entry(self, key: str) -> DirEntry | None:
        return self.listings.entry(key)

    def probe(self) -> None:
        self.listings.probe()

    # ------------------------------------------------------------------ reads

    def _get_options(self, rng: ByteRange | None, etag: str | None) -> GetOptions:
        options: GetOptions = {}
        if (pin := if_match(etag)) is not None:
            options["if_match"] = pin
        if rng is not None and not (rng.start == 0 and rng.end is None):
            options["range"] = {"offset": rng.start} if rng.end is None else (rng.start, rng.end)
        return options

    def get(self, key: str, rng: ByteRange | None = None) -> bytes:
        data = self.get_version(key, rng, None)
        return data if isinstance(data, bytes) else bytes(data)

    def get_version(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes:
        """The bytes; from KEEP_BUFFER bytes on a read-only view of obstore's own buffer, not a
        copy (a fresh copy of 8 MiB costs 2.3 ms, mostly the first touch of its pages), as the
        cache hands out parts of blocks (``get`` always gives ``bytes``)."""
        check_key(key)
        path = self._full(key)
        if rng is not None and rng.end == rng.start:  # nothing to read: only say whether the object exists
            self.stat(key)
            return b""
        self._count("get")
        options = self._get_options(rng, etag)
        try:
            result = obs.get(self.store, path, options=options)
            if (wrong := other_version(result, options, key)) is not None:
                raise wrong
            body = result.bytes()
            return memoryview(body) if len(body) >= KEEP_BUFFER else bytes(body)  # type: ignore[return-value]  # bytes-like: a large body is kept, not copied
        except Exception as exc:
            if unsatisfiable(exc):
                return self._past_the_end(key, rng, etag)
            raise self._err(exc, key, "get") from None

    async def get_version_async(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes | None:
        """A ranged GET of at least ASYNC_GET_FROM bytes, sent and gathered by obstore's
        async API on one asyncio loop thread, awaited from trio (ThreadedStore); None for every
        other read, and for an answer that needs the blocking path's handling (416), which then
        sends it from a worker thread."""
        least = self.async_get_from
        if rng is None or rng.end is None or rng.end - rng.start < max(least, 1):
            return None
        check_key(key)
        path = self._full(key)
        self._count("get")
        self.requests.add("gets-on-loop")
        try:
            body = await self._loop().trio_run(self._get_body, key, path, self._get_options(rng, etag))
        except Exception as exc:
            if unsatisfiable(exc):
                return None
            raise self._err(exc, key, "get") from None
        return memoryview(body) if len(body) >= KEEP_BUFFER else bytes(body)  # type: ignore[return-value]  # bytes-like: a large body is kept, not copied

    async def get_versions_async(self, asks: list[Ask]) -> list[bytes | Exception | None]:
        """Small reads asked for together, sent at once on the asyncio loop thread and awaited
        from trio in one hand-over (:mod:`.bursts`); None for a read left to ``get_version``."""
        return await get_many(self, asks, UNNAMEABLE, KEEP_BUFFER)

    async def _get_body(self, key: str, path: str, options: GetOptions) -> Any:
        result = await obs.get_async(self.store, path, options=options)
        if (wrong := other_version(result, options, key)) is not None:
            raise wrong
        return await result.bytes_async()

    def _loop(self) -> AsyncioBridge:
        with self._bridge_lock:
            if self._bridge is None:
                self._bridge = AsyncioBridge(f"{self.service.lower()}-gets")
            return self._bridge

    def close(self) -> None:
        with self._bridge_lock:
            bridge, self._bridge = self._bridge, None
        if bridge is not None:
            bridge.close()

    def _past_the_end(self, key: str, rng: ByteRange | None, etag: str | None = None) -> bytes:
        """What a GET answered "range not satisfiable" (416) reads: nothing if the range starts at
        or past the end of the object, as HTTP means; a range inside it is an error, not an end,
        unless the object is no longer the version the GET was pinned to (SeaweedFS answered 416,
        not 412, to a GET sent while a new version was being written): then it is Stale."""
        info = self.stat(key)
        if etag and info.etag and plain_etag(etag) != info.etag:
            raise Stale(f"{key!r}: the object changed since version {etag}")
        start = rng.start if rng is not None else 0
        if start < info.size:
            raise BackendError(f"{key!r}: {self.service} GET answered 416 for bytes from {start} of an object of {info.size}")
        return b""

    def stat(self, key: str) -> ObjectInfo:
        return self._info(key, self._head(key))

    def _head(self, key: str) -> Listed:
        """One HEAD of ``key``: what the server answered of it."""
        check_key(key)
        self._count("head")
        try:
            return obs.head(self.store, self._full(key))
        except Exception as exc:
            raise self._err(exc, key, "head") from None

    # ------------------------------------------------------------------ writes

    def set(self, key: str, data: bytes | bytearray | memoryview, if_version: str | None = None) -> ObjectInfo:
        check_key(key)
        check_writable(self, key)
        return self._put(key, data, len(data), if_version)

    def set_file(self, key: str, f: BinaryIO, size: int, if_version: str | None = None) -> ObjectInfo:
        """Store ``size`` bytes of ``f`` from its position; above the multipart threshold read
        and sent a part at a time (a file that ends sooner fails the upload: nothing is stored)."""
        if size < self.sizes.multipart_threshold:
            return super().set_file(key, f, size, if_version)
        check_key(key)
        check_writable(self, key)
        return self._put(key, file_pieces(key, f, size, self.sizes.part_size), size, if_version)

    def _put(self, key: str, body: Any, size: int, if_version: str | None = None) -> ObjectInfo:
        """One PUT, or a multipart upload from the threshold on; ``if_version`` is not asked for
        here (GCS and Azure condition their writes in :mod:`.cloudwrites`)."""
        path = self._full(key)
        multipart = size >= self.sizes.multipart_threshold
        self._count("multipart" if multipart else "put")
        try:
            result = obs.put(self.store, path, body, use_multipart=multipart, chunk_size=self.sizes.part_size,
                             max_concurrency=min(8, self.sizes.max_concurrency), **self.put_arguments())
        except Exception as exc:
            raise self._put_error(exc, key, "multipart" if multipart else "put") from None
        return ObjectInfo(key, size, time.time_ns(), plain_etag(result.get("e_tag")))

    def _put_error(self, exc: BaseException, key: str, kind: str) -> NczfsError:
        """The error of a failed PUT: OutcomeUnknown where the request went out and no answer
        came (it may still be carried out), told from one refused (its answer) or never sent."""
        cause = exc.__cause__ if isinstance(exc.__cause__, NczfsError) else exc
        err = self._err(cause, key, kind)
        if type(err) is BackendError and unanswered(cause):
            return OutcomeUnknown(f"{key!r}: {self.service} PUT got no answer ({first_line(cause)}); it may still "
                                  "be carried out (outcome unknown)")
        return err

    def put_arguments(self) -> dict[str, Any]:
        """Extra arguments of every PUT (S3: the storage class)."""
        return {}

    def delete(self, key: str) -> None:
        check_key(key)
        check_writable(self, key)
        self._delete_path(key, self._full(key))

    def _delete_path(self, key: str, path: str) -> None:
        self._count("delete")
        try:
            obs.delete(self.store, path)
        except FileNotFoundError:
            pass
        except Exception as exc:
            err = self._err(exc, key, "delete")
            if not isinstance(err, KeyNotFound):
                raise err from None

    def copy(self, src: str, dst: str, if_version: str | None = None) -> ObjectInfo:
        check_key(src)
        check_key(dst)
        check_writable(self, dst)
        self._count("copy")
        try:
            obs.copy(self.store, self._full(src), self._full(dst))
        except Exception as exc:
            raise self._err(exc, src, "copy") from None
        return self.stat(dst)

    def forget_dir(self, prefix: str) -> None:
        """A directory with no keys left was removed or moved: delete a marker other tools may
        have left at ``prefix/`` (absent markers cost one no-op DELETE where the store allows it)."""

    def describe(self) -> str:
        return self.url


