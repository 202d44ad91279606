"""The S3 backend against a real S3 server (SeaweedFS): the conformance suite, then S3-only behaviour."""

from __future__ import annotations

from dataclasses import replace

import errno
import hashlib
import dataclasses
import threading

import pytest

from nczfs.toolbox.errors import BackendError, Conflict, KeyNotFound, Stale, to_errno
from nczfs.store.capabilities import JournalsUploads
from nczfs.store.keys import tree_listings
from nczfs.store.values import ABSENT, ByteRange, DirEntry, ObjectInfo
from nczfs.store.objstore.store import S3Store
from nczfs.store.threads import ThreadedStore
from tests.s3server import ADMIN
from tests.store.conformance import StoreConformance
from tests.store.offers import OFFERS


class TestS3Store(StoreConformance):
    optional = OFFERS[S3Store]
    uploads_in_parts = True
    stages = True
    lists_trees = True
    checks_writes = True
    checks_deletes = True

    @pytest.fixture
    def sync_store(self, s3_server) -> S3Store:
        self.server = s3_server
        self.bucket = s3_server.shared_bucket
        self.prefix = s3_server.new_prefix("conf") + "/ds"
        # a small multipart threshold so the 5 MiB conformance object goes through multipart upload
        # (and in two parts: S3's smallest part size)
        store = S3Store(s3_server.client(), self.bucket, self.prefix, multipart_threshold=5 * 1024 * 1024,
                        part_size=5 * 1024 * 1024)
        checked = store.probe_conditions()
        store.capabilities = replace(store.capabilities, checks_writes=checked, checks_deletes=checked)  # as open_s3 does: SeaweedFS honours conditions
        return store

    def read_only_store(self) -> S3Store:
        return S3Store(self.server.client(), self.bucket, self.prefix, read_only=True)

    def test_the_store_journals_its_uploads_under_its_scope(self, sync_store):
        """The mount asks a store that :class:`JournalsUploads` for its scope and aborts the uploads
        a dead mount of that scope left (``daemon/mount.py``): S3's is one."""
        assert isinstance(sync_store, JournalsUploads)
        assert sync_store.scope.endswith(f"/{self.bucket}/{self.prefix}")

    def put_raw(self, key: str, data: bytes) -> None:
        self.server.client().put_object(Bucket=self.bucket, Key=f"{self.prefix}/{key}", Body=data)

    def get_raw(self, key: str) -> bytes | None:
        try:
            return self.server.client().get_object(Bucket=self.bucket, Key=f"{self.prefix}/{key}")["Body"].read()
        except self.server.client().exceptions.NoSuchKey:
            return None


class TestS3StoreHttps(TestS3Store):
    """The same over https (a private CA), every ranged GET sent through obstore's async API on
    the store's asyncio loop, as GETs of 1 MiB and more over https are."""

    @pytest.fixture
    def sync_store(self, s3_server) -> S3Store:
        self.server = s3_server
        self.bucket = s3_server.shared_bucket
        self.prefix = s3_server.new_prefix("conf") + "/ds"
        store = S3Store(https_client(s3_server), self.bucket, self.prefix, multipart_threshold=5 * 1024 * 1024,
                        part_size=5 * 1024 * 1024)
        store.async_get_from = 1
        checked = store.probe_conditions()
        store.capabilities = replace(store.capabilities, checks_writes=checked, checks_deletes=checked)
        return store

    def read_only_store(self) -> S3Store:
        return S3Store(https_client(self.server), self.bucket, self.prefix, read_only=True)


def https_client(server):
    import boto3
    from botocore.config import Config

    from tests.s3server import ADMIN

    return boto3.client("s3", endpoint_url=server.https_endpoint, verify=str(server.ca_file),
                        aws_access_key_id=ADMIN[0], aws_secret_access_key=ADMIN[1], region_name="us-east-1",
                        config=Config(s3={"addressing_style": "path"}, connect_timeout=3, read_timeout=30))


async def test_large_gets_go_through_the_loop_pinned_to_their_version(s3_server, bucket):
    """Over https and http a GET of 1 MiB or more is sent on the store's asyncio loop: the bytes
    asked for, a stale version refused (Stale); a smaller GET on worker threads."""

    data = bytes(range(256)) * 8192  # 2 MiB
    client = s3_server.client()
    client.put_object(Bucket=bucket, Key="big/x", Body=data)
    store = ThreadedStore(S3Store(https_client(s3_server), bucket, "big"))
    etag = (await store.stat("x")).etag
    assert bytes(await store.get_version("x", ByteRange(1, 1 + 1024 * 1024), etag)) == data[1 : 1 + 1024 * 1024]
    assert bytes(await store.get_version("x", ByteRange(0, 4096), etag)) == data[:4096]
    assert store.counters()["gets-on-loop"] == 1
    client.put_object(Bucket=bucket, Key="big/x", Body=data[::-1])
    with pytest.raises(Stale):
        await store.get_version("x", ByteRange(0, 2 * 1024 * 1024), etag)
    await store.close()
    plain = ThreadedStore(S3Store(client, bucket, "big"))  # http
    assert bytes(await plain.get_version("x", ByteRange(0, 4096), None)) == data[::-1][:4096]
    assert "gets-on-loop" not in plain.counters()
    etag = (await plain.stat("x")).etag
    assert bytes(await plain.get_version("x", ByteRange(0, 2 * 1024 * 1024), etag)) == data[::-1]
    assert plain.counters()["gets-on-loop"] == 1
    client.put_object(Bucket=bucket, Key="big/x", Body=data)
    with pytest.raises(Stale):
        await plain.get_version("x", ByteRange(0, 2 * 1024 * 1024), etag)
    await plain.close()


async def test_the_cache_fetches_a_small_object_by_its_length_so_from_a_worker_thread(s3_server, bucket):
    """The cache asks for a block: for an object smaller than a block whose size it knows, a GET
    of that length (pinned by If-Match), which a worker thread sends; only a large one goes
    through the store's loop (a hop that costs a small GET more than it saves)."""
    from nczfs.cache.store import CachingStore

    client = s3_server.client()
    small, big = b"s" * 4096, bytes(range(256)) * 8192  # 4 KiB, 2 MiB
    client.put_object(Bucket=bucket, Key="sizes/small", Body=small)
    client.put_object(Bucket=bucket, Key="sizes/big", Body=big)
    threaded = ThreadedStore(S3Store(client, bucket, "sizes"))
    cache = CachingStore(threaded, cache_size=64 * 1024 * 1024, ttl=60)
    await cache.list_dir("")
    for key, data in (("small", small), ("big", big)):
        etag = (await cache.stat(key)).etag
        assert bytes(await cache.get_version(key, ByteRange(0, 4096), etag)) == data[:4096]
    assert threaded.counters()["gets-on-loop"] == 1
    await threaded.close()


async def test_small_reads_asked_together_are_sent_at_once_each_with_its_own_outcome(s3_server, bucket):
    """``get_versions``: a burst of reads (the cache's small siblings) handed to the store's
    loop once and sent at once; each read gets its own bytes or its own error, naming its key:
    missing, changed since its version (Stale); a key obstore cannot name, an empty range and a
    range past the end go through the blocking path, as a read alone would."""
    from nczfs.toolbox.errors import Stale

    client = s3_server.client()
    for i in range(4):
        client.put_object(Bucket=bucket, Key=f"b/{i}", Body=bytes([i]) * 4096)
    client.put_object(Bucket=bucket, Key="b/ctl\x01", Body=b"control")
    store = ThreadedStore(S3Store(client, bucket, "b"))
    etags = [(await store.stat(str(i))).etag for i in range(4)]
    client.put_object(Bucket=bucket, Key="b/3", Body=b"new")
    before = store.counters().get("GetObject", 0)
    got = await store.get_versions([("0", ByteRange(0, 1 << 20), etags[0]), ("1", ByteRange(100, 200), etags[1]),
                                    ("gone", ByteRange(0, 10), None), ("3", ByteRange(0, 1 << 20), etags[3]),
                                    ("ctl\x01", ByteRange(0, 100), None), ("2", ByteRange(5000, 6000), etags[2]),
                                    ("2", ByteRange(0, 0), etags[2])])
    assert bytes(got[0]) == bytes([0]) * 4096 and bytes(got[1]) == bytes([1]) * 100
    assert isinstance(got[2], KeyNotFound) and "'gone'" in str(got[2])
    assert isinstance(got[3], Stale) and "'3'" in str(got[3])
    assert bytes(got[4]) == b"control" and got[5] == b"" and got[6] == b""
    counts = store.counters()
    assert counts["read-calls-together"] == 1 and counts["reads-together"] == 7
    assert counts["GetObject"] - before == 5 + 1 + 1  # 5 at once; the control key (boto3); the 416 one again alone
    await store.close()


# ---------------------------------------------------------------------- S3 only
# Failures are injected into the real client with botocore's event hooks: the request that
# "fails" is never sent, everything else reaches the real server.


class Injected(Exception):
    pass


def fail_when(client, operation: str, predicate) -> None:
    def hook(params, **_):
        if predicate(params):
            raise Injected(f"injected failure of {operation}")

    client.meta.events.register(f"before-parameter-build.s3.{operation}", hook)


@pytest.fixture
def bucket(s3_server) -> str:
    return s3_server.new_bucket("only")


async def test_a_file_shorter_than_its_upload_fails_it_naming_the_key(s3_server, bucket, tmp_path):
    store = S3Store(s3_server.client(), bucket, "p", multipart_threshold=5 * 1024 * 1024, part_size=5 * 1024 * 1024)
    (tmp_path / "short").write_bytes(b"s" * (7 * 1024 * 1024))
    with open(tmp_path / "short", "rb", buffering=0) as f, pytest.raises(BackendError) as info:
        store.set_file("k", f, 12 * 1024 * 1024)
    assert "'k'" in str(info.value) and "ends at byte 7340032" in str(info.value)
    assert not s3_server.client().list_multipart_uploads(Bucket=bucket).get("Uploads")
    with pytest.raises(KeyNotFound):
        store.stat("k")


async def test_directory_rename_with_a_failing_copy_loses_nothing(s3_server, bucket):
    client = s3_server.client()
    store = ThreadedStore(S3Store(client, bucket, "p"))
    for i in range(12):
        await store.set(f"src/k{i:02d}", str(i).encode())
    # CopySource is a dict, or already "bucket/key" once botocore's own hook has run
    fail_when(client, "CopyObject", lambda p: str(p["CopySource"].get("Key") if isinstance(p["CopySource"], dict) else p["CopySource"]).endswith("/k05"))
    with pytest.raises(BackendError) as info:
        await store.rename_dir("src", "dst")
    assert "'src/k05'" in str(info.value) and "1 of 12" in str(info.value)
    assert await store.list_prefix("src") == ["src/k05"]
    assert len(await store.list_prefix("dst")) == 11
    assert await store.get("src/k05") == b"5"


async def test_copy_above_the_single_copy_limit_is_multipart(s3_server, bucket):
    client = s3_server.client()
    seen = []
    client.meta.events.register("before-send.s3", lambda event_name, **_: seen.append(event_name.rsplit(".", 1)[-1]))
    store = S3Store(client, bucket, "p", part_size=5 * 1024 * 1024)
    store.sizes.copy_threshold = 6 * 1024 * 1024  # stands in for S3's 5 GiB CopyObject limit
    data = bytes(range(256)) * (48 * 1024)  # 12 MiB
    store.set("big", data)
    store.copy("big", "copy")
    assert "UploadPartCopy" in seen and "CopyObject" not in seen
    assert store.get("copy") == data


@pytest.mark.parametrize("made", [False, True], ids=["over-an-object", "where-none-was"])
async def test_a_multipart_copy_is_conditional_at_its_completion(s3_server, bucket, made):
    """A copy above CopyObject's limit (lowered here from 5 GiB) carries the condition on its
    CompleteMultipartUpload: another client's write to the destination between the copy's start
    and its end refuses it (Conflict: ESTALE), that write stays, the source too, no upload is left;
    the same copy with the condition costs the requests it costs without."""
    client, other = s3_server.client(), s3_server.client()
    seen: list[tuple[str, str | None]] = []
    client.meta.events.register("before-send.s3", lambda event_name, request, **_: seen.append(
        (event_name.rsplit(".", 1)[-1], request.headers.get("If-Match") or request.headers.get("If-None-Match"))))
    # (the headers boto3 sends are bytes)
    store = S3Store(client, bucket, "p", part_size=5 * 1024 * 1024)
    store.sizes.copy_threshold = 6 * 1024 * 1024  # stands in for S3's 5 GiB CopyObject limit
    data = bytes(range(256)) * (48 * 1024)  # 12 MiB: three parts
    store.set("big", data)
    version = ABSENT if made else store.set("dst", b"old").etag

    def meddle(**_):
        other.put_object(Bucket=bucket, Key="p/dst", Body=b"another client's")

    client.meta.events.register("before-call.s3.CompleteMultipartUpload", meddle)
    with pytest.raises(Conflict) as info:
        store.copy("big", "dst", if_version=version)
    assert to_errno(info.value) == errno.ESTALE and info.value.found == store.stat("dst").etag
    assert store.get("dst") == b"another client's" and store.get("big") == data
    assert client.list_multipart_uploads(Bucket=bucket, Prefix="p/").get("Uploads", []) == []
    client.meta.events.unregister("before-call.s3.CompleteMultipartUpload", meddle)
    costs, pins = {}, {}
    for checked in (False, True):
        if made:
            store.delete("dst")
        before = ABSENT if made else store.stat("dst").etag
        seen.clear()
        store.copy("big", "dst", if_version=before if checked else None)
        costs[checked] = [name for name, _ in seen]
        pins[checked] = [pin for name, pin in seen if name == "CompleteMultipartUpload"]
        assert store.get("dst") == data
    assert costs[True] == costs[False] and costs[True].count("UploadPartCopy") == 3
    assert pins == {False: [None], True: [b"*" if made else f'"{before}"'.encode()]}


async def test_a_tree_listing_shows_what_listing_each_directory_shows(s3_server, bucket):
    """Keys other tools write: directory markers (of an empty directory and of one with keys);
    one ListObjectsV2 for the whole tree."""
    client = s3_server.client()
    store = S3Store(client, bucket, "t")
    for key in ("t/ds/v0/.zarray", "t/ds/v1/.zarray", "t/ds/v1/0.0", "t/ds/empty/", "t/ds/marked/",
                "t/ds/marked/x", "t/ds/v2/deep/er/x", "t/ds/.zgroup", "t/ds/", "t/other/x"):
        client.put_object(Bucket=bucket, Key=key, Body=b"{}")
    before = store.counters().get("ListObjectsV2", 0)
    trees = store.list_tree("ds", 1000)
    assert store.counters()["ListObjectsV2"] == before + 1
    assert trees is not None
    assert set(trees) == {"ds", "ds/v0", "ds/v1", "ds/v2", "ds/v2/deep", "ds/v2/deep/er", "ds/empty", "ds/marked"}
    for folder, entries in trees.items():
        assert entries == store.list_dir(folder), folder
    assert [e.name for e in trees["ds"]] == [".zgroup", "empty", "marked", "v0", "v1", "v2"]
    assert trees["ds/empty"] == []
    assert trees["ds/v1"][1].info.key == "ds/v1/0.0" and trees["ds/v1"][1].info.etag == store.stat("ds/v1/0.0").etag
    assert store.list_tree("ds", 7) is None  # eight keys below, and markers


def test_tree_listings_hide_names_no_file_can_have_and_let_a_directory_win():
    info = ObjectInfo("x", 1, 0, "e")
    trees = tree_listings("p", [("a/b", info), ("a", info), ("bad\\name/c", info), ("d/../e", info),
                                ("f//g", info), ("h/", info), ("i/" + "n" * 256, info), ("", info)])
    assert trees == {
        "p": [DirEntry("a", True), DirEntry("d", True), DirEntry("f", True), DirEntry("h", True), DirEntry("i", True)],
        "p/a": [DirEntry("b", False, info)], "p/d": [], "p/f": [], "p/h": [], "p/i": [],
    }


async def test_errors_name_the_key_and_the_s3_error(s3_server, bucket):
    from nczfs.toolbox.errors import KeyNotFound, NameTooLong, PermissionDenied, to_errno
    from tests.s3server import READER

    store = S3Store(s3_server.client(READER), bucket, "p")
    with pytest.raises(PermissionDenied) as info:
        store.set("x", b"1")
    assert to_errno(info.value) == 13 and "'x'" in str(info.value) and "AccessDenied" in str(info.value)
    with pytest.raises(KeyNotFound):
        store.get("missing")
    with pytest.raises(NameTooLong):
        store.stat("/".join(["a" * 200] * 6))


async def test_a_staged_write_is_invisible_until_committed_and_aborts_cleanly(s3_server):
    prefix = s3_server.new_prefix("stage")
    store = ThreadedStore(S3Store(s3_server.client(), s3_server.shared_bucket, prefix, part_size=5 * 1024 * 1024))
    admin = s3_server.client()

    def unfinished() -> list:
        return admin.list_multipart_uploads(Bucket=s3_server.shared_bucket, Prefix=prefix + "/").get("Uploads", [])

    await store.set("k", b"old")
    data = bytes(range(256)) * (44 * 1024)  # 11 MiB: three parts
    staged = await store.stage("k", data)
    assert staged is not None
    assert await store.get("k") == b"old" and len(unfinished()) == 1  # sent, not visible
    info = await staged.commit()
    assert await store.get("k") == data and info.size == len(data) and info.etag == (await store.stat("k")).etag
    assert not unfinished()

    dropped = await store.stage("gone", b"x" * 100)
    await dropped.abort()
    assert not unfinished() and await store.entry("gone") is None
    assert await store.stage("empty", b"") is None  # nothing to send: the caller PUTs it


async def test_the_parts_of_a_staged_write_go_up_in_parallel(s3_server):
    """Each part waits at a barrier until all three are being sent: parts sent one after another
    would break it (after 30 s) and fail the stage."""
    prefix = s3_server.new_prefix("stagepar")
    sync_store = S3Store(s3_server.client(), s3_server.shared_bucket, prefix, part_size=5 * 1024 * 1024)
    barrier = threading.Barrier(3, timeout=30)
    real = sync_store.uploads.upload_part

    def waiting(*args):
        barrier.wait()
        return real(*args)

    sync_store.uploads.upload_part = waiting
    data = bytes(range(256)) * (44 * 1024)  # 11 MiB: three parts
    staged = await ThreadedStore(sync_store).stage("k", data)
    await staged.commit()
    got = s3_server.client().get_object(Bucket=s3_server.shared_bucket, Key=f"{prefix}/k")
    assert got["Body"].read() == data and got["ETag"].endswith('-3"')  # three parts, in order


@pytest.mark.parametrize("how", ["set", "set_file", "stage"])
async def test_a_failed_part_leaves_no_upload_and_the_old_object(s3_server, tmp_path, how):
    """A multipart upload (of bytes, of a spilled file, or staged) whose third part fails."""
    prefix = s3_server.new_prefix("partfail")
    client = s3_server.client()
    sync_store = S3Store(client, s3_server.shared_bucket, prefix, part_size=5 * 1024 * 1024,
                         multipart_threshold=5 * 1024 * 1024)
    fail_when(client, "UploadPart", lambda p: p["PartNumber"] == 3)
    store = ThreadedStore(sync_store)
    await store.set("k", b"old")
    data = b"n" * (21 * 1024 * 1024)
    with pytest.raises(Exception, match="'k'.*UploadPart"):
        if how == "set_file":
            (tmp_path / "spilled").write_bytes(data)
            with open(tmp_path / "spilled", "rb", buffering=0) as f:
                await store.set_file("k", f, len(data))
        else:
            await getattr(store, how)("k", data)
    admin = s3_server.client()
    assert not admin.list_multipart_uploads(Bucket=s3_server.shared_bucket, Prefix=prefix + "/").get("Uploads")
    assert await store.get("k") == b"old"


async def test_closing_the_store_aborts_staged_writes_never_committed(s3_server):
    prefix = s3_server.new_prefix("stageclose")
    store = ThreadedStore(S3Store(s3_server.client(), s3_server.shared_bucket, prefix))
    await store.stage("a", b"1" * 10)
    await store.stage("b", b"2" * 10)
    await store.close()
    admin = s3_server.client()
    assert not admin.list_multipart_uploads(Bucket=s3_server.shared_bucket, Prefix=prefix + "/").get("Uploads")
    assert not admin.list_objects_v2(Bucket=s3_server.shared_bucket, Prefix=prefix + "/").get("Contents")


class Recorder:
    """An HTTP server on 127.0.0.1 that answers every PUT with 200 and an ETag and every GET
    with a 3-byte object, recording each request's method, path and headers."""

    def __init__(self):
        import http.server

        self.requests: list[tuple[str, str, dict[str, str]]] = []
        rec = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _answer(self, body: bytes) -> None:
                rec.requests.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(200)
                self.send_header("ETag", '"abc"')
                self.send_header("Last-Modified", "Thu, 26 Nov 2026 09:00:00 GMT")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_PUT(self):
                self._answer(b"")

            def do_GET(self):
                self._answer(b"abc")

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_encryption_storage_class_and_requester_pays_reach_every_request(s3_server):
    """-o sse=, sse_kms_key_id=, storage_class=, requester_pays: the headers of obstore's PUT and
    GET (seen by a recording server) and boto3's arguments for multipart uploads and copies."""
    import boto3
    from botocore.config import Config

    from nczfs.store.objstore.options import S3Options

    options = S3Options(sse="aws:kms", sse_kms_key_id="alias/k", storage_class="STANDARD_IA", requester_pays=True)
    rec = Recorder()
    try:
        client = boto3.client("s3", endpoint_url=rec.endpoint, aws_access_key_id="a", aws_secret_access_key="b",
                              region_name="us-east-1", config=Config(s3={"addressing_style": "path"}))
        store = S3Store(client, "bkt", "p", options=options)
        store.set("k", b"abc")
        assert store.get("k") == b"abc"
    finally:
        rec.close()
    (put_method, put_path, put), (get_method, _, get) = rec.requests
    assert (put_method, put_path) == ("PUT", "/bkt/p/k")
    assert put["x-amz-server-side-encryption"] == "aws:kms" and put["x-amz-server-side-encryption-aws-kms-key-id"] == "alias/k"
    assert put["x-amz-storage-class"] == "STANDARD_IA" and put["x-amz-request-payer"] == "requester"
    assert get_method == "GET" and get["x-amz-request-payer"] == "requester"

    client = s3_server.client()
    seen: dict[str, dict] = {}
    for op in ("CreateMultipartUpload", "CopyObject"):
        fail_when(client, op, lambda params, op=op: seen.setdefault(op, dict(params)) is not None)
    prefix = s3_server.new_prefix("opts")
    s3_server.client().put_object(Bucket=s3_server.shared_bucket, Key=f"{prefix}/y", Body=b"y")
    store = S3Store(client, s3_server.shared_bucket, prefix, options=options)
    with pytest.raises(Exception):
        store.stage("big", b"x" * 100)
    with pytest.raises(Exception):
        store.copy("y", "x")
    for op in seen:
        assert {k: seen[op][k] for k in ("StorageClass", "ServerSideEncryption", "SSEKMSKeyId", "RequestPayer")} == {
            "StorageClass": "STANDARD_IA", "ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "alias/k",
            "RequestPayer": "requester"}, op
    assert set(seen) == {"CreateMultipartUpload", "CopyObject"}


@pytest.mark.parametrize("endpoint, style, bucket, expect", [
    (None, "auto", "climate-data", {"virtual_hosted_style_request": "true", "region": "eu-west-1"}),
    ("https://s3.eu-west-1.amazonaws.com", "auto", "my.dotted.bucket",  # TLS names no dotted bucket host
     {"virtual_hosted_style_request": "false", "endpoint": "https://s3.eu-west-1.amazonaws.com"}),
    ("http://127.0.0.1:8333", "path", "bkt", {"virtual_hosted_style_request": "false", "endpoint": "http://127.0.0.1:8333"}),
    ("https://s3.example.org", "virtual", "bkt", {"virtual_hosted_style_request": "true", "endpoint": "https://bkt.s3.example.org"}),
], ids=["aws", "aws-dotted-bucket", "path-style-server", "virtual-hosted-server"])
def test_obstore_addresses_the_bucket_as_boto3_would(endpoint, style, bucket, expect):
    """AWS: virtual-hosted over https (no endpoint: obstore's own for the region); other servers:
    path style unless the AWS config says virtual; https bodies not hashed for the signature."""
    import boto3
    from botocore.config import Config

    from nczfs.store.objstore.client import obstore_s3
    from nczfs.store.objstore.options import S3Options

    client = boto3.client("s3", endpoint_url=endpoint, region_name="eu-west-1", aws_access_key_id="a",
                          aws_secret_access_key="b", config=Config(s3={"addressing_style": style}))
    config = obstore_s3(client, bucket, S3Options()).config
    assert {k: config.get(k) for k in expect} == expect
    assert ("endpoint" in config) == ("endpoint" in expect)
    assert config.get("unsigned_payload") == ("true" if (endpoint or "https:").startswith("https:") else None)


async def test_keys_with_control_characters_are_served_and_do_not_break_listings(s3_server, bucket, monkeypatch):
    """S3 takes any UTF-8 in a key; obstore refuses ASCII control characters in its paths and
    fails a whole listing holding one: such keys (written by other tools, or through the mount)
    are served through boto3, and the listings around them work."""
    client = s3_server.client()
    for key in ("p/d/ok", "p/d/new\nline", "p/d/tab\tdir/x", "p/d/marked\x7f/"):
        client.put_object(Bucket=bucket, Key=key, Body=b"" if key.endswith("/") else key.encode())
    store = ThreadedStore(S3Store(client, bucket, "p"))
    entries = await store.list_dir("d")
    assert [(e.name, e.is_dir) for e in entries] == [("marked\x7f", True), ("new\nline", False), ("ok", False),
                                                     ("tab\tdir", True)]
    assert await store.list_prefix("d") == ["d/new\nline", "d/ok", "d/tab\tdir/x"]
    assert await store.get("d/new\nline") == b"p/d/new\nline"
    assert await store.get("d/new\nline", ByteRange(4, 7)) == b"new"
    assert (await store.stat("d/new\nline")).size == len(b"p/d/new\nline")
    assert (await store.entry("d/tab\tdir")).is_dir and not (await store.entry("d/new\nline")).is_dir
    assert (await store.entry("d/ok")).info.size == 6
    tree = await store.list_tree("d", 1000)
    assert [e.name for e in tree["d"]] == ["marked\x7f", "new\nline", "ok", "tab\tdir"]
    rung = await store.set("d/bell\x07", b"ring")
    assert client.get_object(Bucket=bucket, Key="p/d/bell\x07")["Body"].read() == b"ring"
    assert await store.get_version("d/bell\x07", ByteRange(1, 3), rung.etag) == b"in"  # pinned, through boto3
    client.put_object(Bucket=bucket, Key="p/d/bell\x07", Body=b"rang")
    with pytest.raises(Stale):
        await store.get_version("d/bell\x07", None, rung.etag)
    # a server that ignores If-Match answers the new version: its bytes are not taken for the old one's
    sent = client.get_object
    monkeypatch.setattr(client, "get_object", lambda IfMatch=None, **kw: sent(**kw))
    with pytest.raises(Stale, match="the server answered with version"):
        await store.get_version("d/bell\x07", None, rung.etag)
    monkeypatch.undo()
    await store.rename_dir("d", "e")
    assert sorted(await store.list_prefix("e")) == ["e/bell\x07", "e/new\nline", "e/ok", "e/tab\tdir/x"]
    await store.delete("e/bell\x07")
    assert await store.entry("e/bell\x07") is None


# ---------------------------------------------------------------------- answers that never come
# Through a proxy (tests/faultproxy.py) that swallows the answers to some requests, or stops
# moving bytes altogether as a server stopped by SIGSTOP would, with short bounds: one second a
# reply, two attempts. PUTs go through obstore, and through boto3 for a key obstore cannot name
# (a control character): both paths are tried.

#: a key of each PUT path
PUT_KEYS = {"obstore": "k", "boto3": "k\x07"}


@pytest.fixture
def proxy(s3_server):
    from tests.faultproxy import FaultProxy

    with FaultProxy(s3_server.s3_port) as p:
        yield p


def proxied_store(s3_server, proxy, prefix: str, **kw) -> S3Store:
    from nczfs.store.objstore.options import S3Options

    return S3Store(s3_server.client(endpoint=proxy.endpoint, attempts=2, read_timeout=1), s3_server.shared_bucket,
                   prefix, options=S3Options(retries=1, connect_timeout=1, read_timeout=1), **kw)


def _object(s3_server, key: str) -> bytes:
    return s3_server.client().get_object(Bucket=s3_server.shared_bucket, Key=key)["Body"].read()


@pytest.mark.parametrize("path", PUT_KEYS)
def test_a_put_whose_answers_are_lost_is_found_stored_by_its_etag(s3_server, proxy, path):
    """The server stores the object, but no answer reaches the client: it is not reported lost
    (it was not), nor an error: a HEAD shows the object is what was sent."""
    prefix, key = s3_server.new_prefix("lostanswer"), PUT_KEYS[path]
    store = proxied_store(s3_server, proxy, prefix)
    proxy.drop_answers = lambda line: line.startswith("PUT ")
    info = store.set(key, b"stored, though never answered")
    assert len(proxy.dropped) == 2  # both attempts carried out, neither answered
    assert _object(s3_server, f"{prefix}/{key}") == b"stored, though never answered"
    assert info.etag == store.stat(key).etag and info.size == len(b"stored, though never answered")
    assert store.counters()["unanswered"] == 2


def test_a_completion_whose_answers_are_lost_is_found_done(s3_server, proxy):
    prefix = s3_server.new_prefix("lostcomplete")
    store = proxied_store(s3_server, proxy, prefix, part_size=5 * 1024 * 1024)
    data = bytes(range(256)) * (44 * 1024)  # 11 MiB: three parts
    staged = store.stage("k", data)
    proxy.drop_answers = lambda line: line.startswith("POST ") and "uploadId=" in line
    info = staged.commit()
    assert proxy.dropped and info.etag.endswith("-3")
    assert _object(s3_server, f"{prefix}/k") == data
    assert not store.uploads._staged  # nothing left for close() to abort


@pytest.mark.parametrize("path", PUT_KEYS)
def test_a_write_to_a_frozen_server_is_outcome_unknown_within_its_bounds(s3_server, proxy, path):
    """No answer to the PUT and none to the HEAD that checks it: the outcome is unknown, and said
    so; the server, thawed, carries the held PUT out: the object appears later, as warned."""
    import time

    from nczfs.toolbox.errors import OutcomeUnknown

    prefix, key = s3_server.new_prefix("frozen"), PUT_KEYS[path]
    store = proxied_store(s3_server, proxy, prefix)
    proxy.freeze()
    t0 = time.monotonic()
    try:
        with pytest.raises(OutcomeUnknown, match="outcome unknown"):
            store.set(key, b"sent to a frozen server")
        took = time.monotonic() - t0
    finally:
        proxy.thaw()
    assert took < 15  # two attempts and a HEAD of one second each, and the pauses between
    admin = s3_server.client()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the held requests arrive once thawed
        try:
            got = _object(s3_server, f"{prefix}/{key}")
            break
        except admin.exceptions.NoSuchKey:
            time.sleep(0.1)
    assert got == b"sent to a frozen server"


def test_a_put_to_a_server_that_refuses_connections_is_not_stored_nor_unknown(s3_server):
    """Nothing listens: no attempt reached a server, so the write is certainly not stored
    (BackendError, not OutcomeUnknown: the log may say it is lost)."""
    import socket

    from nczfs.toolbox.errors import OutcomeUnknown
    from nczfs.store.objstore.options import S3Options

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: connections are refused
    store = S3Store(s3_server.client(endpoint=f"http://127.0.0.1:{port}", attempts=2, read_timeout=1),
                    s3_server.shared_bucket, "p", options=S3Options(retries=1, connect_timeout=1, read_timeout=1))
    with pytest.raises(BackendError) as failed:
        store.set("k", b"never sent")
    assert not isinstance(failed.value, OutcomeUnknown) and "'k'" in str(failed.value)
    assert store.counters()["PutObject"] == 2 and not store.counters().get("unanswered")


def test_a_read_from_a_frozen_server_fails_within_its_bounds(s3_server, proxy):
    import time

    prefix = s3_server.new_prefix("frozenread")
    s3_server.client().put_object(Bucket=s3_server.shared_bucket, Key=f"{prefix}/k", Body=b"x" * 1000)
    store = proxied_store(s3_server, proxy, prefix)
    proxy.freeze()
    t0 = time.monotonic()
    try:
        for call in (lambda: store.get("k"), lambda: store.list_dir(""), lambda: store.stat("k")):
            with pytest.raises(BackendError):
                call()
    finally:
        proxy.thaw()
    assert time.monotonic() - t0 < 3 * (2 * 1 + 1)
    assert store.get("k") == b"x" * 1000


def test_boto3_requests_make_retries_plus_one_attempts_as_obstore_does(monkeypatch):
    """-o retries=N: N + 1 attempts in all for boto3's requests too (botocore's ``max_attempts``
    counts the retries only: it was given N + 1 and made N + 2). Nothing listens at the
    endpoint: every attempt is refused at once."""
    import socket

    from nczfs.config.mountconfig import MountConfig
    from nczfs.config.source import parse_source
    from nczfs.store.objstore.client import make_client
    from nczfs.store.objstore.options import S3Options

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{s.getsockname()[1]}"  # closed again: connections are refused
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "a")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "b")
    for retries in (0, 1):
        config = MountConfig.of(parse_source("s3://bucket/p"), "/mnt", endpoint_url=endpoint,
                             retries=retries, connect_timeout=1)
        store = S3Store(make_client(S3Options.of(config.opening()), config.source.parsed), "bucket", "p", options=S3Options.of(config.opening()))
        with pytest.raises(BackendError):
            store.open_upload("k")
        assert store.counters()["CreateMultipartUpload"] == retries + 1


def test_an_upload_made_by_an_unanswered_attempt_before_an_answered_one_is_swept(s3_server, proxy):
    """The first attempt of a CreateMultipartUpload gets no answer, the second does: the server
    made two uploads, nczfs knows one. The other is aborted at close, the known one completes."""
    import time

    prefix = s3_server.new_prefix("sweep2")
    admin = s3_server.client()
    store = proxied_store(s3_server, proxy, prefix)
    proxy.freeze()
    threading.Timer(1.5, proxy.thaw).start()  # after the first attempt's second, before the second's
    upload = store.open_upload("k")

    def uploads():
        found = admin.list_multipart_uploads(Bucket=s3_server.shared_bucket, Prefix=f"{prefix}/k").get("Uploads", [])
        return [u for u in found if u["Key"] == f"{prefix}/k"]

    deadline = time.monotonic() + 10
    while len(uploads()) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(uploads()) == 2, uploads()
    upload.send(1, b"the one nczfs knows")
    upload.complete(len(b"the one nczfs knows"))
    assert len(uploads()) == 1  # the one it never learnt of
    store.close()
    assert uploads() == []
    assert admin.get_object(Bucket=s3_server.shared_bucket, Key=f"{prefix}/k")["Body"].read() == b"the one nczfs knows"


@pytest.mark.parametrize("who", ["the store's close", "the next mount"])
def test_uploads_an_unanswered_create_made_later_are_swept(s3_server, proxy, who):
    """A CreateMultipartUpload sent to a stopped server gets no answer; thawed, the server makes
    the upload anyway, under an id never told: found by its key and time and aborted, by the
    store's close, or (the daemon killed first) by the next mount of the prefix through the
    journal, where it is noted as ``?TIME``; an upload of another key is left alone."""
    import time

    from nczfs.toolbox.errors import OutcomeUnknown

    prefix = s3_server.new_prefix("sweep")
    admin = s3_server.client()
    other = admin.create_multipart_upload(Bucket=s3_server.shared_bucket, Key=f"{prefix}/other")["UploadId"]
    store = proxied_store(s3_server, proxy, prefix)
    noted: list[tuple] = []

    class Journal:
        def opened(self, *args):
            noted.append(("opened", *args))

        def done(self, *args):
            noted.append(("done", *args))

    store.upload_log = Journal()
    proxy.freeze()
    try:
        with pytest.raises(OutcomeUnknown):
            store.open_upload("k")
    finally:
        proxy.thaw()

    def uploads(key):
        found = admin.list_multipart_uploads(Bucket=s3_server.shared_bucket, Prefix=f"{prefix}/{key}").get("Uploads", [])
        return [u for u in found if u["Key"] == f"{prefix}/{key}"]

    deadline = time.monotonic() + 10
    while not uploads("k") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert uploads("k"), "the held CreateMultipartUpload made no upload"
    assert noted and noted[0][0] == "opened" and noted[0][1].startswith("?") and noted[0][2] == f"{prefix}/k"
    if who == "the store's close":
        store.close()
        assert noted[-1] == ("done", noted[0][1])
    else:
        # killed: never closed, nothing swept; the journal's entry goes to the next mount
        later = S3Store(s3_server.client(), s3_server.shared_bucket, prefix)
        assert later.abort_uploads({noted[0][1]: noted[0][2]}) == {}
    assert not uploads("k")
    assert [u["UploadId"] for u in uploads("other")] == [other]
    admin.abort_multipart_upload(Bucket=s3_server.shared_bucket, Key=f"{prefix}/other", UploadId=other)


async def test_with_posix_meta_lookups_and_listings_read_the_attributes_in_object_metadata(s3_server):
    """-o posix_meta: stat, entry and list_dir HEAD objects for x-amz-meta-mode/-uid/-gid/-mtime."""
    import stat as st

    from nczfs.store.values import Meta

    prefix = s3_server.new_prefix("meta")
    writer = ThreadedStore(S3Store(s3_server.client(), s3_server.shared_bucket, prefix))
    reader = ThreadedStore(S3Store(s3_server.client(), s3_server.shared_bucket, prefix, head_for_meta=True))
    await writer.set("d/f", b"x")
    await writer.set_meta("d/f", Meta(mode=st.S_IFREG | 0o600, uid=7, gid=8, mtime_ns=3_000_000_000))
    await reader.make_node("d/l", Meta(mode=st.S_IFLNK | 0o777, uid=7, gid=8), "f")  # symlinks need it
    info = await reader.stat("d/f")
    assert (info.meta.mode, info.meta.uid, info.meta.gid, info.mtime_ns) == (st.S_IFREG | 0o600, 7, 8, 3_000_000_000)
    assert st.S_ISLNK((await reader.entry("d/l")).attrs.mode)
    assert {e.name: st.S_IFMT(e.attrs.mode) for e in await reader.list_dir("d")} == {"f": st.S_IFREG, "l": st.S_IFLNK}
    assert (await writer.stat("d/f")).meta is None  # without it: no HEAD of its own, no attributes
    await writer.close()
    await reader.close()


def test_a_mount_finds_out_once_whether_the_server_takes_conditions(s3_server, monkeypatch, caplog):
    """open_s3 probes whether a PUT with If-None-Match: * over an object is refused: SeaweedFS
    refuses it (writes are then conditional); a server that ignores conditions (here: obstore's
    PUTs sent without them) makes the mount fall back to last-writer-wins, said once in the log;
    ``-o overwrite=last_writer_wins`` and read-only mounts send no probe."""
    import logging

    import obstore

    from nczfs.store.objstore.s3url import parse_s3_url
    from nczfs.store.objstore.options import S3Options
    from nczfs.store.objstore.store import open_s3

    loc = parse_s3_url(f"s3://{s3_server.shared_bucket}/{s3_server.new_prefix('probe')}")
    options = S3Options(endpoint_url=s3_server.endpoint, region="us-east-1")
    store = open_s3(options, loc)
    assert store.capabilities.checks_writes and store.counters().get("PutObject") == 2
    assert store.list_prefix("") == []  # the probe object is gone
    for other in (dataclasses.replace(options, overwrite="last_writer_wins"), dataclasses.replace(options, read_only=True)):
        quiet = open_s3(other, loc)
        assert not quiet.capabilities.checks_writes and "PutObject" not in quiet.counters()
    real_put = obstore.put
    monkeypatch.setattr(obstore, "put", lambda *args, mode=None, **kw: real_put(*args, **kw))
    with caplog.at_level(logging.WARNING, logger="nczfs"):
        ignoring = open_s3(options, loc)
    assert not ignoring.capabilities.checks_writes and ignoring.list_prefix("") == []
    warned = [r.getMessage() for r in caplog.records if "ignores conditional writes" in r.getMessage()]
    assert len(warned) == 1 and "the last writer wins" in warned[0], warned


def test_over_http_a_signed_part_carries_its_sha256_and_no_crc32_besides(s3_server, monkeypatch):
    """SigV4 over http signs the SHA-256 of every body: the part's check. botocore's default
    adds a CRC32 of it: not sent there. Over https the body is
    not signed (UNSIGNED-PAYLOAD), and the CRC32 stays its one check."""
    from nczfs.config.mountconfig import MountConfig
    from nczfs.config.source import parse_source
    from nczfs.store.objstore.client import make_client
    from nczfs.store.objstore.options import S3Options

    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ADMIN[0])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", ADMIN[1])
    source = parse_source(f"s3://{s3_server.shared_bucket}/p")

    def client(endpoint: str):
        config = MountConfig.of(source, "/mnt", endpoint_url=endpoint)
        return make_client(S3Options.of(config.opening()), config.source.parsed), S3Options.of(config.opening())

    sent: list[dict[str, str]] = []
    c, options = client(s3_server.endpoint)
    c.meta.events.register("before-send.s3.UploadPart", lambda request, **_: sent.append(dict(request.headers)))
    store = S3Store(c, s3_server.shared_bucket, s3_server.new_prefix("crc"), options=options)
    store.stage("k", b"x" * 1000).abort()
    headers = {k.lower(): v.decode() if isinstance(v, bytes) else v for k, v in sent[0].items()}
    assert len(sent) == 1 and not any(k.startswith("x-amz-checksum") for k in headers)
    assert headers["x-amz-content-sha256"] == hashlib.sha256(b"x" * 1000).hexdigest()
    assert client("https://127.0.0.1:1")[0].meta.config.request_checksum_calculation == "when_supported"
