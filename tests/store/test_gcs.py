"""The GCS backend (obstore) against fake-gcs-server: the conformance suite, then GCS-only behaviour."""

from __future__ import annotations

from dataclasses import replace

import pytest
import trio

from nczfs.toolbox.errors import Stale
from nczfs.store.values import ByteRange
from nczfs.store.objstore.cloudsdk import GcsSdk
from nczfs.store.objstore.cloudwrites import CloudStore
from nczfs.store.objstore.obprefix import ASYNC_GET_FROM, ObjectStoreBackend
from nczfs.store.objstore.transport import obstore_client_options, retry_config
from tests.gcsserver import service_account_file
from tests.store.conformance import StoreConformance
from tests.store.offers import OFFERS


@pytest.fixture(scope="module")
def gcs_key(tmp_path_factory):
    return service_account_file(tmp_path_factory.mktemp("gcs-sa") / "sa.json")


def gcs_backend(server, bucket: str, prefix: str, key, **kw) -> CloudStore:
    from obstore.store import GCSStore

    store = GCSStore(bucket, base_url=server.endpoint, service_account_path=str(key),
                     client_options=obstore_client_options(server.endpoint), retry_config=retry_config())
    sdk = GcsSdk(bucket, server.endpoint, credentials_file=str(key))
    return CloudStore(store, prefix, url=f"gs://{bucket}/{prefix}", service="GCS", sdk=sdk, **kw)


class TestGCSStore(StoreConformance):
    optional = OFFERS[CloudStore]
    lists_trees = True
    checks_writes = True
    checks_deletes = True  # google-cloud-storage's ifGenerationMatch (tests/gcsserver.py checks it)

    @pytest.fixture
    def sync_store(self, gcs_server, gcs_key) -> ObjectStoreBackend:
        self.server, self.key = gcs_server, gcs_key
        if not hasattr(type(self), "bucket"):
            type(self).bucket = gcs_server.new_bucket("conf")
        self.prefix = f"p{id(self) % 100000}-{__import__('uuid').uuid4().hex[:8]}/ds"
        # multipart above 5 MiB, so that the 5 MiB conformance object goes up in two parts
        store = gcs_backend(gcs_server, self.bucket, self.prefix, gcs_key, multipart_threshold=5 * 1024 * 1024,
                           part_size=5 * 1024 * 1024)
        checked = store.probe_conditions()  # sets checks_deletes itself: the record is read after it
        store.capabilities = replace(store.capabilities, checks_writes=checked)  # as a mount finds out (deletes too)
        return store

    def read_only_store(self) -> ObjectStoreBackend:
        return gcs_backend(self.server, self.bucket, self.prefix, self.key, read_only=True)

    def put_raw(self, key: str, data: bytes) -> None:
        self.server.put(self.bucket, f"{self.prefix}/{key}", data)

    def get_raw(self, key: str) -> bytes | None:
        return self.server.get(self.bucket, f"{self.prefix}/{key}")


def test_a_read_pinned_to_an_older_version_is_stale(gcs_server, gcs_key):
    bucket = gcs_server.new_bucket("pin")
    store = gcs_backend(gcs_server, bucket, "p", gcs_key)
    old = store.set("k", b"old contents")
    store.set("k", b"new contents!")
    with pytest.raises(Stale):
        store.get_version("k", ByteRange(0, 4), old.etag)
    assert store.get_version("k", ByteRange(0, 3), store.stat("k").etag) == b"new"


def test_a_write_is_conditioned_on_the_generation_its_own_head_found(gcs_server, gcs_key):
    """The generation a write conditioned on a version goes out with is the one the HEAD of that
    version answered, not the store's table of generations, which other calls fill too. Here,
    right after that HEAD, another client writes a new version and a lookup records it in the
    table: the write must be refused, not sent unconditioned over the version nobody read."""
    import obstore

    bucket = gcs_server.new_bucket("gen")
    writer = gcs_backend(gcs_server, bucket, "p", gcs_key)
    first = writer.set("k", b"first")
    store = gcs_backend(gcs_server, bucket, "p", gcs_key)  # its table knows no generation of "k"
    store.capabilities = replace(store.capabilities, checks_writes=store.probe_conditions())
    assert store.capabilities.checks_writes
    heads_answer = store._info
    raced: list[str] = []

    def head_then_another_writer(key, meta):
        info = heads_answer(key, meta)
        if key == "k" and not raced:
            newer = writer.set("k", b"another writer's")
            raced.append(newer.etag)
            store._remember("k", newer.etag, str(obstore.head(writer.store, "p/k")["version"]))  # a lookup of it, meanwhile
        return info

    store._info = head_then_another_writer
    with pytest.raises(Stale):
        store.set("k", b"mine", if_version=first.etag)
    assert raced and gcs_server.get(bucket, "p/k") == b"another writer's"


@pytest.mark.parametrize("way", ["worker-thread", "on-loop", "burst"])
def test_a_read_pinned_to_a_version_and_answered_with_another_is_stale(gcs_server, gcs_key, way):
    """A GET pinned to a version (If-Match) that the server answers with another version's bytes
    (this stand-in checks the condition apart from the read, and another writer's version comes
    between): Stale, whichever way the GET is sent, never the other version's bytes as the pinned
    one's (the cache would keep them under its ETag, cut at its size: a consolidated copy read so
    was not JSON, and the mount's later entries were dropped unsaid)."""
    bucket = gcs_server.new_bucket("pin2")
    store = gcs_backend(gcs_server, bucket, "p", gcs_key)
    size = 2 * ASYNC_GET_FROM  # large enough for the loop's path
    old = store.set("k", b"o" * size)

    def another_writer() -> None:
        gcs_server.between_check_and_read = None
        gcs_server.put(bucket, "p/k", b"n" * (size + 10))

    gcs_server.between_check_and_read = another_writer
    try:
        if way == "worker-thread":
            with pytest.raises(Stale, match="the server answered with version"):
                store.get_version("k", ByteRange(0, 1000), old.etag)
        elif way == "on-loop":
            with pytest.raises(Stale, match="the server answered with version"):
                trio.run(store.get_version_async, "k", ByteRange(0, size), old.etag)
        else:
            got = trio.run(store.get_versions_async, [("k", ByteRange(0, 1000), old.etag)])
            assert isinstance(got[0], Stale) and "the server answered with version" in str(got[0]), got
        assert gcs_server.between_check_and_read is None  # the other writer did come between
    finally:
        gcs_server.between_check_and_read = None
        store.close()
