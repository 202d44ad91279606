"""Lean S3 requests: a signed ranged GetObject, a listing page, and over ``http://`` a PutObject,
UploadPart, CreateMultipartUpload or CompleteMultipartUpload, without botocore's request pipeline.

botocore spends about 2-3 ms of Python per request (event hooks, parameter handling, response
parsing); a zarr chunk of 4 KiB costs one GET, so on small-chunk workloads that CPU time, under
the GIL, was most of the daemon's time (py-spy, see docs/PERFORMANCE.md). This module signs
its requests with SigV4 itself (``hmac``/``hashlib``: a few tens of microseconds) and sends them
over keep-alive connections: nczfs's own minimal HTTP/1.1 client for ``http://`` (http1.py), a
urllib3 pool for ``https://``. It is used only where it can be exact: path-style addressing on an
explicit endpoint (S3-compatible servers, e.g. the tests' SeaweedFS), credentials read from
the boto3 client for each request (so refreshed ones are used). Everything else, and every
other operation (HEAD, COPY, DELETE, aborting multipart uploads), stays with boto3.

Uploads: botocore sends a body in 16 KiB pieces from a file object and computes a CRC32 on top
of the SHA-256 its SigV4 needs over ``http://``: ~20 ms of CPU per 8 MiB part against ~8 ms
here (lab: 0.33 s for 16 x 8 MiB PUTs from 8 threads, 0.13 s for the same PUTs). Here a body is
hashed once (SHA-256, in the signed request, as botocore does over ``http://``) and sent in one
``sendall``. Over ``https://`` botocore keeps them.

HTTP outcomes map to the same nczfs exceptions as :func:`nczfs.store.s3.translate`:
404 -> KeyNotFound, 403 -> PermissionDenied, 412 -> Stale, KeyTooLongError -> NameTooLong;
5xx and connection errors are retried (3 attempts in all, like boto3's standard mode), then
BackendError naming the key. A 200 answer to a POST that holds an S3 error document (S3 may
start answering CompleteMultipartUpload before it fails) is retried like a 5xx, as botocore does.
A multipart upload's creation and completion cost ~3 ms of botocore's Python each; lab, zarr
writing 128 MiB in 16 chunks (each its own upload), 12 writes: daemon CPU 7.05 -> 6.40 s.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import re
import time
import urllib.parse
from typing import Any, Callable, Iterator
from xml.etree import ElementTree
from xml.sax.saxutils import escape

import trio
import urllib3
from botocore import UNSIGNED

from nczfs.errors import BackendError, KeyNotFound, NameTooLong, PermissionDenied, Stale
from nczfs.store.http1 import HttpError, Pool, TrioPool

ATTEMPTS = 3
#: credentials botocore would refresh within this many seconds are refreshed from a worker thread
REFRESH_MARGIN = 16 * 60
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


class RangeNotSatisfiable(Exception):
    """HTTP 416: the range starts at or past the end of the object."""


class _NotAsked(Exception):
    """A successful answer that is not what was asked for (a range other than the one asked
    for, a listing that is not one): retried like a 5xx."""


_CONTENT_RANGE = re.compile(rb"bytes (\d+)-(\d+)/(\d+|\*)")


def ranged_body(byte_range: str | None, status: int, headers: dict[bytes, bytes], body: bytes) -> bytes:
    """The bytes ``byte_range`` (``bytes=a-b``, ``bytes=a-`` or None: all) asked for, out of a
    200 or 206 answer. A 200 holds the whole object (HTTP lets a server ignore Range): the range
    is cut out of it. A 206 must hold the range asked for, cut short only by the object's end
    (its ``Content-Range`` says where that is); anything else is :class:`_NotAsked`."""
    if byte_range is None:
        return body
    first, _, last = byte_range[len("bytes="):].partition("-")
    start, end = int(first), (int(last) if last else None)  # end: inclusive
    if status == 200:
        if start >= len(body):
            raise RangeNotSatisfiable()
        return body[start : None if end is None else end + 1]
    cr = headers.get(b"content-range")
    if cr is None:
        if end is not None and len(body) == end - start + 1:
            return body
        raise _NotAsked(f"{len(body)} bytes without Content-Range for {byte_range}")
    m = _CONTENT_RANGE.fullmatch(cr.strip())
    whole = m is not None and int(m[1]) == start and len(body) == int(m[2]) - start + 1 and (end is None or int(m[2]) <= end)
    if whole and (end is None or int(m[2]) < end):  # ends before the range asked for: only at the object's end
        whole = m[3] != b"*" and int(m[2]) == int(m[3]) - 1
    if not whole:
        raise _NotAsked(f"{len(body)} bytes, Content-Range {cr.decode('latin-1')!r}, for {byte_range}")
    return body


def _hmac(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


class LeanS3:
    def __init__(self, client: Any, bucket: str, *, count: Callable[[str], None], pool_size: int = 16):
        url = urllib.parse.urlsplit(client.meta.endpoint_url)
        self.scheme, self.host = url.scheme, url.netloc
        self.base = url.path.rstrip("/") + "/" + urllib.parse.quote(bucket, safe="")
        self.region = client.meta.region_name or "us-east-1"
        self.unsigned = client.meta.config.signature_version is UNSIGNED
        self._signer = client._request_signer  # its credentials, refreshed by botocore
        self._count = count
        self._keys: dict[tuple[str, str, str], bytes] = {}
        if self.scheme == "https":  # TLS stays with urllib3
            self.pool: Any = urllib3.HTTPSConnectionPool(url.hostname, url.port, maxsize=pool_size, block=True,
                                                          retries=False, timeout=urllib3.Timeout(connect=5, read=60))
            self.trio_pool: TrioPool | None = None
        else:  # plain http: nczfs's own minimal HTTP/1.1 (http1.py), half the CPU per request
            self.pool = Pool(url.hostname or "localhost", url.port or 80, maxsize=pool_size)
            self.trio_pool = TrioPool(url.hostname or "localhost", url.port or 80, maxsize=pool_size)

    @staticmethod
    def usable(client: Any) -> bool:
        """Path-style requests to an explicit http(s) endpoint (not AWS's virtual-hosted buckets)."""
        cfg = client.meta.config
        return (
            (cfg.s3 or {}).get("addressing_style") == "path"
            and urllib.parse.urlsplit(client.meta.endpoint_url).scheme in ("http", "https")
            and (cfg.signature_version is UNSIGNED or client._request_signer.signature_version in ("s3v4", "v4"))
        )

    def _signing_key(self, secret: str, day: str) -> bytes:
        ident = (secret, day, self.region)
        key = self._keys.get(ident)
        if key is None:
            key = _hmac(("AWS4" + secret).encode(), day)
            for part in (self.region, "s3", "aws4_request"):
                key = _hmac(key, part)
            self._keys = {ident: key}
        return key

    @property
    def puts(self) -> bool:
        """Whether :meth:`put` can be used (plain ``http://``: nczfs's own client)."""
        return isinstance(self.pool, Pool)

    def _headers(self, path: str, extra: dict[str, str], query: str = "", *, method: str = "GET",
                 payload: str = EMPTY_SHA256) -> dict[str, str]:
        headers = {"host": self.host, "x-amz-content-sha256": payload, **extra}
        if self.unsigned:
            return headers
        creds = self._signer._credentials.get_frozen_credentials()
        now = datetime.datetime.now(datetime.timezone.utc)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        day = amz_date[:8]
        headers["x-amz-date"] = amz_date
        if creds.token:
            headers["x-amz-security-token"] = creds.token
        names = sorted(headers)
        signed = ";".join(names)
        canonical = "\n".join(
            [method, path, query, "".join(f"{n}:{headers[n].strip()}\n" for n in names), signed, payload]
        )
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
        signature = hmac.new(self._signing_key(creds.secret_key, day), to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={creds.access_key}/{scope}, SignedHeaders={signed}, Signature={signature}"
        )
        return headers

    def get(self, key: str, full_key: str, byte_range: str | None, etag: str | None) -> bytes:
        """GET ``full_key`` (the S3 key), optionally ``Range: bytes=...`` and ``If-Match``."""
        return self._request("GetObject", key, *self._get_target(full_key, byte_range, etag),
                             check=lambda status, headers, body: ranged_body(byte_range, status, headers, body))[0]

    def _get_target(self, full_key: str, byte_range: str | None, etag: str | None) -> tuple[str, dict[str, str]]:
        extra = {}
        if byte_range:
            extra["range"] = byte_range
        if etag:
            extra["if-match"] = f'"{etag}"'
        return self.base + "/" + urllib.parse.quote(full_key, safe="/~"), extra

    def put(self, op: str, key: str, full_key: str, body: bytes | memoryview,
            params: dict[str, str] | None = None) -> str:
        """PUT ``body`` as the object ``full_key`` (op ``PutObject``), or as one part of a multipart
        upload (``UploadPart``, with ``partNumber`` and ``uploadId`` in ``params``); returns its
        ETag, quoted as S3 gives it ("" for a PutObject answered without one). Only where :attr:`puts`."""
        path = self._object_path(full_key)
        query = "&".join(f"{_q(k)}={_q(v)}" for k, v in sorted((params or {}).items()))
        _, headers = self._request(op, key, path, {}, query, body=body)
        if not headers.get(b"etag"):
            if op == "PutObject":  # stored all the same: of unknown version, as boto3 returns it
                return ""
            raise BackendError(f"{key!r}: S3 {op} answered without an ETag")  # a part cannot be listed to complete
        return headers[b"etag"].decode("latin-1")

    def list_pages(self, key: str, s3_prefix: str, delimiter: bool, max_keys: int | None = None
                   ) -> Iterator[dict[str, Any]]:
        """ListObjectsV2 pages, shaped as boto3 returns them (``Contents``, ``CommonPrefixes``),
        parsed with ElementTree (botocore's parser cost ~50 ms of Python per 1,000 keys)."""
        token = None
        while True:
            params = {"list-type": "2", "prefix": s3_prefix, "encoding-type": "url"}
            if delimiter:
                params["delimiter"] = "/"
            if max_keys is not None:
                params["max-keys"] = str(max_keys)
            if token:
                params["continuation-token"] = token
            query = "&".join(f"{_q(k)}={_q(v)}" for k, v in sorted(params.items()))
            page = self._request("ListObjectsV2", key, self.base, {}, query,
                                 check=lambda status, headers, body: _parse_listing(body))[0]
            yield page
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token:
                return

    def create_upload(self, key: str, full_key: str) -> str:
        """CreateMultipartUpload of ``full_key``: its upload id. Only where :attr:`puts`."""
        answer, _ = self._request("CreateMultipartUpload", key, self._object_path(full_key), {}, "uploads=",
                                  body=b"", method="POST")
        upload_id = _xml_text(answer, "UploadId")
        if not upload_id:
            raise BackendError(f"{key!r}: S3 CreateMultipartUpload answered without an UploadId")
        return upload_id

    def complete_upload(self, key: str, full_key: str, upload_id: str, etags: list[str]) -> str:
        """CompleteMultipartUpload of the parts whose ETags (numbered from 1) are ``etags``: the
        object's ETag, quoted. Only where :attr:`puts`."""
        parts = "".join(f"<Part><PartNumber>{n}</PartNumber><ETag>{escape(e)}</ETag></Part>" for n, e in enumerate(etags, 1))
        body = f'<CompleteMultipartUpload xmlns="{_NS[1:-1]}">{parts}</CompleteMultipartUpload>'.encode()
        answer, _ = self._request("CompleteMultipartUpload", key, self._object_path(full_key),
                                  {"content-type": "application/xml"}, f"uploadId={_q(upload_id)}", body=body, method="POST")
        return _xml_text(answer, "ETag") or ""

    def _object_path(self, full_key: str) -> str:
        return self.base + "/" + urllib.parse.quote(full_key, safe="/~")

    def _request(self, op: str, key: str, path: str, extra: dict[str, str], query: str = "", *,
                 body: bytes | memoryview | None = None, method: str = "",
                 check: Callable[[int, dict[bytes, bytes], bytes], Any] | None = None) -> tuple[Any, dict[bytes, bytes]]:
        """A GET, or with ``body`` a PUT or ``method`` (only where :attr:`puts`), retried as the
        module says; returns the answer's body (passed through ``check`` if given, which may
        raise :class:`_NotAsked`) and its headers by lower-case name. An S3 error document in a
        200 answer to a POST (S3 can start a CompleteMultipartUpload's answer before it fails)
        is a failure, retried as a 5xx is, and so is what ``check`` refuses."""
        url = path + ("?" + query if query else "")
        payload = EMPTY_SHA256 if body is None else hashlib.sha256(body).hexdigest()
        method = method or ("GET" if body is None else "PUT")
        for attempt in range(ATTEMPTS):
            self._count(op)
            try:
                status, answer, headers = self._send(
                    url, self._headers(path, extra, query, method=method, payload=payload), body, method)
            except (urllib3.exceptions.HTTPError, HttpError) as exc:
                failure: str = f"{type(exc).__name__}: {exc}"
            else:
                if status == 200 and method == "POST" and b"<Error>" in answer[:1000]:
                    failure = f"HTTP 200 with an error: {_code(answer)}"
                elif status in (200, 206):
                    try:
                        return (answer if check is None else check(status, headers, answer)), headers
                    except _NotAsked as exc:
                        failure = f"HTTP {status} not as asked: {exc}"
                else:
                    failure = _failure(op, key, status, answer)
            if attempt + 1 < ATTEMPTS:
                self._count("retries-considered")
                time.sleep(0.05 * 2**attempt)
        raise BackendError(f"{key!r}: S3 {op} failed: {failure}")

    async def get_async(self, key: str, full_key: str, byte_range: str | None, etag: str | None) -> bytes | None:
        """:meth:`get` from the trio thread, over :class:`TrioPool`. None where it cannot be done
        without blocking (``https://``; credentials due for a refresh, which may call out): the
        caller then uses :meth:`get` in a worker thread."""
        if self.trio_pool is None or self._refresh_due():
            return None
        path, extra = self._get_target(full_key, byte_range, etag)
        headers: dict[bytes, bytes] = {}
        for attempt in range(ATTEMPTS):
            self._count("GetObject")
            try:
                status, body = await self.trio_pool.request("GET", path, self._headers(path, extra), headers)
            except HttpError as exc:
                failure = f"HttpError: {exc}"
            else:
                if status in (200, 206):
                    try:
                        return ranged_body(byte_range, status, headers, body)
                    except _NotAsked as exc:
                        failure = f"HTTP {status} not as asked: {exc}"
                else:
                    failure = _failure("GetObject", key, status, body)
            if attempt + 1 < ATTEMPTS:
                self._count("retries-considered")
                await trio.sleep(0.05 * 2**attempt)
        raise BackendError(f"{key!r}: S3 GetObject failed: {failure}")

    def _refresh_due(self) -> bool:
        """Whether botocore would refresh the credentials on their next use (a network call)."""
        creds = self._signer._credentials
        due = getattr(creds, "refresh_needed", None)
        return bool(due is not None and due(REFRESH_MARGIN))

    def _send(self, url: str, headers: dict[str, str], body: bytes | memoryview | None, method: str = "PUT"
              ) -> tuple[int, bytes, dict[bytes, bytes]]:
        if body is not None:
            return self.pool.send(method, url, headers, body)
        if isinstance(self.pool, Pool):
            answer: dict[bytes, bytes] = {}
            return (*self.pool.request("GET", url, headers, answer), answer)
        resp = self.pool.request("GET", url, headers=headers, preload_content=True)
        return resp.status, resp.data, {k.lower().encode("latin-1"): v.encode("latin-1") for k, v in resp.headers.items()}

    def close(self) -> None:
        self.pool.close()
        if self.trio_pool is not None:
            self.trio_pool.close()


def _q(value: str) -> str:
    return urllib.parse.quote(value, safe="-_.~")


_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


def _parse_listing(body: bytes) -> dict[str, Any]:
    """A ListObjectsV2 answer's page; anything but a ListBucketResult that says whether it is
    truncated (an S3 error document sent with a 200, a proxy's page, XML cut short) is
    :class:`_NotAsked`, never a directory that lists fewer names."""
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as exc:
        raise _NotAsked(f"a listing that is not XML ({exc})") from None
    ns = _NS if root.tag.startswith(_NS) else ""
    if root.tag != ns + "ListBucketResult" or root.find(ns + "IsTruncated") is None:
        raise _NotAsked(f"a listing answered with <{root.tag.removeprefix(ns)}> {_code(body)}".rstrip())

    def text(node: ElementTree.Element, name: str) -> str | None:
        child = node.find(ns + name)
        return None if child is None else (child.text or "")

    def key(value: str | None) -> str:
        return urllib.parse.unquote_plus(value or "")

    page: dict[str, Any] = {
        "IsTruncated": text(root, "IsTruncated") == "true",
        "NextContinuationToken": text(root, "NextContinuationToken"),
        "Contents": [],
        "CommonPrefixes": [],
    }
    for item in root.iter(ns + "Contents"):
        modified = text(item, "LastModified")
        page["Contents"].append({
            "Key": key(text(item, "Key")),
            "Size": int(text(item, "Size") or 0),
            "ETag": text(item, "ETag") or "",
            "LastModified": datetime.datetime.fromisoformat(modified.replace("Z", "+00:00")) if modified else None,
        })
    for item in root.iter(ns + "CommonPrefixes"):
        page["CommonPrefixes"].append({"Prefix": key(text(item, "Prefix"))})
    page["KeyCount"] = len(page["Contents"]) + len(page["CommonPrefixes"])
    return page


def _failure(op: str, key: str, status: int, body: bytes) -> str:
    """What an unsuccessful answer means: an nczfs error raised, or a retryable failure described."""
    code = _code(body)
    if status == 404 and code not in ("NoSuchBucket", "NoSuchUpload"):
        raise KeyNotFound(key)
    if status == 403:
        raise PermissionDenied(f"{key!r}: S3 {op} refused: HTTP 403 {code}")
    if code == "KeyTooLongError":
        raise NameTooLong(f"{key!r}: S3 {op} refused: {code}")
    if status == 412:
        raise Stale(f"{key!r}: the object changed in S3 while open")
    if status == 416:
        raise RangeNotSatisfiable(key)
    failure = f"HTTP {status} {code}"
    if status < 500 and status != 429:
        raise BackendError(f"{key!r}: S3 {op} failed: {failure}")
    return failure


def _xml_text(body: bytes, name: str) -> str | None:
    """The text of the first ``<name>`` element of an S3 answer (None: there is none)."""
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        return None
    ns = _NS if root.tag.startswith(_NS) else ""
    node = root.find(f".//{ns}{name}")
    return None if node is None else (node.text or "")


def _code(body: bytes) -> str:
    """The ``<Code>`` of an S3 error document, if any."""
    text = body[:2000].decode("utf-8", "replace")
    start = text.find("<Code>")
    end = text.find("</Code>", start)
    return text[start + 6 : end] if start >= 0 and end > start else ""
