"""Lean requests (nczfs/store/s3lean.py: GETs, listings, PUTs) against the real SeaweedFS server,
and retries against a failing one.

The conformance suite (tests/store/test_s3.py) already reads and writes through them, since the
test server is path-style; these check the cases one by one against boto3's own requests.
"""

from __future__ import annotations

import contextlib
import datetime
import http.server
import threading
from typing import ClassVar, Iterator

import boto3
import pytest
import trio
from botocore import UNSIGNED
from botocore.config import Config
from botocore.credentials import RefreshableCredentials

from nczfs.errors import BackendError, KeyNotFound, PermissionDenied, Stale
from nczfs.store import http1
from nczfs.store.base import ByteRange
from nczfs.store.s3 import S3Store
from nczfs.threads import ThreadedStore
from tests.s3server import ADMIN

DATA = bytes(range(256)) * 40


def in_trio(store: S3Store, key: str, rng: ByteRange | None = None, etag: str | None = None) -> bytes:
    """A read through ThreadedStore, which uses the store's trio-thread GET where it can."""
    return trio.run(ThreadedStore(store).get_version, key, rng, etag)


@pytest.fixture
def stored(s3_server):
    bucket = s3_server.new_bucket("lean")
    s3_server.client().put_object(Bucket=bucket, Key="p/k", Body=DATA)
    return s3_server, bucket


def test_lean_requests_are_used_on_path_style_endpoints_and_match_boto3(stored):
    server, bucket = stored
    lean = S3Store(server.client(), bucket, "p")
    plain = S3Store(server.client(), bucket, "p", lean_requests=False)
    assert lean.lean is not None and plain.lean is None
    for rng in (None, ByteRange(0, 10), ByteRange(100, 5000), ByteRange(10_000), ByteRange(9_000, 20_000), ByteRange(20_000, 30_000)):
        assert lean.get("k", rng) == plain.get("k", rng), rng
    assert lean.counters()["GetObject"] == 6
    etag = lean.stat("k").etag
    assert lean.get_version("k", ByteRange(0, 4), etag) == DATA[:4]


@pytest.mark.parametrize("where", ["worker thread", "trio thread"])
def test_lean_get_errors(stored, where):
    server, bucket = stored

    def read(store: S3Store, key: str, rng: ByteRange | None = None, etag: str | None = None) -> bytes:
        return store.get_version(key, rng, etag) if where == "worker thread" else in_trio(store, key, rng, etag)

    store = S3Store(server.client(), bucket, "p")
    with pytest.raises(KeyNotFound):
        read(store, "missing")
    with pytest.raises(Stale):
        read(store, "k", ByteRange(0, 4), "0123456789abcdef0123456789abcdef")
    wrong = boto3.client("s3", endpoint_url=server.endpoint, aws_access_key_id=ADMIN[0], aws_secret_access_key="nope",
                         region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
    with pytest.raises(PermissionDenied, match="'k'.*403"):
        read(S3Store(wrong, bucket, "p"), "k")
    anonymous = boto3.client("s3", endpoint_url=server.endpoint, region_name="us-east-1",
                             config=Config(s3={"addressing_style": "path"}, signature_version=UNSIGNED))
    unsigned = S3Store(anonymous, bucket, "p")
    assert unsigned.lean is not None and unsigned.lean.unsigned
    with pytest.raises(PermissionDenied):
        read(unsigned, "k")


@contextlib.contextmanager
def store_on(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[S3Store]:
    """An S3Store (path style, lean requests) on a local HTTP server run by ``handler``."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{httpd.server_port}", aws_access_key_id="a",
                              aws_secret_access_key="b", region_name="us-east-1",
                              config=Config(s3={"addressing_style": "path"}))
        yield S3Store(client, "bucket", "p")
    finally:
        httpd.shutdown()
        httpd.server_close()


class Flaky(http.server.BaseHTTPRequestHandler):
    """Answers 503 to the first ``fail`` requests, then a GET with the object and a PUT with an
    ETag; records the bodies of PUTs."""

    protocol_version = "HTTP/1.1"  # keep-alive, and ``100 Continue`` for a request that expects it
    fail = 2
    seen = 0
    bodies: ClassVar[list[bytes]] = []

    def do_GET(self):  # noqa: N802
        self._answer(b"payload")

    def do_PUT(self):  # noqa: N802
        type(self).bodies.append(self.rfile.read(int(self.headers["Content-Length"])))
        self._answer(b"")

    def _answer(self, payload: bytes) -> None:
        type(self).seen += 1
        failing = type(self).seen <= type(self).fail
        body = b"<Error><Code>SlowDown</Code></Error>" if failing else payload
        self.send_response(503 if failing else 200)
        if not failing:
            self.send_header("ETag", '"e1"')
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def flaky():
    """A store on a :class:`Flaky` server; the test sets how many requests fail."""
    Flaky.seen, Flaky.bodies = 0, []
    with store_on(Flaky) as store:
        yield store


@pytest.mark.parametrize("fail, ok", [(2, True), (3, False)])
@pytest.mark.parametrize("where", ["worker thread", "trio thread"])
def test_lean_get_retries_server_errors(flaky, fail, ok, where):
    Flaky.fail = fail
    store = flaky
    get = store.get if where == "worker thread" else lambda key: in_trio(store, key)
    if ok:
        assert get("k") == b"payload"
    else:
        with pytest.raises(BackendError, match="'k'.*HTTP 503 SlowDown"):
            get("k")
    assert Flaky.seen == 3
    assert store.counters()["GetObject"] == 3 and store.counters()["retries-considered"] == 2


class Misranged(http.server.BaseHTTPRequestHandler):
    """Serves one object of 20,000 bytes; ranged GETs are answered wrongly (``mode``) the first
    ``wrong`` times, then as S3 does."""

    protocol_version = "HTTP/1.1"
    OBJECT = bytes(range(256)) * 78 + bytes(32)  # 20,000 bytes
    mode = "ignore range"
    wrong = 1
    gets = 0

    def do_HEAD(self):  # noqa: N802
        self._send(200, {"Content-Length": str(len(self.OBJECT)), "ETag": '"e1"'}, b"")

    def do_GET(self):  # noqa: N802
        cls = type(self)
        cls.gets += 1
        first, _, last = self.headers["Range"][len("bytes="):].partition("-")
        start, end = int(first), min(int(last) if last else len(self.OBJECT) - 1, len(self.OBJECT) - 1)
        total = len(self.OBJECT)
        if cls.gets > cls.wrong or self.mode == "right":
            self._part(start, end, f"bytes {start}-{end}/{total}")
        elif self.mode == "ignore range":  # HTTP allows it: the whole object, 200
            self._send(200, {"Content-Length": str(total)}, self.OBJECT)
        elif self.mode == "short":  # a 206 that says it is 1,000 bytes short
            self._part(start, end - 1000, f"bytes {start}-{end - 1000}/{total}")
        elif self.mode == "shifted":
            self._part(start + 1, end, f"bytes {start + 1}-{end}/{total}")
        elif self.mode == "short without Content-Range":
            self._part(start, end - 1000, None)
        elif self.mode == "416 inside":
            self._send(416, {"Content-Length": "0"}, b"")

    def _part(self, start: int, end: int, content_range: str | None) -> None:
        body = self.OBJECT[start : end + 1]
        headers = {"Content-Length": str(len(body))}
        if content_range:
            headers["Content-Range"] = content_range
        self._send(206, headers, body)

    def _send(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def misranged():
    Misranged.gets = 0
    with store_on(Misranged) as store:
        yield store


@pytest.mark.parametrize("where", ["worker thread", "trio thread"])
@pytest.mark.parametrize("mode, wrong, outcome", [
    ("ignore range", 3, "right"),  # the range is cut out of the whole object
    ("short", 1, "right"),  # retried
    ("short", 3, "error"),
    ("shifted", 3, "error"),
    ("short without Content-Range", 3, "error"),
    ("416 inside", 3, "error"),  # not an end of file: the object is longer
])
def test_a_get_answered_with_other_bytes_than_the_range_asked_is_retried_or_an_error(misranged, where, mode, wrong, outcome):
    Misranged.mode, Misranged.wrong = mode, wrong
    get = misranged.get if where == "worker thread" else lambda key, rng: in_trio(misranged, key, rng)
    rng = ByteRange(8_192, 16_384)
    if outcome == "right":
        assert get("k", rng) == Misranged.OBJECT[8_192:16_384]
    else:
        with pytest.raises(BackendError, match="'k'.*(not as asked|416)"):
            get("k", rng)
    Misranged.mode, Misranged.gets = "right", 0
    assert get("k", ByteRange(19_000, 25_000)) == Misranged.OBJECT[19_000:]  # cut by the object's end: right


class OddListings(http.server.BaseHTTPRequestHandler):
    """Answers ListObjectsV2 with 200 and ``body`` the first ``wrong`` times, then with a page
    that lists one file."""

    protocol_version = "HTTP/1.1"
    body = b""
    wrong = 1
    lists = 0
    GOOD = (b'<?xml version="1.0"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            b"<Name>bucket</Name><Prefix>p/</Prefix><KeyCount>1</KeyCount><IsTruncated>false</IsTruncated>"
            b"<Contents><Key>p/f</Key><Size>3</Size><ETag>&quot;e1&quot;</ETag>"
            b"<LastModified>2026-11-22T00:00:00.000Z</LastModified></Contents></ListBucketResult>")

    def do_GET(self):  # noqa: N802
        cls = type(self)
        cls.lists += 1
        body = cls.body if cls.lists <= cls.wrong else self.GOOD
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("body", [
    b'<?xml version="1.0"?><Error><Code>InternalError</Code><Message>try again</Message></Error>',
    b"<html><body>a proxy's page</body></html>",
    b'<?xml version="1.0"?><ListBucketResult><Contents><Key>p/f</Key>',  # cut short
    b'<?xml version="1.0"?><ListBucketResult></ListBucketResult>',  # says nothing of truncation
])
@pytest.mark.parametrize("wrong, ok", [(2, True), (3, False)])
def test_a_listing_answered_with_something_else_is_retried_then_an_error(body, wrong, ok):
    OddListings.body, OddListings.wrong, OddListings.lists = body, wrong, 0
    with store_on(OddListings) as store:
        if ok:
            assert [e.name for e in store.list_dir("")] == ["f"]
        else:
            with pytest.raises(BackendError, match="ListObjectsV2 failed: HTTP 200 not as asked"):
                store.list_dir("")
    assert OddListings.lists == 3


class Terse(http.server.BaseHTTPRequestHandler):
    """Answers a HEAD without Content-Length (a proxy that drops it) after dropping the first
    connection unanswered, and a PUT with 200 but no ETag."""

    protocol_version = "HTTP/1.1"
    heads = 0

    def do_HEAD(self):  # noqa: N802
        type(self).heads += 1
        if type(self).heads == 1:
            self.close_connection = True  # no answer at all: a connection error to retry
            return
        self.send_response(200)
        self.send_header("ETag", '"e1"')
        self.end_headers()

    def do_PUT(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_terse_answers_give_one_clear_error_or_an_object_of_unknown_version():
    """A HEAD without Content-Length is an error naming the key (not a size, not a traceback);
    the connection error before it counts as a retry; a PUT answered without an ETag stored
    the object all the same (close() must not report it lost): its version is unknown."""
    Terse.heads = 0
    with store_on(Terse) as store:
        with pytest.raises(BackendError, match="'k'.*HeadObject answered without a Content-Length"):
            store.stat("k")
        assert Terse.heads == 2 and store.counters()["retries-considered"] == 1
        info = store.set("k", b"data")
        assert info.size == 4 and info.etag == ""


def test_lean_listings_match_boto3(s3_server):
    """Names that need URL encoding, pagination, directories and objects of one level."""
    bucket = s3_server.new_bucket("leanlist")
    client = s3_server.client()
    names = ["a b", "c+d", "é", "x%41", "k&<>", "dir/inner", "dir2/x/y"] + [f"many/{i:04d}" for i in range(1100)]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda n: client.put_object(Bucket=bucket, Key=f"p/{n}", Body=n.encode()), names))
    lean = S3Store(s3_server.client(), bucket, "p")
    plain = S3Store(s3_server.client(), bucket, "p", lean_requests=False)
    for prefix in ("", "dir", "many", "dir2"):
        assert lean.list_dir(prefix) == plain.list_dir(prefix), prefix
        assert lean.list_prefix(prefix) == plain.list_prefix(prefix), prefix
    assert len(lean.list_dir("many")) == 1100
    assert lean.counters()["ListObjectsV2"] >= 4


# ---------------------------------------------------------------- the same GETs from the trio thread


def test_trio_thread_gets_match_boto3_and_use_no_worker_thread(stored, monkeypatch):
    server, bucket = stored
    lean = S3Store(server.client(), bucket, "p")
    plain = S3Store(server.client(), bucket, "p", lean_requests=False)
    in_threads = []
    real = lean.get_version
    monkeypatch.setattr(lean, "get_version", lambda *a: in_threads.append(a[1]) or real(*a))
    ranges = (None, ByteRange(0, 10), ByteRange(100, 5000), ByteRange(10_000), ByteRange(9_000, 20_000), ByteRange(20_000, 30_000))
    for rng in ranges:
        assert in_trio(lean, "k", rng) == plain.get("k", rng), rng
    assert in_threads == []
    assert lean.counters()["GetObject"] == 6
    assert lean.counters()["HeadObject"] == 1  # the range past the end (S3 answers 416): does the object exist?
    assert in_trio(lean, "k", ByteRange(0, 4), lean.stat("k").etag) == DATA[:4]


def test_credentials_due_for_a_refresh_are_refreshed_in_a_worker_thread(stored):
    """botocore refreshes credentials by calling out (STS, instance metadata): never on the trio thread."""
    server, bucket = stored
    store = S3Store(server.client(), bucket, "p")
    refreshed = []

    def expiring_in(seconds: float) -> dict:
        expiry = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=seconds)
        return {"access_key": ADMIN[0], "secret_key": ADMIN[1], "token": None, "expiry_time": expiry.isoformat()}

    def refresh() -> dict:
        refreshed.append(threading.current_thread() is threading.main_thread())
        return expiring_in(3600)

    store.lean._signer._credentials = RefreshableCredentials.create_from_metadata(
        metadata=expiring_in(300), refresh_using=refresh, method="test")
    assert in_trio(store, "k") == DATA
    assert refreshed == [False]  # refreshed once, by the worker thread's GET
    assert in_trio(store, "k") == DATA
    assert refreshed == [False]  # fresh now: the trio thread's GET signs with them
    assert len(store.lean.trio_pool._idle) == 1


def test_trio_thread_gets_keep_to_the_stores_bound_on_connections(stored, monkeypatch):
    server, bucket = stored
    store = S3Store(server.client(), bucket, "p", max_concurrency=2)
    opened = []
    real = http1._TrioConnection.open
    monkeypatch.setattr(http1._TrioConnection, "open", classmethod(lambda cls, *a: opened.append(1) or real(*a)))

    async def many() -> list[bytes]:
        threaded = ThreadedStore(store)
        got: list[bytes] = []
        async with trio.open_nursery() as nursery:
            for _ in range(10):
                nursery.start_soon(read_into, threaded, got)
        return got

    async def read_into(threaded: ThreadedStore, got: list[bytes]) -> None:
        got.append(await threaded.get("k"))

    assert trio.run(many) == [DATA] * 10
    assert len(opened) == 2


# ---------------------------------------------------------------- PUTs (plain http only)


def test_lean_puts_store_what_boto3_reads_back(s3_server):
    """PutObject (a short body, and one long enough to wait for ``100 Continue``) and the parts
    of a staged multipart upload, sent without botocore: boto3 reads back the same bytes and
    ETags, and botocore was not asked to send any of them."""
    bucket = s3_server.new_bucket("leanput")
    client = s3_server.client()
    sent_by_botocore = []
    client.meta.events.register("before-call.s3.PutObject", lambda **kw: sent_by_botocore.append("PutObject"))
    for op in ("UploadPart", "CreateMultipartUpload", "CompleteMultipartUpload"):
        client.meta.events.register(f"before-call.s3.{op}", lambda op=op, **kw: sent_by_botocore.append(op))
    store = S3Store(client, bucket, "p", part_size=5 * 1024 * 1024)
    assert store.lean is not None and store.lean.puts
    short, long = b"x" * 1000, bytes(range(256)) * (9 * 4096)  # 9 MiB: over http1.EXPECT_BODY
    staged = bytes(reversed(long)) + b"tail"  # two parts: 5 MiB, then the rest (views of one buffer)
    infos = [store.set("short", short), store.set("long", long), store.set("empty", b"")]
    upload = store.stage("staged", staged)
    assert upload is not None
    infos.append(upload.commit())
    admin = s3_server.client()
    for info, data in zip(infos, (short, long, b"", staged)):
        got = admin.get_object(Bucket=bucket, Key=f"p/{info.key}")
        assert got["Body"].read() == data, info.key
        assert info.size == len(data) and info.etag == got["ETag"].strip('"'), info.key
    assert sent_by_botocore == []
    counters = store.counters()
    assert counters["PutObject"] == 3 and counters["UploadPart"] == 2
    assert counters["CreateMultipartUpload"] == 1 and counters["CompleteMultipartUpload"] == 1


def _answer_posts(store: S3Store, answers: list[tuple[int, bytes]]) -> list[str]:
    """Answer the store's next POSTs (creating and completing multipart uploads) with
    ``answers`` instead of sending them; returns the targets of the POSTs seen."""
    send, seen = store.lean.pool.send, []

    def answering(method, target, headers, body):
        if method == "POST":
            seen.append(target)
            if answers:
                status, answer = answers.pop(0)
                return status, answer, {}
        return send(method, target, headers, body)

    store.lean.pool.send = answering
    return seen


def test_an_error_in_a_200_answer_to_complete_an_upload_is_retried(s3_server):
    """S3 may answer CompleteMultipartUpload with 200 and then an error document: botocore
    retries that, and so does the lean client."""
    store = S3Store(s3_server.client(), s3_server.new_bucket("leancomplete"), "p")
    upload = store.stage("k", b"data")
    seen = _answer_posts(store, [(200, b"<Error><Code>InternalError</Code><Message>x</Message></Error>")])
    info = upload.commit()
    assert len(seen) == 2 and all("uploadId=" in t for t in seen)
    assert store.get("k") == b"data" and store.stat("k").etag == info.etag
    assert store.counters()["CompleteMultipartUpload"] == 2 and store.counters()["retries-considered"] == 1


def test_a_failing_complete_aborts_the_upload_and_keeps_the_old_object(s3_server):
    bucket = s3_server.new_bucket("leancompletefail")
    store = S3Store(s3_server.client(), bucket, "p")
    store.set("k", b"old")
    upload = store.stage("k", b"new")
    _answer_posts(store, [(500, b"<Error><Code>InternalError</Code></Error>")] * 3)
    with pytest.raises(BackendError, match="'k'.*CompleteMultipartUpload.*HTTP 500 InternalError"):
        upload.commit()
    assert store.get("k") == b"old"
    assert not s3_server.client().list_multipart_uploads(Bucket=bucket).get("Uploads")


def test_lean_puts_only_over_plain_http():
    """Over https:// the lean GETs use urllib3, and PUTs stay with botocore (nothing is sent here)."""
    client = boto3.client("s3", endpoint_url="https://127.0.0.1:9", aws_access_key_id="a", aws_secret_access_key="b",
                          region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
    store = S3Store(client, "bucket", "p")
    assert store.lean is not None and not store.lean.puts


def test_lean_put_errors(s3_server):
    bucket = s3_server.new_bucket("leanputerr")
    wrong = boto3.client("s3", endpoint_url=s3_server.endpoint, aws_access_key_id=ADMIN[0], aws_secret_access_key="nope",
                         region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
    refused = S3Store(wrong, bucket, "p")
    for size in (10, 3 * 1024 * 1024):  # refused before the body, whether it waits for 100 Continue or not
        with pytest.raises(PermissionDenied, match="'k'.*PutObject.*403"):
            refused.set("k", b"z" * size)
    assert refused.counters()["PutObject"] == 2  # refusals are not retried
    assert not s3_server.client().list_objects_v2(Bucket=bucket).get("Contents")


@pytest.mark.parametrize("fail, ok", [(2, True), (3, False)])
@pytest.mark.parametrize("size", [10, 2 * 1024 * 1024])
def test_lean_put_retries_server_errors_with_the_whole_body(flaky, fail, ok, size):
    Flaky.fail = fail
    store = flaky
    data = bytes(range(256)) * (size // 256) + b"end"
    if ok:
        assert store.set("k", data).etag == "e1"
    else:
        with pytest.raises(BackendError, match="'k'.*PutObject.*HTTP 503 SlowDown"):
            store.set("k", data)
    assert Flaky.bodies == [data] * 3
    assert store.counters()["PutObject"] == 3 and store.counters()["retries-considered"] == 2
