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
"""

from __future__ import annotations

import datetime
import logging
import re
import threading
import time
from collections import Counter
from typing import Any, BinaryIO, Iterator

import obstore as obs
from obstore.exceptions import (
    AlreadyExistsError,
    InvalidPathError,
    NotSupportedError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)

from nczfs.aiobridge import AsyncioBridge
from nczfs.errors import BackendError, InvalidKey, KeyNotFound, NameTooLong, NczfsError, PermissionDenied, Stale
from nczfs.store.base import (
    ByteRange,
    DirEntry,
    ObjectInfo,
    SyncStore,
    check_key,
    check_prefix,
    file_pieces,
    join,
    tree_listings,
    usable_name,
)

log = logging.getLogger(__name__)

MAX_KEY_BYTES = 1024
#: bodies at least this long are handed out as a view of obstore's buffer, not copied
KEEP_BUFFER = 1024 * 1024
#: over https, ranged GETs of at least this many bytes go through obstore's async API on one
#: asyncio loop thread, which gathers a TLS body with less CPU than a worker thread does
#: (docs/PERFORMANCE.md, issue #33)
ASYNC_GET_FROM = 1024 * 1024
#: keys one listing page holds (S3's, GCS's and Azure's most)
LIST_PAGE = 1000

#: names of the requests in ``nczfs stats``, by kind (S3 names its own: s3.py)
GENERIC_OPS = {"get": "GET", "head": "HEAD", "list": "LIST", "put": "PUT", "delete": "DELETE", "copy": "COPY",
               "multipart": "MultipartUpload"}


def transport(config: Any, endpoint: str | None, ca_file: str | None) -> dict[str, Any]:
    """obstore's ``client_options`` and ``retry_config`` from a mount's options (-o retries=,
    connect_timeout=, read_timeout=)."""
    timeouts = {k: v for k in ("connect_timeout", "read_timeout") if (v := getattr(config, k)) is not None}
    return {"client_options": obstore_client_options(endpoint, ca_file, **timeouts),
            "retry_config": retry_config() if config.retries is None else retry_config(config.retries)}


class RangeNotSatisfiable(Exception):
    """HTTP 416: the range starts at or past the end of the object."""


def _first_line(exc: BaseException) -> str:
    """What went wrong, in one line: the HTTP status and the service's error code and message
    (S3, GCS and Azure answer ``<Code>``/``<Message>``), else object_store's first line (its
    messages carry a debug dump after it)."""
    text = str(exc)
    status = re.search(r"status code: (\d{3}[^:<]*)", text)
    if status:
        code = re.search(r"<Code>([^<]+)</Code>", text)
        message = re.search(r"<Message>([^<]+)</Message>", text) or re.search(r'"message"\s*:\s*"([^"]+)"', text)
        line = f"HTTP {status.group(1).strip()}" + (f" {code.group(1)}" if code else "") + (
            f": {message.group(1).strip()}" if message else "")
    else:
        line = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return line if len(line) <= 400 else line[:400] + "..."


def translate(exc: BaseException, key: str, op: str, service: str) -> NczfsError:
    """One obstore failure as an nczfs exception naming the key, the request and the cause."""
    if isinstance(exc, NczfsError):
        return exc
    if isinstance(exc, FileNotFoundError):
        return KeyNotFound(key)
    if isinstance(exc, PreconditionError):
        return Stale(f"{key!r}: the object changed in {service} while open")
    if isinstance(exc, (PermissionDeniedError, UnauthenticatedError)):
        return PermissionDenied(f"{key!r}: {service} {op} refused: {_first_line(exc)}")
    if isinstance(exc, ValueError) and "parse path" in str(exc).lower():
        return InvalidKey(key, f"{service} cannot name this key: {_first_line(exc)}")
    text = str(exc)
    if "KeyTooLong" in text:
        return NameTooLong(f"{key!r}: {service} {op} refused: key too long")
    if " 403 " in text or "AccessDenied" in text:
        return PermissionDenied(f"{key!r}: {service} {op} refused: {_first_line(exc)}")
    return BackendError(f"{key!r}: {service} {op} failed: {_first_line(exc)}")


def _unsatisfiable(exc: BaseException) -> bool:
    text = str(exc)
    return "416" in text or "InvalidRange" in text or "Range Not Satisfiable" in text or "range is not satisfiable" in text.lower()


def plain_etag(value: str | None) -> str:
    """An ETag as nczfs keeps it: without the quotes HTTP puts around it."""
    return (value or "").strip('"') if not (value or "").startswith("W/") else (value or "")


def if_match(etag: str | None) -> str | None:
    """The ``If-Match`` value pinning version ``etag`` (None: it cannot be pinned: a weak ETag, or none)."""
    if not etag or etag.startswith("W/"):
        return None
    return f'"{etag}"'


def _mtime_ns(value: datetime.datetime | None) -> int:
    return int(value.timestamp() * 1e9) if value is not None else time.time_ns()


#: seconds one attempt of a request may take in all (an answer trickled a byte at a time is
#: given up then): 32 MiB, the largest single PUT, at 1 Mbit/s
REQUEST_TIMEOUT = 300.0


def obstore_client_options(endpoint: str | None, ca_file: str | None = None, *, connect_timeout: float = 5,
                           read_timeout: float = 15, request_timeout: float = REQUEST_TIMEOUT,
                           allow_http: bool | None = None) -> dict[str, Any]:
    """obstore's HTTP client options: timeouts, ``http://`` allowed for an explicit ``http://``
    endpoint, a private CA's certificate added to the trusted ones. An attempt ends when no
    byte came for ``read_timeout`` seconds (a stall) or after ``request_timeout`` in all (a
    server trickling its answer); it is then retried as a connection failure is."""
    opts: dict[str, Any] = {
        "connect_timeout": datetime.timedelta(seconds=connect_timeout),
        "read_timeout": datetime.timedelta(seconds=read_timeout),
        "timeout": datetime.timedelta(seconds=request_timeout),
        "pool_idle_timeout": datetime.timedelta(seconds=50),
    }
    if allow_http or (allow_http is None and (endpoint or "").startswith("http://")):
        opts["allow_http"] = True
    if ca_file:
        with open(ca_file, "rb") as f:
            opts["root_certificate"] = f.read()
    return opts


def retry_config(retries: int = 2, *, retry_timeout: float = 120) -> dict[str, Any]:
    """Retries as botocore's standard mode makes them (3 attempts in all), bounded in time."""
    return {"max_retries": retries, "retry_timeout": datetime.timedelta(seconds=retry_timeout),
            "backoff": {"init_backoff": datetime.timedelta(milliseconds=50), "max_backoff": datetime.timedelta(seconds=5),
                        "base": 2}}


def _unnamable(exc: BaseException) -> bool:
    """A failure because obstore cannot name a key (a control character in it, as S3 allows)."""
    return isinstance(exc, (InvalidPathError, ValueError)) and "path" in str(exc).lower()


def _pages(n: int) -> int:
    """The fewest listing pages that hold ``n`` entries (S3, GCS, Azure: 1,000 to a page):
    obstore pages by itself and does not say how many requests it sent."""
    return max(1, -(-n // LIST_PAGE))


class ObjectStoreBackend(SyncStore):
    """``prefix`` of an obstore store (its bucket or container chosen when it was made)."""

    stores_directories = False
    keys_form_a_tree = False
    checks_versions = True  # GETs carry If-Match
    lists_trees = True

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
        https: bool = False,
    ):
        self.store = store
        #: ranged GETs from this many bytes go through the asyncio loop of
        #: :meth:`get_version_async` (https only; None: never)
        self.async_get_from: int | None = ASYNC_GET_FROM if https else None
        self._bridge: AsyncioBridge | None = None
        self._bridge_lock = threading.Lock()
        self.prefix = prefix.strip("/")
        self.url = url
        self.service = service
        self.read_only = read_only
        self.ops = ops
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size
        #: ThreadedStore sizes its limiter from this
        self.max_concurrency = max_concurrency
        self._counts: Counter[str] = Counter()
        self._count_lock = threading.Lock()

    # ------------------------------------------------------------------ helpers

    def _count(self, kind: str, n: int = 1) -> None:
        with self._count_lock:
            self._counts[self.ops[kind]] += n

    def counters(self) -> dict[str, int]:
        with self._count_lock:
            return dict(self._counts)

    def _full(self, key: str) -> str:
        full = f"{self.prefix}/{key}" if self.prefix else key
        try:
            raw = full.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidKey(key, f"{self.service} keys are UTF-8; this name is not") from None
        if "\\" in key:  # S3 gateways over a filer (SeaweedFS) turn it into "/"
            raise InvalidKey(key, f"a backslash in an object key is refused (not portable between {self.service} servers)")
        if len(raw) > MAX_KEY_BYTES:
            raise NameTooLong(f"{key!r}: {self.service} keys are at most {MAX_KEY_BYTES} bytes")
        return full

    def check_new_key(self, key: str) -> None:
        check_key(key)
        self._full(key)

    def _dir_path(self, prefix: str) -> str | None:
        """The store path whose children are ``prefix``'s (None: the bucket's root)."""
        full = f"{self.prefix}/{prefix}" if self.prefix and prefix else (prefix or self.prefix)
        return full or None

    def _err(self, exc: BaseException, key: str, kind: str) -> NczfsError:
        """The nczfs error for a failed request; the attempts obstore made (its message says how
        many it retried) are counted as requests."""
        retried = re.search(r"after (\d+) retries", str(exc))
        if retried and int(retried.group(1)):
            self._count(kind, int(retried.group(1)))
            with self._count_lock:
                self._counts["retries-considered"] += int(retried.group(1))
        return translate(exc, key, self.ops[kind], self.service)

    def _info(self, key: str, meta: dict) -> ObjectInfo:
        return ObjectInfo(key, int(meta["size"]), _mtime_ns(meta.get("last_modified")), plain_etag(meta.get("e_tag")))

    def _rel(self, path: str, base: str | None) -> str:
        return path[len(base) + 1 :] if base else path

    # ------------------------------------------------------------------ reads

    def _get_options(self, rng: ByteRange | None, etag: str | None) -> dict[str, Any]:
        options: dict[str, Any] = {}
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
        try:
            body = obs.get(self.store, path, options=self._get_options(rng, etag)).bytes()
            return memoryview(body) if len(body) >= KEEP_BUFFER else bytes(body)  # type: ignore[return-value]
        except Exception as exc:
            if _unsatisfiable(exc):
                return self._past_the_end(key, rng, etag)
            raise self._err(exc, key, "get") from None

    async def get_version_async(self, key: str, rng: ByteRange | None, etag: str | None) -> bytes | None:
        """A ranged GET of at least ASYNC_GET_FROM bytes over https, sent and gathered by obstore's
        async API on one asyncio loop thread, awaited from trio (ThreadedStore); None for every
        other read, and for an answer that needs the blocking path's handling (416), which then
        sends it from a worker thread."""
        least = self.async_get_from
        if least is None or rng is None or rng.end is None or rng.end - rng.start < max(least, 1):
            return None
        check_key(key)
        path = self._full(key)
        self._count("get")
        with self._count_lock:
            self._counts["gets-on-loop"] += 1
        try:
            body = await self._loop().trio_run(self._get_body, path, self._get_options(rng, etag))
        except Exception as exc:
            if _unsatisfiable(exc):
                return None
            raise self._err(exc, key, "get") from None
        return memoryview(body) if len(body) >= KEEP_BUFFER else bytes(body)  # type: ignore[return-value]

    async def _get_body(self, path: str, options: dict[str, Any]) -> Any:
        result = await obs.get_async(self.store, path, options=options)
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
        check_key(key)
        self._count("head")
        try:
            meta = obs.head(self.store, self._full(key))
        except Exception as exc:
            raise self._err(exc, key, "head") from None
        return self._info(key, meta)

    def _listing(self, prefix: str) -> tuple[str | None, dict]:
        base = self._dir_path(prefix)
        try:
            page = obs.list_with_delimiter(self.store, base)
        except Exception as exc:
            self._count("list")
            if _unnamable(exc) and (other := self.list_other_way(base, True)) is not None:
                return base, next(other)
            raise self._err(exc, prefix or "/", "list") from None
        self._count("list", _pages(len(page["objects"]) + len(page["common_prefixes"])))
        return base, page

    def list_other_way(self, base: str | None, delimiter: bool) -> Iterator[Any] | None:
        """A listing of ``base`` where obstore cannot give one (a key it cannot name: a control
        character): with the delimiter one page ``{"common_prefixes", "objects"}``, without
        chunks of objects, shaped as obstore's (a marker ``d/`` as ``d``, marked ``"marker"``).
        None: this store has no other way (the listing fails, naming the key)."""
        return None

    def list_dir(self, prefix: str) -> list[DirEntry]:
        check_prefix(prefix)
        base, page = self._listing(prefix)
        entries: dict[str, DirEntry] = {}
        for cp in page["common_prefixes"]:
            name = self._rel(cp.rstrip("/"), base)
            if self._usable(name, cp):
                entries[name] = DirEntry(name, True)
        for meta in page["objects"]:
            name = self._rel(meta["path"], base)
            if name == "" or not self._usable(name, meta["path"]):
                continue
            if name not in entries:  # an object and a directory of one name: the directory wins
                entries[name] = DirEntry(name, False, self._info(join(prefix, name), meta))
        return [entries[n] for n in sorted(entries)]

    def _walk(self, prefix: str, chunk_size: int = 1000) -> Iterator[list[dict]]:
        base = self._dir_path(prefix)
        given = 0
        try:
            stream = obs.list(self.store, base, chunk_size=chunk_size)
            while True:
                try:
                    chunk = next(stream)
                except StopIteration:
                    if not given:
                        self._count("list")  # the request that found nothing
                    return
                self._count("list", _pages(len(chunk)))
                given += len(chunk)
                yield chunk
        except NczfsError:
            raise
        except Exception as exc:
            other = self.list_other_way(base, False) if _unnamable(exc) else None
            if other is None:
                raise self._err(exc, prefix or "/", "list") from None
        skip = given  # the same order: from past what obstore gave already
        for chunk in other:
            if skip >= len(chunk):
                skip -= len(chunk)
                continue
            yield chunk[skip:]
            skip = 0

    def list_tree(self, prefix: str, limit: int) -> dict[str, list[DirEntry]] | None:
        check_prefix(prefix)
        base = self._dir_path(prefix)
        objects: list[dict] = []
        for chunk in self._walk(prefix, limit + 1):
            objects.extend(chunk)
            break
        if len(objects) > limit:
            return None
        listed = []
        for m in objects:
            rel = self._rel(m["path"], base)
            # a directory marker ("rel/") is a directory: tree_listings knows keys ending in "/"
            listed.append((rel + "/" if self._is_marker(m) else rel, self._info(join(prefix, rel), m)))
        return tree_listings(prefix, listed)

    def _is_marker(self, meta: dict) -> bool:
        """Is this listed object a directory marker (a key ``path/`` other tools write)? obstore
        lists ``path/`` as ``path``: an empty object whose HEAD finds nothing under ``path``."""
        if "marker" in meta or meta["size"] != 0:
            return bool(meta.get("marker"))
        self._count("head")
        try:
            obs.head(self.store, meta["path"])
        except FileNotFoundError:
            return True
        except Exception as exc:
            raise self._err(exc, meta["path"], "head") from None
        return False

    @staticmethod
    def _usable(name: str, path: str) -> bool:
        if not usable_name(name):
            log.debug("object key %r has no file name nczfs can show; skipped", path)
            return False
        return True

    def list_prefix(self, prefix: str) -> list[str]:
        check_prefix(prefix)
        out = []
        for chunk in self._walk(prefix):
            for meta in chunk:
                key = self._rel(meta["path"], self.prefix or None)
                try:
                    check_key(key)
                except NczfsError:
                    log.debug("object key %r cannot be shown; skipped", meta["path"])
                    continue
                if not self._is_marker(meta):
                    out.append(key)
        return sorted(out)

    def dir_exists(self, prefix: str) -> bool:
        if prefix == "":
            return True
        check_key(prefix)
        self._full(prefix)
        for chunk in self._walk(prefix, 1):
            return bool(chunk)
        return False

    def probe(self) -> None:
        """One LIST of at most one key below the prefix: raises what the store answers (no such
        bucket, credentials refused, endpoint down)."""
        for _ in self._walk("", 1):
            return

    def entry(self, key: str) -> DirEntry | None:
        """One LIST of at most one key says whether ``key`` is a directory (which wins over an
        object of the same name, as in listings); else a HEAD answers for an object."""
        name = key.rpartition("/")[2]
        if self.dir_exists(key):
            return DirEntry(name, True)
        try:
            return DirEntry(name, False, self.stat(key))
        except KeyNotFound:
            return None

    # ------------------------------------------------------------------ writes

    def set(self, key: str, data: bytes | bytearray | memoryview) -> ObjectInfo:
        check_key(key)
        self.check_writable(key)
        return self._put(key, data, len(data))

    def set_file(self, key: str, f: BinaryIO, size: int) -> ObjectInfo:
        """Store ``size`` bytes of ``f`` from its position; above the multipart threshold read
        and sent a part at a time (a file that ends sooner fails the upload: nothing is stored)."""
        if size < self.multipart_threshold:
            return super().set_file(key, f, size)
        check_key(key)
        self.check_writable(key)
        return self._put(key, file_pieces(key, f, size, self.part_size), size)

    def _put(self, key: str, body: Any, size: int) -> ObjectInfo:
        path = self._full(key)
        multipart = size >= self.multipart_threshold
        self._count("multipart" if multipart else "put")
        try:
            result = obs.put(self.store, path, body, use_multipart=multipart, chunk_size=self.part_size,
                             max_concurrency=min(8, self.max_concurrency), **self.put_arguments())
        except Exception as exc:
            cause = exc.__cause__ if isinstance(exc.__cause__, NczfsError) else exc
            raise self._err(cause, key, "multipart" if multipart else "put") from None
        return ObjectInfo(key, size, time.time_ns(), plain_etag(result.get("e_tag")))

    def put_arguments(self) -> dict[str, Any]:
        """Extra arguments of every PUT (S3: the storage class)."""
        return {}

    def delete(self, key: str) -> None:
        check_key(key)
        self.check_writable(key)
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

    def copy(self, src: str, dst: str) -> ObjectInfo:
        check_key(src)
        check_key(dst)
        self.check_writable(dst)
        self._count("copy")
        try:
            obs.copy(self.store, self._full(src), self._full(dst))
        except (NotSupportedError, AlreadyExistsError) as exc:
            raise self._err(exc, src, "copy") from None
        except Exception as exc:
            raise self._err(exc, src, "copy") from None
        return self.stat(dst)

    def forget_dir(self, prefix: str) -> None:
        """A directory with no keys left was removed or moved: delete a marker other tools may
        have left at ``prefix/`` (absent markers cost one no-op DELETE where the store allows it)."""

    def describe(self) -> str:
        return self.url


